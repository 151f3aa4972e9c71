"""Customer accounts: profiles and contact details, addresses, loyalty points with a reward
catalogue, and support tickets, over a seeded backend of a few dozen customers."""

from __future__ import annotations

import datetime
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.tools.backend import (
    TASK_TYPES,
    Call,
    Domain,
    Task,
    Tool,
    ToolFailure,
    not_found,
)

TODAY = "2025-06-02"
"""The backend's current date: new tickets, comments and redemptions carry it."""

TIERS = ("bronze", "silver", "gold", "platinum")
REWARDS: dict[str, tuple[int, str]] = {
    "free_shipping": (200, "bronze"),
    "coffee_voucher": (300, "bronze"),
    "gift_card_10": (800, "bronze"),
    "cinema_tickets": (1500, "silver"),
    "gift_card_25": (1800, "silver"),
    "lounge_pass": (3000, "gold"),
}
"""reward: (points cost, lowest tier allowed to redeem it)."""
CATEGORIES = ("billing", "shipping", "account", "technical", "returns", "other")
PRIORITIES = ("low", "normal", "high", "urgent")
RESOLUTIONS = ("resolved", "duplicate", "withdrawn")
LABELS = ("home", "work", "other")
MAX_ADDRESSES = 5
MAX_OPEN_TICKETS = 5

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
CITIES: dict[str, tuple[str, ...]] = {
    "GB": ("Leeds", "Bristol", "York", "Cardiff"),
    "IE": ("Dublin", "Cork", "Galway"),
    "FR": ("Lyon", "Nantes", "Lille"),
    "DE": ("Berlin", "Hamburg", "Leipzig"),
    "NL": ("Utrecht", "Leiden", "Delft"),
    "ES": ("Seville", "Valencia", "Bilbao"),
}
COUNTRIES = tuple(CITIES)
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


def _num(entity_id: str) -> int:
    return int(entity_id[1:])


# ---------------------------------------------------------------------------------------------
# schemas


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _str(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _int(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def _nullable(description: str) -> dict[str, Any]:
    return {"type": ["string", "null"], "description": description}


def _customer_id() -> dict[str, Any]:
    return _str('The customer id, e.g. "c7".', pattern="^c[0-9]+$")


def _address_id() -> dict[str, Any]:
    return _str('The address id, e.g. "a12".', pattern="^a[0-9]+$")


def _ticket_id() -> dict[str, Any]:
    return _str('The support ticket id, e.g. "t5".', pattern="^t[0-9]+$")


def _date(description: str) -> dict[str, Any]:
    return _str(
        description + " (YYYY-MM-DD).", format="date", pattern="^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    )


EMAIL_PATTERN = "^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}$"
PHONE_PATTERN = "^\\+[1-9][0-9]{7,14}$"
POSTCODE_PATTERN = "^[A-Z0-9][A-Z0-9 -]{2,9}$"

_ADDRESS = _obj(
    {
        "address_id": _address_id(),
        "label": _str("What the address is for.", enum=list(LABELS)),
        "street": _str("House number and street."),
        "city": _str("City."),
        "postcode": _str("Postal code."),
        "country": _str("ISO country code.", enum=list(COUNTRIES)),
        "is_default": {"type": "boolean", "description": "Whether it is the default address."},
    }
)
_ENTRY = _obj(
    {
        "date": _date("When the points were earned or spent"),
        "points": _int("Points earned (positive) or spent (negative)."),
        "reason": _str("Why the balance changed."),
    }
)
_COMMENT = _obj(
    {
        "author": _str("Who wrote the comment.", enum=["customer", "agent"]),
        "text": _str("The comment."),
        "date": _date("When it was written"),
    }
)
_TICKET_SUMMARY = {
    "ticket_id": _ticket_id(),
    "category": _str("Ticket category.", enum=list(CATEGORIES)),
    "priority": _str("Ticket priority.", enum=list(PRIORITIES)),
    "subject": _str("Short summary of the issue."),
    "status": _str("Ticket status.", enum=["open", "closed"]),
    "opened": _date("When the ticket was opened"),
}
_TICKET = _obj(
    {
        **_TICKET_SUMMARY,
        "customer_id": _customer_id(),
        "closed_on": _nullable("When the ticket was closed (null while open)."),
        "resolution": _nullable("How the ticket was closed (null while open)."),
        "comments": {"type": "array", "items": _COMMENT, "description": "Comments, oldest first."},
    }
)

_REWARD_LIST = ", ".join(
    f"{reward} ({cost} points{'' if tier == 'bronze' else f', {tier} tier or above'})"
    for reward, (cost, tier) in REWARDS.items()
)

_TOOLS = (
    Tool(
        "get_customer",
        "Get a customer's profile: name, email, phone, loyalty tier, member-since date, points "
        "balance and default address id.",
        _obj({"customer_id": _customer_id()}),
        _obj(
            {
                "customer_id": _customer_id(),
                "name": _str("Full name."),
                "email": _str("Email address."),
                "phone": _str("Phone number in international format."),
                "tier": _str("Loyalty tier.", enum=list(TIERS)),
                "member_since": _date("When the account was created"),
                "points_balance": _int("Loyalty points available.", minimum=0),
                "default_address_id": _nullable("The default address id, if any."),
            }
        ),
        latency_ms=80.0,
    ),
    Tool(
        "update_email",
        "Change a customer's email address. Fails if the new address is already the one on file.",
        _obj(
            {
                "customer_id": _customer_id(),
                "email": _str("The new email address.", format="email", pattern=EMAIL_PATTERN),
            }
        ),
        _obj(
            {
                "customer_id": _customer_id(),
                "email": _str("The email now on file."),
                "previous_email": _str("The email replaced."),
                "status": _str("Always updated.", enum=["updated"]),
            }
        ),
        writes=True,
        latency_ms=220.0,
    ),
    Tool(
        "update_phone",
        "Change a customer's phone number (international format, e.g. +447700900123). Fails if "
        "the number is already the one on file.",
        _obj(
            {
                "customer_id": _customer_id(),
                "phone": _str(
                    "The new phone number: +, country code, number.", pattern=PHONE_PATTERN
                ),
            }
        ),
        _obj(
            {
                "customer_id": _customer_id(),
                "phone": _str("The phone number now on file."),
                "previous_phone": _str("The phone number replaced."),
                "status": _str("Always updated.", enum=["updated"]),
            }
        ),
        writes=True,
        latency_ms=220.0,
    ),
    Tool(
        "list_addresses",
        "List a customer's saved addresses and which one is the default.",
        _obj({"customer_id": _customer_id()}),
        _obj(
            {
                "customer_id": _customer_id(),
                "default_address_id": _nullable("The default address id, if any."),
                "addresses": {"type": "array", "items": _ADDRESS, "description": "In order saved."},
            }
        ),
        latency_ms=90.0,
    ),
    Tool(
        "add_address",
        f"Save a new address for a customer (at most {MAX_ADDRESSES}); returns its new address "
        "id. The first address, or one added with make_default, becomes the default.",
        _obj(
            {
                "customer_id": _customer_id(),
                "label": _str("What the address is for.", enum=list(LABELS)),
                "street": _str("House number and street, e.g. 12 Mill Lane.", minLength=3),
                "city": _str("City.", minLength=2),
                "postcode": _str(
                    "Postal code in capitals, e.g. LS1 4AB.", pattern=POSTCODE_PATTERN
                ),
                "country": _str("ISO country code.", enum=list(COUNTRIES)),
                "make_default": {
                    "type": "boolean",
                    "description": "Make it the default address (default false).",
                },
            },
            ["customer_id", "label", "street", "city", "postcode", "country"],
        ),
        _obj(
            {
                "address_id": _address_id(),
                "customer_id": _customer_id(),
                "is_default": {"type": "boolean", "description": "Whether it is now the default."},
                "status": _str("Always added.", enum=["added"]),
            }
        ),
        writes=True,
        latency_ms=260.0,
    ),
    Tool(
        "set_default_address",
        "Make one of a customer's saved addresses the default. Fails if it already is.",
        _obj({"customer_id": _customer_id(), "address_id": _address_id()}),
        _obj(
            {
                "customer_id": _customer_id(),
                "default_address_id": _address_id(),
                "previous_default_id": _nullable("The address that was the default."),
                "status": _str("Always updated.", enum=["updated"]),
            }
        ),
        writes=True,
        latency_ms=180.0,
    ),
    Tool(
        "delete_address",
        "Delete one of a customer's saved addresses. The default address can only be deleted "
        "when it is the customer's only address.",
        _obj({"customer_id": _customer_id(), "address_id": _address_id()}),
        _obj(
            {
                "address_id": _address_id(),
                "customer_id": _customer_id(),
                "default_address_id": _nullable("The default address id afterwards."),
                "remaining": _int("How many addresses remain.", minimum=0),
                "status": _str("Always deleted.", enum=["deleted"]),
            }
        ),
        writes=True,
        latency_ms=200.0,
    ),
    Tool(
        "get_points_history",
        "Get a customer's loyalty points balance and the entries that earned or spent points.",
        _obj(
            {
                "customer_id": _customer_id(),
                "since": _date("Only entries on or after this date"),
                "order": _str(
                    "Entry order (default newest_first).", enum=["newest_first", "oldest_first"]
                ),
                "limit": _int("Most entries to return (default 10).", minimum=1, maximum=50),
            },
            ["customer_id"],
        ),
        _obj(
            {
                "customer_id": _customer_id(),
                "balance": _int("Points available now.", minimum=0),
                "total_entries": _int("Entries matching since, before the limit.", minimum=0),
                "entries": {"type": "array", "items": _ENTRY, "description": "The entries."},
            }
        ),
        latency_ms=120.0,
    ),
    Tool(
        "redeem_reward",
        f"Spend a customer's loyalty points on a reward from the catalogue: {_REWARD_LIST}. "
        "Fails if the balance is too low or the customer's tier is below the reward's.",
        _obj(
            {
                "customer_id": _customer_id(),
                "reward": _str("The reward to redeem.", enum=list(REWARDS)),
            }
        ),
        _obj(
            {
                "redemption_id": _str('The new redemption id, e.g. "r3".', pattern="^r[0-9]+$"),
                "customer_id": _customer_id(),
                "reward": _str("The reward redeemed.", enum=list(REWARDS)),
                "points_spent": _int("Points deducted.", minimum=1),
                "balance": _int("Points left.", minimum=0),
                "status": _str("Always redeemed.", enum=["redeemed"]),
            }
        ),
        writes=True,
        latency_ms=300.0,
    ),
    Tool(
        "open_ticket",
        f"Open a support ticket for a customer; returns the new ticket id. A customer can have at "
        f"most {MAX_OPEN_TICKETS} open tickets.",
        _obj(
            {
                "customer_id": _customer_id(),
                "category": _str("What the issue is about.", enum=list(CATEGORIES)),
                "priority": _str("How urgent the issue is.", enum=list(PRIORITIES)),
                "subject": _str("Short summary of the issue.", minLength=3),
            }
        ),
        _obj(
            {
                "ticket_id": _ticket_id(),
                "customer_id": _customer_id(),
                "category": _str("Ticket category.", enum=list(CATEGORIES)),
                "priority": _str("Ticket priority.", enum=list(PRIORITIES)),
                "status": _str("Always open.", enum=["open"]),
                "opened": _date("When the ticket was opened"),
            }
        ),
        writes=True,
        latency_ms=350.0,
    ),
    Tool(
        "get_ticket",
        "Get a support ticket with its status, resolution and comments.",
        _obj({"ticket_id": _ticket_id()}),
        _TICKET,
        latency_ms=100.0,
    ),
    Tool(
        "list_tickets",
        "List a customer's support tickets (oldest first), optionally only open or closed ones.",
        _obj(
            {
                "customer_id": _customer_id(),
                "status": _str("Which tickets (default all).", enum=["open", "closed", "all"]),
            },
            ["customer_id"],
        ),
        _obj(
            {
                "customer_id": _customer_id(),
                "tickets": {
                    "type": "array",
                    "items": _obj(dict(_TICKET_SUMMARY)),
                    "description": "The matching tickets.",
                },
            }
        ),
        latency_ms=150.0,
    ),
    Tool(
        "add_ticket_comment",
        "Add the customer's comment to an open support ticket (closed tickets take no comments).",
        _obj({"ticket_id": _ticket_id(), "text": _str("The comment.", minLength=1)}),
        _obj(
            {
                "ticket_id": _ticket_id(),
                "comment_count": _int("Comments on the ticket now.", minimum=1),
                "status": _str("Always open.", enum=["open"]),
            }
        ),
        writes=True,
        latency_ms=200.0,
    ),
    Tool(
        "close_ticket",
        "Close an open support ticket with a resolution.",
        _obj(
            {
                "ticket_id": _ticket_id(),
                "resolution": _str("Why the ticket is closed.", enum=list(RESOLUTIONS)),
            }
        ),
        _obj(
            {
                "ticket_id": _ticket_id(),
                "status": _str("Always closed.", enum=["closed"]),
                "resolution": _str("Why the ticket was closed.", enum=list(RESOLUTIONS)),
                "closed_on": _date("When the ticket was closed"),
            }
        ),
        writes=True,
        latency_ms=240.0,
    ),
)


# ---------------------------------------------------------------------------------------------
# backend


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


def _phone(rng: random.Random, country: str) -> str:
    prefix = PHONE_PREFIXES[country]
    return prefix + "".join(str(rng.randrange(10)) for _ in range(13 - len(prefix)))


def _new_address(rng: random.Random, address_id: str, label: str, country: str) -> dict[str, Any]:
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


def _build(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
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
            addresses.append(_new_address(rng, f"a{next_address}", label, where))
            next_address += 1
        history, balance = _history(rng, since, tier)
        customers[cid] = {
            "customer_id": cid,
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@{rng.choice(EMAIL_DOMAINS)}",
            "phone": _phone(rng, country),
            "tier": tier,
            "member_since": _iso(since),
            "default_address_id": rng.choice(addresses)["address_id"],
            "addresses": addresses,
            "points": {"balance": balance, "history": history},
        }
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
    return {
        "customers": customers,
        "tickets": tickets,
        "redemptions": {},
        "next_address": next_address,
        "next_ticket": len(tickets) + 1,
        "next_redemption": 1,
    }


def _precondition(message: str) -> ToolFailure:
    return ToolFailure("failed_precondition", message)


def _customer(state: dict[str, Any], customer_id: str) -> dict[str, Any]:
    customer = state["customers"].get(customer_id)
    if customer is None:
        raise not_found("customer", customer_id)
    return customer


def _address(customer: dict[str, Any], address_id: str) -> dict[str, Any]:
    for address in customer["addresses"]:
        if address["address_id"] == address_id:
            return address
    raise not_found("address", address_id)


def _ticket(state: dict[str, Any], ticket_id: str) -> dict[str, Any]:
    ticket = state["tickets"].get(ticket_id)
    if ticket is None:
        raise not_found("ticket", ticket_id)
    return ticket


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
            raise _precondition(
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
        raise _precondition(
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
        raise _precondition(
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
            raise _precondition(
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
        raise _precondition(
            f"{reward} needs the {tier} tier or above and {c['customer_id']} is {c['tier']}; "
            "choose another reward"
        )
    if points["balance"] < cost:
        raise _precondition(
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
        raise _precondition(
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
    keys = _TICKET_SUMMARY.keys()
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
        raise _precondition(
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
        raise _precondition(
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


def _resources(name: str, args: dict[str, Any]) -> tuple[list[str], list[str]]:
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


class AccountsDomain(Domain):
    """Customer account management: profiles, addresses, loyalty points and support tickets.

    Resource paths: ``customers/<id>`` with the sub-paths ``profile`` (name, email, phone),
    ``addresses`` (and the default), ``points`` and ``tier``; ``tickets/<id>``; the id counters
    are the collections ``addresses``, ``tickets`` and ``redemptions``.
    """

    name = "accounts"
    description = "Customer accounts: profiles, addresses, loyalty points and support tickets."

    def tools(self) -> list[Tool]:
        """The 14 tools, reads and writes interleaved by topic."""
        return list(_TOOLS)

    def build(self, seed: int) -> dict[str, Any]:
        """24 customers (1-4 addresses and 3-8 points entries each) and 36 tickets."""
        return _build(seed)

    def call(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run one validated call; results are fresh objects, never views of ``state``."""
        handler = _HANDLERS.get(name)
        if handler is None:
            raise ValueError(f"unknown tool {name!r}")
        return handler(state, arguments)

    def resources(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(read, written) paths of a call; see the class docstring for the tree."""
        return _resources(name, arguments)

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks of each type, gold calls replayed on a copy of ``state``."""
        return _TaskMaker(self, state, seed).make(per_type)


# ---------------------------------------------------------------------------------------------
# tasks


REWARD_PHRASES = {
    "free_shipping": "a free-shipping voucher",
    "coffee_voucher": "a coffee voucher",
    "gift_card_10": "a 10-euro gift card",
    "cinema_tickets": "a pair of cinema tickets",
    "gift_card_25": "a 25-euro gift card",
    "lounge_pass": "an airport lounge pass",
}
RESOLUTION_PHRASES = {
    "resolved": "it has been resolved",
    "duplicate": "it is a duplicate of another ticket",
    "withdrawn": "the customer has withdrawn it",
}
_ATTEMPTS = 400


def _category(category: str) -> str:
    return '"other"-category' if category == "other" else category


def _issue(priority: str, category: str) -> str:
    """E.g. 'an urgent-priority billing ticket', 'a ticket in the "other" category'."""
    if priority:
        article = "an" if priority == "urgent" else "a"
        kind = f"{article} {priority}-priority"
    else:
        kind = "a support"
    if category == "other":
        return f'{kind} ticket in the "other" category'
    return f"{kind} {category} ticket"


def _labelled(label: str) -> str:
    """E.g. 'home address', 'address labelled "other"'."""
    return 'address labelled "other"' if label == "other" else f"{label} address"


@dataclass
class _Draft:
    """A task's text before its id: the request, its facts and, for clarification, the detail."""

    request: str
    facts: list[str]
    hidden: dict[str, str] = field(default_factory=dict)
    reply: str | None = None


class _Replay:
    """Runs gold calls turn by turn on a private copy of the initial state."""

    def __init__(self, domain: Domain, state: dict[str, Any]):
        self.domain = domain
        self.state = json.loads(json.dumps(state))  # a deep copy; faster than copy.deepcopy
        self.turns: list[tuple[Call, ...]] = []
        self.results: list[Any] = []

    def turn(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        """Issue ``calls`` (name, arguments) together as one turn; their results in order."""
        out = [self.domain.call(self.state, name, dict(args)) for name, args in calls]
        self.turns.append(tuple(Call(name, args) for name, args in calls))
        self.results.extend(out)
        return out

    def one(self, name: str, **args: Any) -> Any:
        """A turn of one call; its result."""
        return self.turn((name, args))[0]


def _conflict(a: tuple[list[str], list[str]], b: tuple[list[str], list[str]]) -> bool:
    def overlap(p: str, q: str) -> bool:
        return p == q or p.startswith(q + "/") or q.startswith(p + "/")

    return any(overlap(w, p) for w in a[1] for p in b[0] + b[1]) or any(
        overlap(w, p) for w in b[1] for p in a[0]
    )


class _TaskMaker:
    """Draws tasks from per-type templates with one seeded rng per type."""

    def __init__(self, domain: AccountsDomain, state: dict[str, Any], seed: int):
        self.domain = domain
        self.state = state
        self.seed = seed
        self.rng = random.Random(seed)
        self.customers = sorted(state["customers"], key=_num)
        self.tickets = sorted(state["tickets"], key=_num)

    # -- driver -----------------------------------------------------------------------------

    def make(self, per_type: int) -> list[Task]:
        templates: dict[str, list[Callable[[_Replay], _Draft | None]]] = {
            "single": [
                self.s_tier, self.w_update_email, self.s_contact, self.w_redeem,
                self.s_default_address, self.w_open_ticket, self.s_balance, self.w_close_ticket,
                self.s_history_since, self.w_add_address, self.s_ticket, self.w_set_default,
                self.s_open_tickets, self.w_comment, self.w_update_phone, self.w_delete_address,
            ],
            "multiple": [
                self.m_email_phone, self.m_customer_tickets, self.m_balance_redeem,
                self.m_ticket_customer, self.m_open_list, self.m_comment_close,
                self.m_add_list, self.m_default_delete, self.m_phone_profile_addresses,
                self.m_redeem_profile,
            ],
            "parallel": [
                self.p_profiles, self.p_close_tickets, self.p_balances, self.p_update_emails,
                self.p_tickets, self.p_phone_default, self.p_addresses_points_ticket,
                self.p_comments, self.p_open_redeem, self.p_address_email,
            ],
            "dependent": [
                self.d_open_comment, self.d_close_by_category, self.d_latest_comment,
                self.d_default_by_city, self.d_open_comment_close, self.d_comment_by_subject,
                self.d_delete_by_place,
            ],
            "irrelevance": [
                self.i_weather, self.i_poem, self.i_maths, self.i_translate, self.i_capital,
                self.i_recipe, self.i_film, self.i_convert,
            ],
            "clarification": [
                self.c_balance, self.c_update_phone, self.c_ticket_priority, self.c_close_ticket,
                self.c_redeem, self.c_update_email, self.c_ticket_status, self.c_default_address,
                self.c_addresses,
            ],
        }  # fmt: skip
        tasks: list[Task] = []
        seen: set[str] = set()
        for index, task_type in enumerate(TASK_TYPES):
            self.rng = random.Random(self.seed * 1009 + index)
            for k in range(per_type):
                tasks.append(self._task(task_type, templates[task_type], k, seen))
        return tasks

    def _task(
        self,
        task_type: str,
        templates: list[Callable[[_Replay], _Draft | None]],
        k: int,
        seen: set[str],
    ) -> Task:
        for attempt in range(_ATTEMPTS):
            replay = _Replay(self.domain, self.state)
            draft = templates[(k + attempt) % len(templates)](replay)
            if draft is None or draft.request in seen or not self._valid(task_type, draft, replay):
                continue
            seen.add(draft.request)
            extra = {} if draft.reply is None else {"clarify_reply": draft.reply}
            return Task(
                id=f"accounts-{task_type}-{k:04d}",
                task_type=task_type,
                request=draft.request,
                gold_calls=tuple(replay.turns),
                answer_facts=tuple(draft.facts),
                hidden_facts=dict(draft.hidden),
                **extra,
            )
        raise RuntimeError(f"no new {task_type} task after {_ATTEMPTS} attempts")

    def _valid(self, task_type: str, draft: _Draft, replay: _Replay) -> bool:
        turns = replay.turns
        dumps = [json.dumps(r) for r in replay.results]
        if task_type == "irrelevance":
            return not turns and not draft.facts
        if not 1 <= len(draft.facts) <= 3 or any(f not in "".join(dumps) for f in draft.facts):
            return False
        names = [c.name for turn in turns for c in turn]
        if task_type in ("single", "clarification") and (len(turns) != 1 or len(turns[0]) != 1):
            return False
        if task_type == "multiple":
            return (
                2 <= len(turns) <= 3
                and all(len(t) == 1 for t in turns)
                and (len(set(names)) == len(names))
            )
        if task_type == "parallel":
            res = [self.domain.resources(c.name, c.arguments) for c in turns[0]]
            return (
                len(turns) == 1
                and 2 <= len(res) <= 4
                and not any(_conflict(a, b) for i, a in enumerate(res) for b in res[i + 1 :])
            )
        if task_type == "dependent":
            if not 2 <= len(turns) <= 3 or any(len(t) != 1 for t in turns):
                return False
            return all(
                any(
                    isinstance(v, str) and v not in draft.request and v in "".join(dumps[:j])
                    for v in turns[j][0].arguments.values()
                )
                for j in range(1, len(turns))
            )
        if task_type == "clarification":
            args = turns[0][0].arguments
            return bool(draft.hidden) and all(
                v not in draft.request and v in (draft.reply or "") and args.get(k) == v
                for k, v in draft.hidden.items()
            )
        return True

    # -- entity pickers over the initial state ------------------------------------------------

    def _pick(self, *options: str) -> str:
        return self.rng.choice(options)

    def _customer(self, predicate: Callable[[dict[str, Any]], bool] | None = None) -> str | None:
        c = self.state["customers"]
        found = [cid for cid in self.customers if predicate is None or predicate(c[cid])]
        return self.rng.choice(found) if found else None

    def _tickets_of(self, customer_id: str, status: str = "all") -> list[dict[str, Any]]:
        t = self.state["tickets"]
        return [
            t[tid]
            for tid in self.tickets
            if t[tid]["customer_id"] == customer_id and status in ("all", t[tid]["status"])
        ]

    def _open_ticket_id(self) -> str:
        return self.rng.choice(
            [t for t in self.tickets if self.state["tickets"][t]["status"] == "open"]
        )

    def _affordable(self, customer: dict[str, Any]) -> list[str]:
        return [
            r
            for r, (cost, tier) in REWARDS.items()
            if cost <= customer["points"]["balance"]
            and TIERS.index(customer["tier"]) >= TIERS.index(tier)
        ]

    def _new_email(self, customer: dict[str, Any]) -> str:
        first, last = customer["name"].lower().split()
        local = self._pick(f"{first}.{last}", f"{first[0]}{last}", f"{first}{last[0]}", first)
        email = f"{local}@{self.rng.choice(NEW_EMAIL_DOMAINS)}"
        return email if email != customer["email"] else f"{last}.{first}@work.example"

    def _new_phone(self) -> str:
        return _phone(self.rng, self.rng.choice(COUNTRIES))

    def _new_address(self) -> dict[str, Any]:
        address = _new_address(self.rng, "", self.rng.choice(LABELS), self.rng.choice(COUNTRIES))
        del address["address_id"]
        return address

    def _new_issue(self) -> tuple[str, str, str]:
        category = self.rng.choice(CATEGORIES)
        return category, self.rng.choice(PRIORITIES), self.rng.choice(SUBJECTS[category])

    # -- single -------------------------------------------------------------------------------

    def s_tier(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        r = rp.one("get_customer", customer_id=cid)
        if self.rng.random() < 0.5:
            request = f"Since when has customer {cid} been a member, and at what tier?"
            return _Draft(request, [r["member_since"], r["tier"]])
        request = self._pick(
            f"What loyalty tier is customer {cid} on?",
            f"Can you tell me which membership tier account {cid} has?",
        )
        return _Draft(request, [r["tier"]])

    def s_contact(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        r = rp.one("get_customer", customer_id=cid)
        request = self._pick(
            f"What email address and phone number do you have on file for customer {cid}?",
            f"Please look up the contact details of account {cid}.",
        )
        return _Draft(request, [r["email"], r["phone"]])

    def s_default_address(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        r = rp.one("list_addresses", customer_id=cid)
        default = next(a for a in r["addresses"] if a["is_default"])
        request = self._pick(
            f"Which address is the default one for customer {cid}?",
            f"Where do parcels for account {cid} go by default? Show me the saved addresses.",
        )
        return _Draft(request, [default["street"], default["city"]])

    def s_balance(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        r = rp.one("get_points_history", customer_id=cid)
        request = self._pick(
            f"How many loyalty points does customer {cid} have?",
            f"What's the current points balance on account {cid}?",
            f"Show me the recent loyalty points activity of customer {cid}.",
        )
        return _Draft(request, [str(r["balance"])])

    def s_history_since(self, rp: _Replay) -> _Draft | None:
        cid = self.rng.choice(self.customers)
        history = self.state["customers"][cid]["points"]["history"]
        since = self.rng.choice(history)["date"][:8] + "01"
        r = rp.one("get_points_history", customer_id=cid, since=since, order="oldest_first")
        if not r["entries"]:
            return None
        first = r["entries"][0]
        request = (
            f"List the loyalty points entries of customer {cid} since {since}, oldest first: "
            "when was the first one and why?"
        )
        return _Draft(request, [first["date"], first["reason"]])

    def s_ticket(self, rp: _Replay) -> _Draft:
        tid = self.rng.choice(self.tickets)
        r = rp.one("get_ticket", ticket_id=tid)
        request = self._pick(
            f"What's the status of support ticket {tid}?",
            f"Is ticket {tid} still open, and how urgent is it?",
        )
        return _Draft(request, [r["status"], r["priority"]])

    def s_open_tickets(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: bool(self._tickets_of(c["customer_id"], "open")))
        if cid is None:
            return None
        r = rp.one("list_tickets", customer_id=cid, status="open")
        request = self._pick(
            f"Which support tickets are still open for customer {cid}?",
            f"List the open tickets of account {cid}, please.",
        )
        return _Draft(request, [t["ticket_id"] for t in r["tickets"]][:3])

    def w_update_email(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        email = self._new_email(self.state["customers"][cid])
        r = rp.one("update_email", customer_id=cid, email=email)
        request = self._pick(
            f"Please change the email address of customer {cid} to {email}.",
            f"Customer {cid} has a new email, {email}; update the account.",
        )
        return _Draft(request, [r["email"], r["previous_email"]])

    def w_update_phone(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        phone = self._new_phone()
        r = rp.one("update_phone", customer_id=cid, phone=phone)
        request = self._pick(
            f"Update the phone number of customer {cid} to {phone}.",
            f"Account {cid} changed numbers: the new one is {phone}.",
        )
        return _Draft(request, [r["phone"]])

    def w_redeem(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: bool(self._affordable(c)))
        if cid is None:
            return None
        reward = self.rng.choice(self._affordable(self.state["customers"][cid]))
        r = rp.one("redeem_reward", customer_id=cid, reward=reward)
        request = self._pick(
            f"Customer {cid} would like to redeem {REWARD_PHRASES[reward]} with their points.",
            f"Use account {cid}'s loyalty points to get {REWARD_PHRASES[reward]}.",
        )
        return _Draft(request, [r["redemption_id"], str(r["balance"])])

    def w_open_ticket(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        category, priority, subject = self._new_issue()
        r = rp.one(
            "open_ticket", customer_id=cid, category=category, priority=priority, subject=subject
        )
        request = (
            f'Open {_issue(priority, category)} for customer {cid} with the subject "{subject}".'
        )
        return _Draft(request, [r["ticket_id"]])

    def w_close_ticket(self, rp: _Replay) -> _Draft:
        tid = self._open_ticket_id()
        resolution = self.rng.choice(RESOLUTIONS)
        r = rp.one("close_ticket", ticket_id=tid, resolution=resolution)
        request = f"Please close support ticket {tid}: {RESOLUTION_PHRASES[resolution]}."
        return _Draft(request, [r["status"], r["closed_on"]])

    def w_comment(self, rp: _Replay) -> _Draft:
        tid = self._open_ticket_id()
        text = self.rng.choice(CUSTOMER_COMMENTS)
        r = rp.one("add_ticket_comment", ticket_id=tid, text=text)
        request = f'Add this comment to ticket {tid}: "{text}" How many comments does it have now?'
        return _Draft(request, [str(r["comment_count"])])

    def w_add_address(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) < MAX_ADDRESSES)
        if cid is None:
            return None
        a = self._new_address()
        r = rp.one("add_address", customer_id=cid, **a)
        request = (
            f"Save {a['street']}, {a['postcode']} {a['city']}, {a['country']} as a new "
            f"{_labelled(a['label'])} for customer {cid}."
        )
        return _Draft(request, [r["address_id"]])

    def w_set_default(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) > 1)
        if cid is None:
            return None
        c = self.state["customers"][cid]
        aid = self.rng.choice(
            [a["address_id"] for a in c["addresses"] if a["address_id"] != c["default_address_id"]]
        )
        r = rp.one("set_default_address", customer_id=cid, address_id=aid)
        request = f"Make address {aid} the default for customer {cid}. Which one was it before?"
        return _Draft(request, [r["previous_default_id"]])

    def w_delete_address(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) > 1)
        if cid is None:
            return None
        c = self.state["customers"][cid]
        aid = self.rng.choice(
            [a["address_id"] for a in c["addresses"] if a["address_id"] != c["default_address_id"]]
        )
        r = rp.one("delete_address", customer_id=cid, address_id=aid)
        request = self._pick(
            f"Remove address {aid} from customer {cid}'s account.",
            f"Customer {cid} no longer uses address {aid}; please delete it.",
        )
        return _Draft(request, [r["status"], str(r["remaining"])])

    # -- multiple -----------------------------------------------------------------------------

    def m_email_phone(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        email, phone = self._new_email(self.state["customers"][cid]), self._new_phone()
        a = rp.one("update_email", customer_id=cid, email=email)
        b = rp.one("update_phone", customer_id=cid, phone=phone)
        request = f"Customer {cid} has new contact details: email {email} and phone {phone}."
        return _Draft(request, [a["email"], b["phone"]])

    def m_balance_redeem(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: bool(self._affordable(c)))
        if cid is None:
            return None
        reward = self.rng.choice(self._affordable(self.state["customers"][cid]))
        a = rp.one("get_points_history", customer_id=cid)
        b = rp.one("redeem_reward", customer_id=cid, reward=reward)
        request = (
            f"Check how many points customer {cid} has, then redeem {REWARD_PHRASES[reward]} for "
            "them and tell me what is left."
        )
        return _Draft(request, [str(a["balance"]), b["redemption_id"], str(b["balance"])])

    def m_open_list(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        category, priority, subject = self._new_issue()
        a = rp.one(
            "open_ticket", customer_id=cid, category=category, priority=priority, subject=subject
        )
        rp.one("list_tickets", customer_id=cid, status="open")
        request = (
            f'Open {_issue(priority, category)} for customer {cid} titled "{subject}", '
            "then list all of their open tickets."
        )
        return _Draft(request, [a["ticket_id"]])

    def m_comment_close(self, rp: _Replay) -> _Draft:
        tid = self._open_ticket_id()
        text = self.rng.choice(CUSTOMER_COMMENTS)
        resolution = self.rng.choice(RESOLUTIONS)
        rp.one("get_ticket", ticket_id=tid)
        rp.one("add_ticket_comment", ticket_id=tid, text=text)
        b = rp.one("close_ticket", ticket_id=tid, resolution=resolution)
        request = (
            f'Show me ticket {tid}, add the comment "{text}" and then close it as {resolution}.'
        )
        return _Draft(request, [b["status"], b["closed_on"]])

    def m_add_list(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) < MAX_ADDRESSES)
        if cid is None:
            return None
        a = self._new_address()
        r = rp.one("add_address", customer_id=cid, **a, make_default=True)
        rp.one("list_addresses", customer_id=cid)
        request = (
            f"Add {a['street']}, {a['postcode']} {a['city']} ({a['country']}) as customer {cid}'s "
            f"new default {_labelled(a['label'])}, then show me all their saved addresses."
        )
        return _Draft(request, [r["address_id"]])

    def m_default_delete(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) > 1)
        if cid is None:
            return None
        c = self.state["customers"][cid]
        old = c["default_address_id"]
        new = self.rng.choice([a["address_id"] for a in c["addresses"] if a["address_id"] != old])
        rp.one("set_default_address", customer_id=cid, address_id=new)
        b = rp.one("delete_address", customer_id=cid, address_id=old)
        request = (
            f"For customer {cid}, make {new} the default address and then delete the old "
            f"default, {old}. How many addresses remain?"
        )
        return _Draft(request, [b["status"], str(b["remaining"])])

    def m_customer_tickets(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: bool(self._tickets_of(c["customer_id"])))
        if cid is None:
            return None
        a = rp.one("get_customer", customer_id=cid)
        b = rp.one("list_tickets", customer_id=cid)
        request = f"Pull up customer {cid}'s profile and every support ticket they have filed."
        return _Draft(request, [a["name"], *[t["ticket_id"] for t in b["tickets"]][:2]])

    def m_ticket_customer(self, rp: _Replay) -> _Draft:
        tid = self.rng.choice(self.tickets)
        cid = self.state["tickets"][tid]["customer_id"]
        a = rp.one("get_ticket", ticket_id=tid)
        b = rp.one("get_points_history", customer_id=cid)
        request = (
            f"Ticket {tid} belongs to customer {cid}. What's the ticket's status, and how many "
            "loyalty points does the customer have?"
        )
        return _Draft(request, [a["status"], str(b["balance"])])

    def m_phone_profile_addresses(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        phone = self._new_phone()
        rp.one("update_phone", customer_id=cid, phone=phone)
        b = rp.one("get_customer", customer_id=cid)
        c = rp.one("list_addresses", customer_id=cid)
        request = (
            f"Set customer {cid}'s phone to {phone}, then show me their profile and saved "
            "addresses."
        )
        return _Draft(request, [b["phone"], b["name"], c["addresses"][0]["city"]])

    def m_redeem_profile(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: bool(self._affordable(c)))
        if cid is None:
            return None
        reward = self.rng.choice(self._affordable(self.state["customers"][cid]))
        a = rp.one("redeem_reward", customer_id=cid, reward=reward)
        b = rp.one("get_customer", customer_id=cid)
        request = f"Redeem {REWARD_PHRASES[reward]} for customer {cid}, then show me their profile."
        return _Draft(request, [a["redemption_id"], str(b["points_balance"])])

    # -- parallel -----------------------------------------------------------------------------

    def _several(self, items: list[str], low: int = 2, high: int = 4) -> list[str]:
        return sorted(self.rng.sample(items, self.rng.randint(low, high)), key=_num)

    @staticmethod
    def _listing(items: list[str]) -> str:
        return ", ".join(items[:-1]) + " and " + items[-1]

    def p_profiles(self, rp: _Replay) -> _Draft:
        cids = self._several(self.customers)
        out = rp.turn(*[("get_customer", {"customer_id": c}) for c in cids])
        request = f"Compare the loyalty tiers and points of customers {self._listing(cids)}."
        return _Draft(request, [str(r["points_balance"]) for r in out][:3])

    def p_balances(self, rp: _Replay) -> _Draft:
        cids = self._several(self.customers)
        out = rp.turn(*[("get_points_history", {"customer_id": c}) for c in cids])
        request = f"What are the loyalty points balances of customers {self._listing(cids)}?"
        return _Draft(request, [str(r["balance"]) for r in out][:3])

    def p_tickets(self, rp: _Replay) -> _Draft:
        tids = self._several(self.tickets)
        out = rp.turn(*[("get_ticket", {"ticket_id": t}) for t in tids])
        request = f"Give me the subject and status of tickets {self._listing(tids)}."
        return _Draft(request, [r["subject"] for r in out][:3])

    def p_close_tickets(self, rp: _Replay) -> _Draft:
        tids = self._several(
            [t for t in self.tickets if self.state["tickets"][t]["status"] == "open"], 2, 3
        )
        resolution = self.rng.choice(RESOLUTIONS)
        out = rp.turn(*[("close_ticket", {"ticket_id": t, "resolution": resolution}) for t in tids])
        request = f"Close tickets {self._listing(tids)} as {resolution}."
        return _Draft(request, [out[0]["status"], out[0]["closed_on"]])

    def p_comments(self, rp: _Replay) -> _Draft:
        tids = self._several(
            [t for t in self.tickets if self.state["tickets"][t]["status"] == "open"], 2, 3
        )
        text = self.rng.choice(CUSTOMER_COMMENTS)
        out = rp.turn(*[("add_ticket_comment", {"ticket_id": t, "text": text}) for t in tids])
        request = f'Post the comment "{text}" on each of the tickets {self._listing(tids)}.'
        return _Draft(request, [str(r["comment_count"]) for r in out][:3])

    def p_update_emails(self, rp: _Replay) -> _Draft:
        cids = self._several(self.customers, 2, 3)
        emails = [self._new_email(self.state["customers"][c]) for c in cids]
        out = rp.turn(
            *[
                ("update_email", {"customer_id": c, "email": e})
                for c, e in zip(cids, emails, strict=True)
            ]
        )
        pairs = self._listing([f"{c} to {e}" for c, e in zip(cids, emails, strict=True)])
        request = f"Change these customers' email addresses: {pairs}."
        return _Draft(request, [r["email"] for r in out])

    def p_phone_default(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) > 1)
        if cid is None:
            return None
        c = self.state["customers"][cid]
        aid = self.rng.choice(
            [a["address_id"] for a in c["addresses"] if a["address_id"] != c["default_address_id"]]
        )
        phone = self._new_phone()
        out = rp.turn(
            ("update_phone", {"customer_id": cid, "phone": phone}),
            ("set_default_address", {"customer_id": cid, "address_id": aid}),
        )
        request = (
            f"For customer {cid}: set the phone number to {phone} and make {aid} the default "
            "address."
        )
        return _Draft(request, [out[0]["phone"], out[1]["default_address_id"]])

    def p_addresses_points_ticket(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        tid = self.rng.choice(self.tickets)
        out = rp.turn(
            ("list_addresses", {"customer_id": cid}),
            ("get_points_history", {"customer_id": cid}),
            ("get_ticket", {"ticket_id": tid}),
        )
        request = (
            f"I need three things: customer {cid}'s saved addresses, their points balance, and "
            f"the status of ticket {tid}."
        )
        return _Draft(request, [str(out[1]["balance"]), out[2]["status"]])

    def p_open_redeem(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: bool(self._affordable(c)))
        if cid is None:
            return None
        reward = self.rng.choice(self._affordable(self.state["customers"][cid]))
        category, priority, subject = self._new_issue()
        out = rp.turn(
            ("redeem_reward", {"customer_id": cid, "reward": reward}),
            (
                "open_ticket",
                {
                    "customer_id": cid,
                    "category": category,
                    "priority": priority,
                    "subject": subject,
                },
            ),
        )
        request = (
            f"For customer {cid}, redeem {REWARD_PHRASES[reward]} and also open "
            f'{_issue(priority, category)} titled "{subject}".'
        )
        return _Draft(request, [out[0]["redemption_id"], out[1]["ticket_id"]])

    def p_address_email(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) < MAX_ADDRESSES)
        if cid is None:
            return None
        a = self._new_address()
        email = self._new_email(self.state["customers"][cid])
        out = rp.turn(
            ("add_address", {"customer_id": cid, **a}),
            ("update_email", {"customer_id": cid, "email": email}),
        )
        request = (
            f"Customer {cid} moved: add {a['street']}, {a['postcode']} {a['city']}, {a['country']} "
            f"as a {_labelled(a['label'])} and change their email to {email}."
        )
        return _Draft(request, [out[0]["address_id"], out[1]["email"]])

    # -- dependent ----------------------------------------------------------------------------

    def d_open_comment(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        category, priority, subject = self._new_issue()
        text = self.rng.choice(CUSTOMER_COMMENTS)
        a = rp.one(
            "open_ticket", customer_id=cid, category=category, priority=priority, subject=subject
        )
        rp.one("add_ticket_comment", ticket_id=a["ticket_id"], text=text)
        request = (
            f'Open {_issue(priority, category)} for customer {cid} about "{subject}" '
            f'and add the comment "{text}" to it. What is the ticket number?'
        )
        return _Draft(request, [a["ticket_id"]])

    def d_open_comment_close(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        category, priority, subject = self._new_issue()
        text = self.rng.choice(CUSTOMER_COMMENTS)
        a = rp.one(
            "open_ticket", customer_id=cid, category=category, priority=priority, subject=subject
        )
        rp.one("add_ticket_comment", ticket_id=a["ticket_id"], text=text)
        c = rp.one("close_ticket", ticket_id=a["ticket_id"], resolution="resolved")
        request = (
            f'Log {_issue(priority, category)} for customer {cid} titled "{subject}", '
            f'note "{text}" on it, then close it as resolved since we fixed it on the call.'
        )
        return _Draft(request, [a["ticket_id"], c["status"]])

    def _unique_ticket(
        self, status: str, key: Callable[[dict[str, Any]], str]
    ) -> tuple[str, dict[str, Any]] | None:
        """A customer and one of their tickets (with ``status``) that ``key`` singles out among
        all their tickets."""
        options = []
        for cid in self.customers:
            mine = self._tickets_of(cid)
            for t in mine:
                if status in ("all", t["status"]) and [key(u) for u in mine].count(key(t)) == 1:
                    options.append((cid, t))
        return self.rng.choice(options) if options else None

    def d_close_by_category(self, rp: _Replay) -> _Draft | None:
        picked = self._unique_ticket("open", lambda t: t["category"])
        if picked is None:
            return None
        cid, ticket = picked
        category = _category(ticket["category"])
        rp.one("list_tickets", customer_id=cid, status="open")
        c = rp.one("close_ticket", ticket_id=ticket["ticket_id"], resolution="resolved")
        request = self._pick(
            f"Customer {cid} says their {category} issue is sorted; close that ticket.",
            f"Please close customer {cid}'s open {category} ticket as resolved.",
        )
        return _Draft(request, [ticket["ticket_id"], c["status"]])

    def d_comment_by_subject(self, rp: _Replay) -> _Draft | None:
        picked = self._unique_ticket("open", lambda t: t["subject"])
        if picked is None:
            return None
        cid, ticket = picked
        text = self.rng.choice(CUSTOMER_COMMENTS)
        rp.one("list_tickets", customer_id=cid, status="open")
        c = rp.one("add_ticket_comment", ticket_id=ticket["ticket_id"], text=text)
        request = (
            f'On customer {cid}\'s open ticket about "{ticket["subject"]}", add the comment '
            f'"{text}"'
        )
        return _Draft(request, [ticket["ticket_id"], str(c["comment_count"])])

    def d_latest_comment(self, rp: _Replay) -> _Draft | None:
        picked = self._unique_ticket("all", lambda t: t["subject"])
        if picked is None or not picked[1]["comments"]:
            return None
        cid, ticket = picked
        rp.one("list_tickets", customer_id=cid)
        r = rp.one("get_ticket", ticket_id=ticket["ticket_id"])
        request = (
            f'What was the latest comment on customer {cid}\'s ticket "{ticket["subject"]}", and '
            "when was it written?"
        )
        return _Draft(request, [r["comments"][-1]["text"], r["comments"][-1]["date"]])

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

    def d_default_by_city(self, rp: _Replay) -> _Draft | None:
        picked = self._unique_address(lambda a: a["city"])
        if picked is None:
            return None
        cid, address = picked
        rp.one("list_addresses", customer_id=cid)
        r = rp.one("set_default_address", customer_id=cid, address_id=address["address_id"])
        request = self._pick(
            f"Customer {cid} wants their {address['city']} address to be the default from now on.",
            f"Make the address in {address['city']} the default for customer {cid}.",
        )
        return _Draft(request, [r["default_address_id"]])

    def d_delete_by_place(self, rp: _Replay) -> _Draft | None:
        picked = self._unique_address(lambda a: a["street"])
        if picked is None:
            return None
        cid, address = picked
        rp.one("list_addresses", customer_id=cid)
        r = rp.one("delete_address", customer_id=cid, address_id=address["address_id"])
        request = (
            f"Customer {cid} has moved out of {address['street']}, {address['city']}; delete that "
            "saved address."
        )
        return _Draft(request, [r["address_id"], str(r["remaining"])])

    # -- irrelevance --------------------------------------------------------------------------

    def i_weather(self, rp: _Replay) -> _Draft:
        city = self.rng.choice([c for cities in CITIES.values() for c in cities])
        when = self._pick("tomorrow", "this weekend", "on Friday", "next week")
        return _Draft(f"What will the weather be like in {city} {when}?", [])

    def i_poem(self, rp: _Replay) -> _Draft:
        topic = self._pick(
            "autumn leaves", "the sea", "a lost umbrella", "city lights", "a lazy cat", "winter"
        )
        form = self._pick("a haiku", "a limerick", "a short poem", "a four-line verse")
        return _Draft(f"Could you write {form} about {topic}?", [])

    def i_maths(self, rp: _Replay) -> _Draft:
        a, b = self.rng.randint(12, 99), self.rng.randint(12, 99)
        return _Draft(
            self._pick(
                f"What is {a} multiplied by {b}?",
                f"Is {a * b + 1} a prime number?",
                f"What's {a} percent of {b * 10}?",
            ),
            [],
        )

    def i_translate(self, rp: _Replay) -> _Draft:
        phrase = self._pick(
            "good morning", "where is the station", "thank you very much", "see you soon"
        )
        language = self._pick("French", "German", "Spanish", "Dutch", "Italian")
        return _Draft(f'How do you say "{phrase}" in {language}?', [])

    def i_capital(self, rp: _Replay) -> _Draft:
        country = self._pick(
            "Australia", "Canada", "Kenya", "Peru", "Norway", "Vietnam", "Morocco", "Chile"
        )
        return _Draft(
            self._pick(
                f"What is the capital of {country}?",
                f"Roughly how many people live in {country}?",
            ),
            [],
        )

    def i_recipe(self, rp: _Replay) -> _Draft:
        dish = self._pick("banana bread", "a mushroom risotto", "pancakes", "lentil soup", "paella")
        return _Draft(f"Can you give me a simple recipe for {dish}?", [])

    def i_film(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        genre = self._pick("science-fiction", "comedy", "thriller", "animated", "documentary")
        return _Draft(f"I'm customer {cid}. Can you recommend a good {genre} film for tonight?", [])

    def i_convert(self, rp: _Replay) -> _Draft:
        n = self.rng.randint(2, 60)
        return _Draft(
            self._pick(
                f"How many kilometres are {n} miles?",
                f"What is {n} degrees Fahrenheit in Celsius?",
                f"How many ounces are in {n} kilograms?",
            ),
            [],
        )

    # -- clarification ------------------------------------------------------------------------

    def c_balance(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        name = self.state["customers"][cid]["name"]
        r = rp.one("get_points_history", customer_id=cid)
        request = self._pick(
            f"Hi, this is {name}. How many loyalty points do I have?",
            f"{name} here: what's my points balance at the moment?",
        )
        reply = f"My customer id is {cid}."
        return _Draft(request, [str(r["balance"])], {"customer_id": cid}, reply)

    def c_addresses(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        name = self.state["customers"][cid]["name"]
        r = rp.one("list_addresses", customer_id=cid)
        default = next(a for a in r["addresses"] if a["is_default"])
        request = f"Hello, I'm {name}. Which delivery addresses do you have saved for me?"
        reply = f"It's account {cid}."
        return _Draft(request, [default["street"]], {"customer_id": cid}, reply)

    def c_update_phone(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        name = self.state["customers"][cid]["name"]
        phone = self._new_phone()
        r = rp.one("update_phone", customer_id=cid, phone=phone)
        request = f"Hi, I'm {name} and I have a new phone number: {phone}. Please update it."
        reply = f"Sure, my customer id is {cid}."
        return _Draft(request, [r["phone"]], {"customer_id": cid}, reply)

    def c_update_email(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        email = self._new_email(self.state["customers"][cid])
        r = rp.one("update_email", customer_id=cid, email=email)
        request = self._pick(
            f"Please update the email address on account {cid}.",
            f"Customer {cid} wants to change their email address.",
        )
        reply = f"The new address is {email}."
        return _Draft(request, [r["email"]], {"email": email}, reply)

    def c_ticket_priority(self, rp: _Replay) -> _Draft:
        cid = self.rng.choice(self.customers)
        category, priority, subject = self._new_issue()
        r = rp.one(
            "open_ticket", customer_id=cid, category=category, priority=priority, subject=subject
        )
        request = f'Open {_issue("", category)} for customer {cid} with the subject "{subject}".'
        reply = f"Make it {priority} priority."
        return _Draft(request, [r["ticket_id"]], {"priority": priority}, reply)

    def c_close_ticket(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(self._tickets_of(c["customer_id"], "open")) > 1)
        if cid is None:
            return None
        tid = self.rng.choice(self._tickets_of(cid, "open"))["ticket_id"]
        resolution = self.rng.choice(RESOLUTIONS)
        r = rp.one("close_ticket", ticket_id=tid, resolution=resolution)
        request = (
            f"I'm customer {cid} and I'd like to close one of my open support tickets: "
            f"{RESOLUTION_PHRASES[resolution].replace('the customer has', 'I have')}."
        )
        reply = f"It's ticket {tid}."
        return _Draft(request, [r["status"]], {"ticket_id": tid}, reply)

    def c_ticket_status(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(self._tickets_of(c["customer_id"])) > 1)
        if cid is None:
            return None
        tid = self.rng.choice(self._tickets_of(cid))["ticket_id"]
        r = rp.one("get_ticket", ticket_id=tid)
        request = self._pick(
            f"This is customer {cid}. What's happening with my support ticket?",
            f"Customer {cid} is asking for an update on their ticket.",
        )
        reply = f"I mean ticket {tid}."
        return _Draft(request, [r["status"], r["subject"]], {"ticket_id": tid}, reply)

    def c_redeem(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(self._affordable(c)) > 1)
        if cid is None:
            return None
        reward = self.rng.choice(self._affordable(self.state["customers"][cid]))
        r = rp.one("redeem_reward", customer_id=cid, reward=reward)
        request = self._pick(
            f"Customer {cid} would like to spend some loyalty points on a reward.",
            f"I'm customer {cid} and I want to redeem my points.",
        )
        reply = f"{REWARD_PHRASES[reward].capitalize()} ({reward}), please."
        return _Draft(request, [r["redemption_id"]], {"reward": reward}, reply)

    def c_default_address(self, rp: _Replay) -> _Draft | None:
        cid = self._customer(lambda c: len(c["addresses"]) > 2)
        if cid is None:
            return None
        c = self.state["customers"][cid]
        aid = self.rng.choice(
            [a["address_id"] for a in c["addresses"] if a["address_id"] != c["default_address_id"]]
        )
        r = rp.one("set_default_address", customer_id=cid, address_id=aid)
        request = self._pick(
            f"Customer {cid} wants a different default delivery address.",
            f"Please change which saved address is the default for account {cid}.",
        )
        reply = f"Use address {aid}."
        return _Draft(request, [r["previous_default_id"]], {"address_id": aid}, reply)
