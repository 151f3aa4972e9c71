"""The accounts backend: seeded state, tool implementations and resource paths.

The state holds customers (with addresses and points) and support tickets.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable
from typing import Any

from agentgym.envs.tools.backend import entity, failed_precondition, not_found
from agentgym.envs.tools.backend import id_number as _num
from agentgym.envs.tools.domains.accounts.tools import (
    CATEGORIES,
    CITIES,
    COUNTRIES,
    LABELS,
    MAX_ADDRESSES,
    MAX_OPEN_TICKETS,
    PRIORITIES,
    RESOLUTIONS,
    REWARDS,
    TICKET_SUMMARY_KEYS,
    TIERS,
    TODAY,
)

FIRST_NAMES = (
    "Alice", "Ben", "Chloe", "Daniel", "Emma", "Farid", "Grace", "Hugo", "Isla", "Jonas",
    "Keira", "Liam", "Maya", "Noah", "Olivia", "Priya", "Quinn", "Rosa", "Samir", "Tara",
)  # fmt: skip
LAST_NAMES = (
    "Adams", "Baker", "Carter", "Dubois", "Evans", "Fischer", "Garcia", "Hughes", "Ivanova",
    "Jensen", "Khan", "Lopez", "Murphy", "Novak", "Okafor", "Patel", "Rossi", "Silva",
)  # fmt: skip
EMAIL_DOMAINS = ("example.com", "mail.example", "inbox.example", "post.example")
NEW_EMAIL_DOMAINS = ("fastmail.example", "proton.example", "outlook.example", "work.example")
PHONE_PREFIXES = {
    "GB": "+447",
    "IE": "+3538",
    "FR": "+336",
    "DE": "+4915",
    "NL": "+316",
    "ES": "+346",
}
STREETS = (
    "Mill Lane", "Station Road", "Church Street", "Park Avenue", "Victoria Road", "High Street",
    "Quay Street", "Orchard Close", "Canal Walk", "Market Square", "Elm Grove", "Harbour View",
)  # fmt: skip
SUBJECTS: dict[str, tuple[str, ...]] = {
    "billing": ("Charged twice for one order", "Refund not received", "Invoice shows wrong name"),
    "shipping": (
        "Parcel marked delivered but missing",
        "Delivery is late",
        "Courier left parcel outside",
    ),
    "account": ("Cannot sign in", "Password reset email never arrives", "Merge two accounts"),
    "technical": ("App crashes at checkout", "Checkout button does nothing", "Images do not load"),
    "returns": ("Return label not working", "Wrong size delivered", "Item arrived damaged"),
    "other": (
        "Question about gift wrapping",
        "Suggestion for the loyalty programme",
        "Feedback on packaging",
    ),
}
CUSTOMER_COMMENTS = (
    "I am still waiting for an update on this.",
    "Here is the order reference you asked for.",
    "The problem happened again this morning.",
    "Please call me back when you can.",
    "I have attached a photo of the parcel.",
    "Thanks, the workaround you suggested helped a bit.",
    "Could you let me know when this will be fixed?",
    "I tried again on another device with the same result.",
)
AGENT_COMMENTS = (
    "Thanks for reporting this; we are looking into it.",
    "Could you send us the order number?",
    "A replacement has been arranged.",
    "We have escalated this to our technical team.",
    "A refund has been issued to your original payment method.",
)
EARN_REASONS = ("purchase", "purchase", "purchase", "product review", "referral", "birthday bonus")

_START = datetime.date(2019, 1, 1).toordinal()
_TODAY = datetime.date.fromisoformat(TODAY).toordinal()


def _iso(ordinal: int) -> str:
    return datetime.date.fromordinal(ordinal).isoformat()


# --------------------------------------------------------------------------- state


def _postcode(rng: random.Random, country: str, city: str) -> str:
    digits = "".join(str(rng.randrange(10)) for _ in range(5))
    letters = "".join(rng.choice("ABDEFGHJLNPQRSTUWXYZ") for _ in range(2))
    if country == "GB":
        return f"{city[:2].upper()}{digits[0]} {digits[1]}{letters}"
    if country == "IE":
        return f"{city[0]}{digits[:2]} {letters[0]}{digits[2:]}"
    if country == "NL":
        return f"{digits[:4]} {letters}"
    return digits


def phone(rng: random.Random, country: str) -> str:
    """A random mobile number of ``country`` in international format."""
    prefix = PHONE_PREFIXES[country]
    return prefix + "".join(str(rng.randrange(10)) for _ in range(13 - len(prefix)))


def new_address(rng: random.Random, address_id: str, label: str, country: str) -> dict[str, Any]:
    """A random address in ``country`` (street, city, postcode drawn in that order)."""
    city = rng.choice(CITIES[country])
    return {
        "address_id": address_id,
        "label": label,
        "street": f"{rng.randint(1, 199)} {rng.choice(STREETS)}",
        "city": city,
        "postcode": _postcode(rng, country, city),
        "country": country,
    }


def _history(rng: random.Random, since: int, tier: str) -> tuple[list[dict[str, Any]], int]:
    start = max(since, _TODAY - 900)
    days = sorted(rng.randrange(start, _TODAY) for _ in range(rng.randint(3, 8)))
    scale = 1 + TIERS.index(tier)
    entries = [{"date": _iso(days[0]), "points": 100, "reason": "welcome bonus"}]
    balance = 100
    for day in days[1:]:
        affordable = [r for r, (cost, _) in REWARDS.items() if cost <= balance]
        if affordable and rng.random() < 0.25:
            reward = rng.choice(affordable)
            points, reason = -REWARDS[reward][0], f"redeemed {reward}"
        else:
            reason = rng.choice(EARN_REASONS)
            points = {"product review": 50, "referral": 250, "birthday bonus": 100}.get(
                reason, 10 * rng.randint(2, 40 * scale)
            )
        balance += points
        entries.append({"date": _iso(day), "points": points, "reason": reason})
    return entries, balance


def build(seed: int) -> dict[str, Any]:
    """24 customers (1-4 addresses and 3-8 points entries each) and 36 tickets."""
    rng = random.Random(seed)
    customers, next_address = _customers(rng)
    tickets = _tickets(rng, customers)
    return {
        "customers": customers,
        "tickets": tickets,
        "redemptions": {},
        "next_address": next_address,
        "next_ticket": len(tickets) + 1,
        "next_redemption": 1,
    }


def _customers(rng: random.Random) -> tuple[dict[str, Any], int]:
    """The customers, and the next free address number."""
    names = rng.sample([(f, last) for f in FIRST_NAMES for last in LAST_NAMES], 24)
    customers: dict[str, Any] = {}
    next_address = 1
    for i, (first, last) in enumerate(names, start=1):
        cid = f"c{i}"
        country = rng.choice(COUNTRIES)
        tier = rng.choices(TIERS, weights=(5, 4, 2, 1))[0]
        since = rng.randrange(_START, _TODAY - 120)
        addresses = []
        for k in range(rng.randint(1, 4)):
            label = "home" if k == 0 else rng.choice(LABELS)
            where = country if rng.random() < 0.8 else rng.choice(COUNTRIES)
            addresses.append(new_address(rng, f"a{next_address}", label, where))
            next_address += 1
        history, balance = _history(rng, since, tier)
        customers[cid] = {
            "customer_id": cid,
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@{rng.choice(EMAIL_DOMAINS)}",
            "phone": phone(rng, country),
            "tier": tier,
            "member_since": _iso(since),
            "default_address_id": rng.choice(addresses)["address_id"],
            "addresses": addresses,
            "points": {"balance": balance, "history": history},
        }
    return customers, next_address


def _tickets(rng: random.Random, customers: dict[str, Any]) -> dict[str, Any]:
    """36 tickets of random customers, at most three open per customer."""
    tickets: dict[str, Any] = {}
    open_count = dict.fromkeys(customers, 0)
    for i in range(1, 37):
        cid = rng.choice(list(customers))
        category = rng.choice(CATEGORIES)
        opened = rng.randrange(_TODAY - 240, _TODAY - 10)
        day = opened
        comments = []
        for k in range(rng.randint(0, 3)):
            day = rng.randrange(day, _TODAY - 5)
            author = "agent" if k % 2 == 0 else "customer"
            pool = AGENT_COMMENTS if author == "agent" else CUSTOMER_COMMENTS
            comments.append({"author": author, "text": rng.choice(pool), "date": _iso(day)})
        closed = rng.random() < 0.45 or open_count[cid] >= 3
        open_count[cid] += not closed
        tickets[f"t{i}"] = {
            "ticket_id": f"t{i}",
            "customer_id": cid,
            "category": category,
            "priority": rng.choice(PRIORITIES),
            "subject": rng.choice(SUBJECTS[category]),
            "status": "closed" if closed else "open",
            "opened": _iso(opened),
            "closed_on": _iso(rng.randrange(day, _TODAY)) if closed else None,
            "resolution": rng.choice(RESOLUTIONS) if closed else None,
            "comments": comments,
        }
    return tickets


# --------------------------------------------------------------------------- calls


def _customer(state: dict[str, Any], customer_id: str) -> dict[str, Any]:
    return entity(state, "customers", "customer", customer_id)


def _address(customer: dict[str, Any], address_id: str) -> dict[str, Any]:
    for address in customer["addresses"]:
        if address["address_id"] == address_id:
            return address
    raise not_found("address", address_id)


def _ticket(state: dict[str, Any], ticket_id: str) -> dict[str, Any]:
    return entity(state, "tickets", "ticket", ticket_id)


def _get_customer(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    return {
        "customer_id": c["customer_id"],
        "name": c["name"],
        "email": c["email"],
        "phone": c["phone"],
        "tier": c["tier"],
        "member_since": c["member_since"],
        "points_balance": c["points"]["balance"],
        "default_address_id": c["default_address_id"],
    }


def _update_contact(field_name: str) -> Callable[[dict[str, Any], dict[str, Any]], Any]:
    def update(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        c = _customer(state, args["customer_id"])
        new, old = args[field_name], c[field_name]
        if new.lower() == old.lower():
            raise failed_precondition(
                f"{new} is already the {field_name} on file for {c['customer_id']}; nothing to "
                f"change (give a different {field_name})"
            )
        c[field_name] = new
        return {
            "customer_id": c["customer_id"],
            field_name: new,
            f"previous_{field_name}": old,
            "status": "updated",
        }

    return update


def _list_addresses(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    default = c["default_address_id"]
    return {
        "customer_id": c["customer_id"],
        "default_address_id": default,
        "addresses": [{**a, "is_default": a["address_id"] == default} for a in c["addresses"]],
    }


def _add_address(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    if len(c["addresses"]) >= MAX_ADDRESSES:
        raise failed_precondition(
            f"{c['customer_id']} already has {MAX_ADDRESSES} addresses, the maximum; delete one "
            "with delete_address first"
        )
    address_id = f"a{state['next_address']}"
    state["next_address"] += 1
    keys = ("label", "street", "city", "postcode", "country")
    c["addresses"].append({"address_id": address_id, **{k: args[k] for k in keys}})
    if args.get("make_default", False) or c["default_address_id"] is None:
        c["default_address_id"] = address_id
    return {
        "address_id": address_id,
        "customer_id": c["customer_id"],
        "is_default": c["default_address_id"] == address_id,
        "status": "added",
    }


def _set_default_address(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    address_id = _address(c, args["address_id"])["address_id"]
    previous = c["default_address_id"]
    if previous == address_id:
        raise failed_precondition(
            f"{address_id} is already the default address of {c['customer_id']}; nothing to change"
        )
    c["default_address_id"] = address_id
    return {
        "customer_id": c["customer_id"],
        "default_address_id": address_id,
        "previous_default_id": previous,
        "status": "updated",
    }


def _delete_address(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    address = _address(c, args["address_id"])
    address_id = address["address_id"]
    if address_id == c["default_address_id"]:
        if len(c["addresses"]) > 1:
            raise failed_precondition(
                f"{address_id} is the default address of {c['customer_id']}; make another "
                "address the default with set_default_address first"
            )
        c["default_address_id"] = None
    c["addresses"].remove(address)
    return {
        "address_id": address_id,
        "customer_id": c["customer_id"],
        "default_address_id": c["default_address_id"],
        "remaining": len(c["addresses"]),
        "status": "deleted",
    }


def _get_points_history(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    since = args.get("since", "")
    entries = [dict(e) for e in c["points"]["history"] if e["date"] >= since]
    if args.get("order", "newest_first") == "newest_first":
        entries.reverse()
    return {
        "customer_id": c["customer_id"],
        "balance": c["points"]["balance"],
        "total_entries": len(entries),
        "entries": entries[: args.get("limit", 10)],
    }


def _redeem_reward(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    reward = args["reward"]
    cost, tier = REWARDS[reward]
    points = c["points"]
    if TIERS.index(c["tier"]) < TIERS.index(tier):
        raise failed_precondition(
            f"{reward} needs the {tier} tier or above and {c['customer_id']} is {c['tier']}; "
            "choose another reward"
        )
    if points["balance"] < cost:
        raise failed_precondition(
            f"{c['customer_id']} has {points['balance']} points and {reward} costs {cost}; "
            "choose a cheaper reward"
        )
    redemption_id = f"r{state['next_redemption']}"
    state["next_redemption"] += 1
    points["balance"] -= cost
    points["history"].append(
        {"date": TODAY, "points": -cost, "reason": f"redeemed {reward} ({redemption_id})"}
    )
    state["redemptions"][redemption_id] = {
        "customer_id": c["customer_id"],
        "reward": reward,
        "points": cost,
        "date": TODAY,
    }
    return {
        "redemption_id": redemption_id,
        "customer_id": c["customer_id"],
        "reward": reward,
        "points_spent": cost,
        "balance": points["balance"],
        "status": "redeemed",
    }


def _open_ticket(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    c = _customer(state, args["customer_id"])
    customer_id = c["customer_id"]
    tickets = state["tickets"]
    if sum(t["customer_id"] == customer_id and t["status"] == "open" for t in tickets.values()) >= (
        MAX_OPEN_TICKETS
    ):
        raise failed_precondition(
            f"{customer_id} already has {MAX_OPEN_TICKETS} open tickets; comment on or close "
            "one of them instead"
        )
    ticket_id = f"t{state['next_ticket']}"
    state["next_ticket"] += 1
    tickets[ticket_id] = {
        "ticket_id": ticket_id,
        "customer_id": customer_id,
        "category": args["category"],
        "priority": args["priority"],
        "subject": args["subject"],
        "status": "open",
        "opened": TODAY,
        "closed_on": None,
        "resolution": None,
        "comments": [],
    }
    return {
        "ticket_id": ticket_id,
        "customer_id": customer_id,
        "category": args["category"],
        "priority": args["priority"],
        "status": "open",
        "opened": TODAY,
    }


def _get_ticket(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    ticket = _ticket(state, args["ticket_id"])
    return {**ticket, "comments": [dict(c) for c in ticket["comments"]]}


def _list_tickets(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    customer_id = _customer(state, args["customer_id"])["customer_id"]
    status = args.get("status", "all")
    keys = TICKET_SUMMARY_KEYS
    return {
        "customer_id": customer_id,
        "tickets": [
            {k: t[k] for k in keys}
            for _, t in sorted(state["tickets"].items(), key=lambda item: _num(item[0]))
            if t["customer_id"] == customer_id and status in ("all", t["status"])
        ],
    }


def _add_ticket_comment(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    ticket = _ticket(state, args["ticket_id"])
    if ticket["status"] == "closed":
        raise failed_precondition(
            f"ticket {ticket['ticket_id']} is closed and takes no comments; open a new ticket "
            "with open_ticket instead"
        )
    ticket["comments"].append({"author": "customer", "text": args["text"], "date": TODAY})
    return {
        "ticket_id": ticket["ticket_id"],
        "comment_count": len(ticket["comments"]),
        "status": "open",
    }


def _close_ticket(state: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    ticket = _ticket(state, args["ticket_id"])
    if ticket["status"] == "closed":
        raise failed_precondition(
            f"ticket {ticket['ticket_id']} was already closed on {ticket['closed_on']} "
            f"({ticket['resolution']}); nothing to do"
        )
    ticket.update(status="closed", closed_on=TODAY, resolution=args["resolution"])
    return {
        "ticket_id": ticket["ticket_id"],
        "status": "closed",
        "resolution": args["resolution"],
        "closed_on": TODAY,
    }


_HANDLERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], Any]] = {
    "get_customer": _get_customer,
    "update_email": _update_contact("email"),
    "update_phone": _update_contact("phone"),
    "list_addresses": _list_addresses,
    "add_address": _add_address,
    "set_default_address": _set_default_address,
    "delete_address": _delete_address,
    "get_points_history": _get_points_history,
    "redeem_reward": _redeem_reward,
    "open_ticket": _open_ticket,
    "get_ticket": _get_ticket,
    "list_tickets": _list_tickets,
    "add_ticket_comment": _add_ticket_comment,
    "close_ticket": _close_ticket,
}


def call(state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
    """Run one validated call; results are fresh objects, never views of ``state``.

    Args:
        state: the backend state, changed in place by writes.
        name: a tool name.
        arguments: the call's arguments, valid for the tool's schema.

    Returns:
        The call's JSON-able result.
    """
    handler = _HANDLERS.get(name)
    if handler is None:
        raise ValueError(f"unknown tool {name!r}")
    return handler(state, arguments)


def resources(name: str, args: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(read, written) paths of a call.

    Paths: ``customers/<id>`` with the sub-paths ``profile`` (name, email, phone),
    ``addresses`` (and the default), ``points`` and ``tier``; ``tickets/<id>``; the id
    counters are the collections ``addresses``, ``tickets`` and ``redemptions``.
    """
    customer = f"customers/{args.get('customer_id')}"
    ticket = f"tickets/{args.get('ticket_id')}"
    table: dict[str, tuple[list[str], list[str]]] = {
        "get_customer": ([customer], []),
        "update_email": ([], [f"{customer}/profile"]),
        "update_phone": ([], [f"{customer}/profile"]),
        "list_addresses": ([f"{customer}/addresses"], []),
        "add_address": ([], [f"{customer}/addresses", "addresses"]),
        "set_default_address": ([], [f"{customer}/addresses"]),
        "delete_address": ([], [f"{customer}/addresses"]),
        "get_points_history": ([f"{customer}/points"], []),
        "redeem_reward": ([f"{customer}/tier"], [f"{customer}/points", "redemptions"]),
        "open_ticket": ([], ["tickets"]),
        "get_ticket": ([ticket], []),
        "list_tickets": (["tickets"], []),
        "add_ticket_comment": ([], [ticket]),
        "close_ticket": ([], [ticket]),
    }
    return table[name]
