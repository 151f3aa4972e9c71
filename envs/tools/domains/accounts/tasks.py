"""The accounts task templates: entity pools and pickers, and the templates that need code.

The templates that differ only in data are recipes in ``tasks.json``; see
:mod:`agentgym.envs.tools.taskgen` for how both become tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgym.envs.tools.backend import Domain, Task
from agentgym.envs.tools.backend import id_number as _num
from agentgym.envs.tools.domains.accounts.backend import (
    CUSTOMER_COMMENTS,
    NEW_EMAIL_DOMAINS,
    SUBJECTS,
    new_address,
    phone,
)
from agentgym.envs.tools.domains.accounts.tools import (
    CATEGORIES,
    CITIES,
    COUNTRIES,
    LABELS,
    MAX_ADDRESSES,
    PRIORITIES,
    RESOLUTIONS,
    REWARDS,
    TIERS,
)
from agentgym.envs.tools.taskgen import Draft, Drawing, TaskGen, draw_tasks, load_recipes

DRAWING = Drawing(
    type_seed=1009, attempts=400, unique="request", unique_across_types=True, rules=True
)
"""One rng per type; requests never repeat, even across types; drafts keep their type's rules."""


def generate(domain: Domain, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
    """``per_type`` accounts tasks of each type for the initial ``state``, seeded by ``seed``."""
    return draw_tasks(AccountTasks(domain, state), seed, per_type, DRAWING)


def _category(category: str) -> str:
    return '"other"-category' if category == "other" else category


def _listing(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1]


class AccountTasks(TaskGen):
    """Task templates over one initial accounts state."""

    def __init__(self, domain: Domain, state: dict[str, Any]) -> None:
        """Index the state's customers and tickets into the pools recipes draw from."""
        super().__init__(domain, state, load_recipes(__package__ or __name__))
        self.customers = sorted(state["customers"], key=_num)
        self.tickets = sorted(state["tickets"], key=_num)
        phrases = self.tables["resolution_phrases"]
        self.tables["own_resolution_phrases"] = {
            k: v.replace("the customer has", "I have") for k, v in phrases.items()
        }
        self.open_tickets = [t for t in self.tickets if state["tickets"][t]["status"] == "open"]
        self.pools.update(
            customers=self.customers,
            tickets=self.tickets,
            open_tickets=self.open_tickets,
            resolutions=RESOLUTIONS,
            customer_comments=CUSTOMER_COMMENTS,
            cities=[c for cities in CITIES.values() for c in cities],
            has_open_tickets=self._where(lambda c: bool(self._tickets_of(c, "open"))),
            has_tickets=self._where(lambda c: bool(self._tickets_of(c))),
            many_open=self._where(lambda c: len(self._tickets_of(c, "open")) > 1),
            many_tickets=self._where(lambda c: len(self._tickets_of(c)) > 1),
            can_redeem=self._where(lambda c: bool(self._affordable(c))),
            several_rewards=self._where(lambda c: len(self._affordable(c)) > 1),
            has_room=self._where(lambda c: len(self._addresses(c)) < MAX_ADDRESSES),
            multi_address=self._where(lambda c: len(self._addresses(c)) > 1),
            three_addresses=self._where(lambda c: len(self._addresses(c)) > 2),
        )

    # -- entity pickers over the initial state ------------------------------------------------

    def _where(self, predicate: Callable[[str], bool]) -> list[str]:
        return [cid for cid in self.customers if predicate(cid)]

    def _addresses(self, cid: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.state["customers"][cid]["addresses"]
        return found

    def _tickets_of(self, customer_id: str, status: str = "all") -> list[dict[str, Any]]:
        t = self.state["tickets"]
        return [
            t[tid]
            for tid in self.tickets
            if t[tid]["customer_id"] == customer_id and status in ("all", t[tid]["status"])
        ]

    def _affordable(self, cid: str) -> list[str]:
        customer = self.state["customers"][cid]
        return [
            r
            for r, (cost, tier) in REWARDS.items()
            if cost <= customer["points"]["balance"]
            and TIERS.index(customer["tier"]) >= TIERS.index(tier)
        ]

    def affordable_reward(self, cid: str) -> str:
        """A reward the customer can redeem now."""
        return str(self.rng.choice(self._affordable(cid)))

    def non_default_address(self, cid: str) -> str:
        """One of the customer's addresses other than the default."""
        c = self.state["customers"][cid]
        return str(
            self.rng.choice(
                [
                    a["address_id"]
                    for a in c["addresses"]
                    if a["address_id"] != c["default_address_id"]
                ]
            )
        )

    def ticket_of(self, cid: str, status: str) -> str:
        """One of the customer's tickets with ``status`` ("all" for any)."""
        return str(self.rng.choice(self._tickets_of(cid, status))["ticket_id"])

    def month_of_entry(self, cid: str) -> str:
        """The first day of the month of one of the customer's points entries."""
        history = self.state["customers"][cid]["points"]["history"]
        return str(self.rng.choice(history)["date"][:8] + "01")

    def new_email(self, cid: str) -> str:
        """An email address for the customer other than the one on file."""
        customer = self.state["customers"][cid]
        first, last = customer["name"].lower().split()
        local = self.phrase(f"{first}.{last}", f"{first[0]}{last}", f"{first}{last[0]}", first)
        email = f"{local}@{self.rng.choice(NEW_EMAIL_DOMAINS)}"
        return email if email != customer["email"] else f"{last}.{first}@work.example"

    def new_phone(self) -> str:
        """A phone number of a random country."""
        return phone(self.rng, self.rng.choice(COUNTRIES))

    def new_address(self) -> dict[str, Any]:
        """A new address's fields: label, street, city, postcode and country."""
        address = new_address(self.rng, "", self.rng.choice(LABELS), self.rng.choice(COUNTRIES))
        del address["address_id"]
        return address

    def new_issue(self) -> tuple[str, str, str]:
        """A ticket's category, priority and subject."""
        category = self.rng.choice(CATEGORIES)
        return category, self.rng.choice(PRIORITIES), self.rng.choice(SUBJECTS[category])

    def issue(self, priority: str, category: str) -> str:
        """E.g. 'an urgent-priority billing ticket', 'a ticket in the "other" category'."""
        if priority:
            article = "an" if priority == "urgent" else "a"
            kind = f"{article} {priority}-priority"
        else:
            kind = "a support"
        if category == "other":
            return f'{kind} ticket in the "other" category'
        return f"{kind} {category} ticket"

    def labelled(self, label: str) -> str:
        """E.g. 'home address', 'address labelled "other"'."""
        return 'address labelled "other"' if label == "other" else f"{label} address"

    def _several(self, items: list[str], low: int = 2, high: int = 4) -> list[str]:
        return sorted(self.rng.sample(items, self.rng.randint(low, high)), key=_num)

    # -- templates that need code ---------------------------------------------------------------

    def s_tier(self) -> Draft:
        """A customer's tier, sometimes with the member-since date."""
        cid = self.rng.choice(self.customers)
        r = self.run.one("get_customer", customer_id=cid)
        if self.rng.random() < 0.5:
            request = f"Since when has customer {cid} been a member, and at what tier?"
            return Draft(request, [r["member_since"], r["tier"]])
        request = self.phrase(
            f"What loyalty tier is customer {cid} on?",
            f"Can you tell me which membership tier account {cid} has?",
        )
        return Draft(request, [r["tier"]])

    def s_default_address(self) -> Draft:
        """A customer's default address, read from the address list."""
        cid = self.rng.choice(self.customers)
        r = self.run.one("list_addresses", customer_id=cid)
        default = next(a for a in r["addresses"] if a["is_default"])
        request = self.phrase(
            f"Which address is the default one for customer {cid}?",
            f"Where do parcels for account {cid} go by default? Show me the saved addresses.",
        )
        return Draft(request, [default["street"], default["city"]])

    def c_addresses(self) -> Draft:
        """A customer known by name asks for their saved addresses."""
        cid = self.rng.choice(self.customers)
        name = self.state["customers"][cid]["name"]
        r = self.run.one("list_addresses", customer_id=cid)
        default = next(a for a in r["addresses"] if a["is_default"])
        request = f"Hello, I'm {name}. Which delivery addresses do you have saved for me?"
        return Draft(request, [default["street"]], f"It's account {cid}.", {"customer_id": cid})

    def c_redeem(self) -> Draft | None:
        """A customer wants a reward the request does not name."""
        cid = self.pick(self.pools["several_rewards"])
        if cid is None:
            return None
        reward = self.affordable_reward(cid)
        r = self.run.one("redeem_reward", customer_id=cid, reward=reward)
        request = self.phrase(
            f"Customer {cid} would like to spend some loyalty points on a reward.",
            f"I'm customer {cid} and I want to redeem my points.",
        )
        reply = f"{self.tables['reward_phrases'][reward].capitalize()} ({reward}), please."
        return Draft(request, [r["redemption_id"]], reply, {"reward": reward})

    # -- parallel -------------------------------------------------------------------------------

    def p_profiles(self) -> Draft:
        """Tiers and points of two to four customers."""
        cids = self._several(self.customers)
        out = self.run.turn(*[("get_customer", {"customer_id": c}) for c in cids])
        request = f"Compare the loyalty tiers and points of customers {_listing(cids)}."
        return Draft(request, [str(r["points_balance"]) for r in out][:3])

    def p_balances(self) -> Draft:
        """Points balances of two to four customers."""
        cids = self._several(self.customers)
        out = self.run.turn(*[("get_points_history", {"customer_id": c}) for c in cids])
        request = f"What are the loyalty points balances of customers {_listing(cids)}?"
        return Draft(request, [str(r["balance"]) for r in out][:3])

    def p_tickets(self) -> Draft:
        """Subjects and statuses of two to four tickets."""
        tids = self._several(self.tickets)
        out = self.run.turn(*[("get_ticket", {"ticket_id": t}) for t in tids])
        request = f"Give me the subject and status of tickets {_listing(tids)}."
        return Draft(request, [r["subject"] for r in out][:3])

    def p_close_tickets(self) -> Draft:
        """Close two or three open tickets with one resolution."""
        tids = self._several(self.open_tickets, 2, 3)
        resolution = self.rng.choice(RESOLUTIONS)
        out = self.run.turn(
            *[("close_ticket", {"ticket_id": t, "resolution": resolution}) for t in tids]
        )
        request = f"Close tickets {_listing(tids)} as {resolution}."
        return Draft(request, [out[0]["status"], out[0]["closed_on"]])

    def p_comments(self) -> Draft:
        """Post one comment on two or three open tickets."""
        tids = self._several(self.open_tickets, 2, 3)
        text = self.rng.choice(CUSTOMER_COMMENTS)
        out = self.run.turn(*[("add_ticket_comment", {"ticket_id": t, "text": text}) for t in tids])
        request = f'Post the comment "{text}" on each of the tickets {_listing(tids)}.'
        return Draft(request, [str(r["comment_count"]) for r in out][:3])

    def p_update_emails(self) -> Draft:
        """Change two or three customers' emails."""
        cids = self._several(self.customers, 2, 3)
        emails = [self.new_email(c) for c in cids]
        pairs = list(zip(cids, emails, strict=True))
        out = self.run.turn(*[("update_email", {"customer_id": c, "email": e}) for c, e in pairs])
        changes = _listing([f"{c} to {e}" for c, e in pairs])
        request = f"Change these customers' email addresses: {changes}."
        return Draft(request, [r["email"] for r in out])

    # -- dependent ------------------------------------------------------------------------------

    def d_open_comment(self) -> Draft:
        """Open a ticket, then comment on it."""
        cid = self.rng.choice(self.customers)
        category, priority, subject = self.new_issue()
        text = self.rng.choice(CUSTOMER_COMMENTS)
        a = self.run.one(
            "open_ticket", customer_id=cid, category=category, priority=priority, subject=subject
        )
        self.run.one("add_ticket_comment", ticket_id=a["ticket_id"], text=text)
        request = (
            f'Open {self.issue(priority, category)} for customer {cid} about "{subject}" '
            f'and add the comment "{text}" to it. What is the ticket number?'
        )
        return Draft(request, [a["ticket_id"]])

    def d_open_comment_close(self) -> Draft:
        """Open a ticket, comment on it, then close it."""
        cid = self.rng.choice(self.customers)
        category, priority, subject = self.new_issue()
        text = self.rng.choice(CUSTOMER_COMMENTS)
        a = self.run.one(
            "open_ticket", customer_id=cid, category=category, priority=priority, subject=subject
        )
        self.run.one("add_ticket_comment", ticket_id=a["ticket_id"], text=text)
        c = self.run.one("close_ticket", ticket_id=a["ticket_id"], resolution="resolved")
        request = (
            f'Log {self.issue(priority, category)} for customer {cid} titled "{subject}", '
            f'note "{text}" on it, then close it as resolved since we fixed it on the call.'
        )
        return Draft(request, [a["ticket_id"], c["status"]])

    def _unique_ticket(
        self, status: str, key: Callable[[dict[str, Any]], str]
    ) -> tuple[str, dict[str, Any]] | None:
        """A customer and one of their tickets with ``status`` that ``key`` singles out."""
        options = []
        for cid in self.customers:
            mine = self._tickets_of(cid)
            for t in mine:
                if status in ("all", t["status"]) and [key(u) for u in mine].count(key(t)) == 1:
                    options.append((cid, t))
        return self.rng.choice(options) if options else None

    def d_close_by_category(self) -> Draft | None:
        """Close the customer's open ticket of a category, found by listing."""
        picked = self._unique_ticket("open", lambda t: t["category"])
        if picked is None:
            return None
        cid, ticket = picked
        category = _category(ticket["category"])
        self.run.one("list_tickets", customer_id=cid, status="open")
        c = self.run.one("close_ticket", ticket_id=ticket["ticket_id"], resolution="resolved")
        request = self.phrase(
            f"Customer {cid} says their {category} issue is sorted; close that ticket.",
            f"Please close customer {cid}'s open {category} ticket as resolved.",
        )
        return Draft(request, [ticket["ticket_id"], c["status"]])

    def d_comment_by_subject(self) -> Draft | None:
        """Comment on the customer's open ticket of a subject, found by listing."""
        picked = self._unique_ticket("open", lambda t: t["subject"])
        if picked is None:
            return None
        cid, ticket = picked
        text = self.rng.choice(CUSTOMER_COMMENTS)
        self.run.one("list_tickets", customer_id=cid, status="open")
        c = self.run.one("add_ticket_comment", ticket_id=ticket["ticket_id"], text=text)
        request = (
            f'On customer {cid}\'s open ticket about "{ticket["subject"]}", add the comment '
            f'"{text}"'
        )
        return Draft(request, [ticket["ticket_id"], str(c["comment_count"])])

    def d_latest_comment(self) -> Draft | None:
        """The latest comment on the customer's ticket of a subject, found by listing."""
        picked = self._unique_ticket("all", lambda t: t["subject"])
        if picked is None or not picked[1]["comments"]:
            return None
        cid, ticket = picked
        self.run.one("list_tickets", customer_id=cid)
        r = self.run.one("get_ticket", ticket_id=ticket["ticket_id"])
        request = (
            f'What was the latest comment on customer {cid}\'s ticket "{ticket["subject"]}", and '
            "when was it written?"
        )
        return Draft(request, [r["comments"][-1]["text"], r["comments"][-1]["date"]])

    def _unique_address(
        self, key: Callable[[dict[str, Any]], str]
    ) -> tuple[str, dict[str, Any]] | None:
        """A customer and one of their non-default addresses that ``key`` singles out."""
        options = []
        for cid in self.customers:
            c = self.state["customers"][cid]
            keys = [key(a) for a in c["addresses"]]
            for a in c["addresses"]:
                if a["address_id"] != c["default_address_id"] and keys.count(key(a)) == 1:
                    options.append((cid, a))
        return self.rng.choice(options) if options else None

    def d_default_by_city(self) -> Draft | None:
        """Make the customer's address in a city the default, found by listing."""
        picked = self._unique_address(lambda a: a["city"])
        if picked is None:
            return None
        cid, address = picked
        self.run.one("list_addresses", customer_id=cid)
        r = self.run.one("set_default_address", customer_id=cid, address_id=address["address_id"])
        request = self.phrase(
            f"Customer {cid} wants their {address['city']} address to be the default from now on.",
            f"Make the address in {address['city']} the default for customer {cid}.",
        )
        return Draft(request, [r["default_address_id"]])

    def d_delete_by_place(self) -> Draft | None:
        """Delete the customer's address on a street, found by listing."""
        picked = self._unique_address(lambda a: a["street"])
        if picked is None:
            return None
        cid, address = picked
        self.run.one("list_addresses", customer_id=cid)
        r = self.run.one("delete_address", customer_id=cid, address_id=address["address_id"])
        request = (
            f"Customer {cid} has moved out of {address['street']}, {address['city']}; delete that "
            "saved address."
        )
        return Draft(request, [r["address_id"], str(r["remaining"])])
