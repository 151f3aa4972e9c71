"""The accounts vocabulary and its 14 tools: names, JSON schemas, descriptions and latencies."""

from __future__ import annotations

from typing import Any

from agentgym.envs.tools.backend import Tool
from agentgym.envs.tools.taskgen import array, integer, nullable, obj, string, typed

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
CITIES: dict[str, tuple[str, ...]] = {
    "GB": ("Leeds", "Bristol", "York", "Cardiff"),
    "IE": ("Dublin", "Cork", "Galway"),
    "FR": ("Lyon", "Nantes", "Lille"),
    "DE": ("Berlin", "Hamburg", "Leipzig"),
    "NL": ("Utrecht", "Leiden", "Delft"),
    "ES": ("Seville", "Valencia", "Bilbao"),
}
COUNTRIES = tuple(CITIES)

EMAIL_PATTERN = "^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}$"
PHONE_PATTERN = "^\\+[1-9][0-9]{7,14}$"
POSTCODE_PATTERN = "^[A-Z0-9][A-Z0-9 -]{2,9}$"


def _date(description: str) -> dict[str, Any]:
    return string(
        description + " (YYYY-MM-DD).", format="date", pattern="^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    )


def _updated(what: str, **fields: dict[str, Any]) -> dict[str, Any]:
    """The result of a write that reports ``fields`` and a constant status ``what``."""
    return obj({**fields, "status": string(f"Always {what}.", enum=[what])})


_CUSTOMER_ID = string('The customer id, e.g. "c7".', pattern="^c[0-9]+$")
_ADDRESS_ID = string('The address id, e.g. "a12".', pattern="^a[0-9]+$")
_TICKET_ID = string('The support ticket id, e.g. "t5".', pattern="^t[0-9]+$")
_LABEL = string("What the address is for.", enum=list(LABELS))
_COUNTRY = string("ISO country code.", enum=list(COUNTRIES))
_CATEGORY = string("Ticket category.", enum=list(CATEGORIES))
_PRIORITY = string("Ticket priority.", enum=list(PRIORITIES))
_DEFAULT_ID = nullable("The default address id, if any.")
_ADDRESS = obj(
    {
        "address_id": _ADDRESS_ID,
        "label": _LABEL,
        "street": string("House number and street."),
        "city": string("City."),
        "postcode": string("Postal code."),
        "country": _COUNTRY,
        "is_default": typed("boolean", description="Whether it is the default address."),
    }
)
_ENTRY = obj(
    {
        "date": _date("When the points were earned or spent"),
        "points": integer("Points earned (positive) or spent (negative)."),
        "reason": string("Why the balance changed."),
    }
)
_COMMENT = obj(
    {
        "author": string("Who wrote the comment.", enum=["customer", "agent"]),
        "text": string("The comment."),
        "date": _date("When it was written"),
    }
)
_TICKET_SUMMARY = {
    "ticket_id": _TICKET_ID,
    "category": _CATEGORY,
    "priority": _PRIORITY,
    "subject": string("Short summary of the issue."),
    "status": string("Ticket status.", enum=["open", "closed"]),
    "opened": _date("When the ticket was opened"),
}
TICKET_SUMMARY_KEYS = tuple(_TICKET_SUMMARY)
"""The fields list_tickets shows of each ticket."""
_TICKET = obj(
    {
        **_TICKET_SUMMARY,
        "customer_id": _CUSTOMER_ID,
        "closed_on": nullable("When the ticket was closed (null while open)."),
        "resolution": nullable("How the ticket was closed (null while open)."),
        "comments": array(_COMMENT, "Comments, oldest first."),
    }
)
_CUSTOMER = obj(
    {
        "customer_id": _CUSTOMER_ID,
        "name": string("Full name."),
        "email": string("Email address."),
        "phone": string("Phone number in international format."),
        "tier": string("Loyalty tier.", enum=list(TIERS)),
        "member_since": _date("When the account was created"),
        "points_balance": integer("Loyalty points available.", minimum=0),
        "default_address_id": _DEFAULT_ID,
    }
)
_NEW_ADDRESS = obj(
    {
        "customer_id": _CUSTOMER_ID,
        "label": _LABEL,
        "street": string("House number and street, e.g. 12 Mill Lane.", minLength=3),
        "city": string("City.", minLength=2),
        "postcode": string("Postal code in capitals, e.g. LS1 4AB.", pattern=POSTCODE_PATTERN),
        "country": _COUNTRY,
        "make_default": typed(
            "boolean", description="Make it the default address (default false)."
        ),
    },
    ["customer_id", "label", "street", "city", "postcode", "country"],
)
_POINTS_QUERY = obj(
    {
        "customer_id": _CUSTOMER_ID,
        "since": _date("Only entries on or after this date"),
        "order": string(
            "Entry order (default newest_first).", enum=["newest_first", "oldest_first"]
        ),
        "limit": integer("Most entries to return (default 10).", minimum=1, maximum=50),
    },
    ["customer_id"],
)
_POINTS = obj(
    {
        "customer_id": _CUSTOMER_ID,
        "balance": integer("Points available now.", minimum=0),
        "total_entries": integer("Entries matching since, before the limit.", minimum=0),
        "entries": array(_ENTRY, "The entries."),
    }
)
_REWARD_LIST = ", ".join(
    f"{reward} ({cost} points{'' if tier == 'bronze' else f', {tier} tier or above'})"
    for reward, (cost, tier) in REWARDS.items()
)
_REDEEMED = _updated(
    "redeemed",
    redemption_id=string('The new redemption id, e.g. "r3".', pattern="^r[0-9]+$"),
    customer_id=_CUSTOMER_ID,
    reward=string("The reward redeemed.", enum=list(REWARDS)),
    points_spent=integer("Points deducted.", minimum=1),
    balance=integer("Points left.", minimum=0),
)
_OPENED = obj(
    {
        "ticket_id": _TICKET_ID,
        "customer_id": _CUSTOMER_ID,
        "category": _CATEGORY,
        "priority": _PRIORITY,
        "status": string("Always open.", enum=["open"]),
        "opened": _date("When the ticket was opened"),
    }
)
_TICKETS = obj(
    {
        "customer_id": _CUSTOMER_ID,
        "tickets": array(obj(dict(_TICKET_SUMMARY)), "The matching tickets."),
    }
)

TOOLS = (
    Tool(
        "get_customer",
        "Get a customer's profile: name, email, phone, loyalty tier, member-since date, points "
        "balance and default address id.",
        obj({"customer_id": _CUSTOMER_ID}),
        _CUSTOMER,
        latency_ms=80.0,
    ),
    Tool(
        "update_email",
        "Change a customer's email address. Fails if the new address is already the one on file.",
        obj(
            {
                "customer_id": _CUSTOMER_ID,
                "email": string("The new email address.", format="email", pattern=EMAIL_PATTERN),
            }
        ),
        _updated(
            "updated",
            customer_id=_CUSTOMER_ID,
            email=string("The email now on file."),
            previous_email=string("The email replaced."),
        ),
        writes=True,
        latency_ms=220.0,
    ),
    Tool(
        "update_phone",
        "Change a customer's phone number (international format, e.g. +447700900123). Fails if "
        "the number is already the one on file.",
        obj(
            {
                "customer_id": _CUSTOMER_ID,
                "phone": string(
                    "The new phone number: +, country code, number.", pattern=PHONE_PATTERN
                ),
            }
        ),
        _updated(
            "updated",
            customer_id=_CUSTOMER_ID,
            phone=string("The phone number now on file."),
            previous_phone=string("The phone number replaced."),
        ),
        writes=True,
        latency_ms=220.0,
    ),
    Tool(
        "list_addresses",
        "List a customer's saved addresses and which one is the default.",
        obj({"customer_id": _CUSTOMER_ID}),
        obj(
            {
                "customer_id": _CUSTOMER_ID,
                "default_address_id": _DEFAULT_ID,
                "addresses": array(_ADDRESS, "In order saved."),
            }
        ),
        latency_ms=90.0,
    ),
    Tool(
        "add_address",
        f"Save a new address for a customer (at most {MAX_ADDRESSES}); returns its new address "
        "id. The first address, or one added with make_default, becomes the default.",
        _NEW_ADDRESS,
        _updated(
            "added",
            address_id=_ADDRESS_ID,
            customer_id=_CUSTOMER_ID,
            is_default=typed("boolean", description="Whether it is now the default."),
        ),
        writes=True,
        latency_ms=260.0,
    ),
    Tool(
        "set_default_address",
        "Make one of a customer's saved addresses the default. Fails if it already is.",
        obj({"customer_id": _CUSTOMER_ID, "address_id": _ADDRESS_ID}),
        _updated(
            "updated",
            customer_id=_CUSTOMER_ID,
            default_address_id=_ADDRESS_ID,
            previous_default_id=nullable("The address that was the default."),
        ),
        writes=True,
        latency_ms=180.0,
    ),
    Tool(
        "delete_address",
        "Delete one of a customer's saved addresses. The default address can only be deleted "
        "when it is the customer's only address.",
        obj({"customer_id": _CUSTOMER_ID, "address_id": _ADDRESS_ID}),
        _updated(
            "deleted",
            address_id=_ADDRESS_ID,
            customer_id=_CUSTOMER_ID,
            default_address_id=nullable("The default address id afterwards."),
            remaining=integer("How many addresses remain.", minimum=0),
        ),
        writes=True,
        latency_ms=200.0,
    ),
    Tool(
        "get_points_history",
        "Get a customer's loyalty points balance and the entries that earned or spent points.",
        _POINTS_QUERY,
        _POINTS,
        latency_ms=120.0,
    ),
    Tool(
        "redeem_reward",
        f"Spend a customer's loyalty points on a reward from the catalogue: {_REWARD_LIST}. "
        "Fails if the balance is too low or the customer's tier is below the reward's.",
        obj(
            {
                "customer_id": _CUSTOMER_ID,
                "reward": string("The reward to redeem.", enum=list(REWARDS)),
            }
        ),
        _REDEEMED,
        writes=True,
        latency_ms=300.0,
    ),
    Tool(
        "open_ticket",
        f"Open a support ticket for a customer; returns the new ticket id. A customer can have at "
        f"most {MAX_OPEN_TICKETS} open tickets.",
        obj(
            {
                "customer_id": _CUSTOMER_ID,
                "category": string("What the issue is about.", enum=list(CATEGORIES)),
                "priority": string("How urgent the issue is.", enum=list(PRIORITIES)),
                "subject": string("Short summary of the issue.", minLength=3),
            }
        ),
        _OPENED,
        writes=True,
        latency_ms=350.0,
    ),
    Tool(
        "get_ticket",
        "Get a support ticket with its status, resolution and comments.",
        obj({"ticket_id": _TICKET_ID}),
        _TICKET,
        latency_ms=100.0,
    ),
    Tool(
        "list_tickets",
        "List a customer's support tickets (oldest first), optionally only open or closed ones.",
        obj(
            {
                "customer_id": _CUSTOMER_ID,
                "status": string("Which tickets (default all).", enum=["open", "closed", "all"]),
            },
            ["customer_id"],
        ),
        _TICKETS,
        latency_ms=150.0,
    ),
    Tool(
        "add_ticket_comment",
        "Add the customer's comment to an open support ticket (closed tickets take no comments).",
        obj({"ticket_id": _TICKET_ID, "text": string("The comment.", minLength=1)}),
        obj(
            {
                "ticket_id": _TICKET_ID,
                "comment_count": integer("Comments on the ticket now.", minimum=1),
                "status": string("Always open.", enum=["open"]),
            }
        ),
        writes=True,
        latency_ms=200.0,
    ),
    Tool(
        "close_ticket",
        "Close an open support ticket with a resolution.",
        obj(
            {
                "ticket_id": _TICKET_ID,
                "resolution": string("Why the ticket is closed.", enum=list(RESOLUTIONS)),
            }
        ),
        obj(
            {
                "ticket_id": _TICKET_ID,
                "status": string("Always closed.", enum=["closed"]),
                "resolution": string("Why the ticket was closed.", enum=list(RESOLUTIONS)),
                "closed_on": _date("When the ticket was closed"),
            }
        ),
        writes=True,
        latency_ms=240.0,
    ),
)
"""The accounts tools: reads and writes interleaved by topic."""

TOOL_NAMES = frozenset(tool.name for tool in TOOLS)
