"""The e-commerce domain: an online shop with a product catalogue, per-user carts, orders,
shipping and refunds over a small seeded backend."""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agentgym.envs.tools.backend import TASK_TYPES, Call, Domain, Task, Tool, ToolFailure, not_found

TODAY = "2025-03-14"
RETURN_WINDOW_DAYS = 30
REFUND_CREDIT_DAYS = 5
N_PRODUCTS = 30
N_USERS = 8
ORDERS_PER_USER = 3

CATEGORIES = ("electronics", "books", "home", "toys", "sports", "clothing", "beauty")
SORTS = ("relevance", "price_asc", "price_desc", "rating_desc")
ORDER_STATUSES = ("placed", "shipped", "delivered", "cancelled", "returned")
SPEEDS = ("standard", "express", "overnight")
CANCEL_REASONS = ("changed_mind", "found_cheaper", "ordered_by_mistake", "delivery_too_slow")
REFUND_REASONS = ("damaged", "wrong_item", "not_as_described", "no_longer_needed")

_NOUNS = {
    "electronics": ("headphones", "speaker", "charger", "keyboard", "mouse", "webcam", "monitor"),
    "books": ("novel", "cookbook", "atlas", "biography", "anthology", "guidebook", "dictionary"),
    "home": ("lamp", "kettle", "blanket", "mug", "vase", "pillow", "toaster"),
    "toys": ("puzzle", "kite", "robot", "blocks", "dollhouse", "racecar", "marbles"),
    "sports": ("football", "racket", "dumbbell", "helmet", "skateboard", "jumprope", "kayak"),
    "clothing": ("jacket", "scarf", "sneakers", "hoodie", "beanie", "gloves", "raincoat"),
    "beauty": ("lipstick", "shampoo", "perfume", "moisturizer", "sunscreen", "serum", "mascara"),
}
_ADJECTIVES = ("Classic", "Compact", "Deluxe", "Eco", "Premium", "Smart", "Vintage", "Cozy")
_PRICE_RANGES = {
    "electronics": (15, 320),
    "books": (6, 45),
    "home": (8, 120),
    "toys": (5, 80),
    "sports": (10, 240),
    "clothing": (12, 150),
    "beauty": (4, 60),
}
_CENTS = (0.99, 0.49, 0.95, 0.5, 0.25)
_FIRST = ("Ana", "Ben", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas")
_LAST = ("Alvarez", "Brooks", "Chen", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad")
_CITIES = {"Springfield": 1, "Riverton": 1, "Lakeside": 2, "Hillcrest": 2, "Northport": 3}
_HUBS = ("Memphis hub", "Louisville hub", "Denver hub", "Reno hub", "Columbus hub")
_SHIPPING = {
    "standard": {"carrier": "PostNet", "code": "PN", "cost": 4.99, "days": 5},
    "express": {"carrier": "SwiftShip", "code": "SS", "cost": 12.99, "days": 2},
    "overnight": {"carrier": "AirDash", "code": "AD", "cost": 24.99, "days": 1},
}
_ZONE_SURCHARGE = {1: 0.0, 2: 2.0, 3: 4.5}

# --------------------------------------------------------------------------- schemas


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _id(kind: str, prefix: str, what: str = "") -> dict[str, Any]:
    return {
        "type": "string",
        "pattern": f"^{prefix}[0-9]+$",
        "description": what or f'The {kind} id, e.g. "{prefix}3".',
    }


def _enum(values: tuple[str, ...], what: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "enum": list(values)}
    if what:
        schema["description"] = what
    return schema


_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_DATE = {"type": "string", "format": "date"}
_NULL_DATE = {"type": ["string", "null"], "format": "date"}
_LINE = _obj(
    {"product_id": _STR, "name": _STR, "unit_price": _NUM, "quantity": _INT},
    ["product_id", "name", "unit_price", "quantity"],
)
_CART = _obj(
    {
        "user_id": _STR,
        "items": {"type": "array", "items": _LINE},
        "item_count": _INT,
        "subtotal": _NUM,
    },
    ["user_id", "items", "item_count", "subtotal"],
)
_SHIP = {
    "order_id": _STR,
    "carrier": _STR,
    "tracking_number": _STR,
    "status": _enum(("label_created", "in_transit", "delivered", "cancelled", "returned")),
    "estimated_delivery": _DATE,
    "delivered_date": _NULL_DATE,
    "last_location": _STR,
}
_OPTION = _obj(
    {"speed": _STR, "carrier": _STR, "cost": _NUM, "days": _INT, "estimated_delivery": _DATE},
    ["speed", "carrier", "cost", "days", "estimated_delivery"],
)
_REFUND = {
    "refund_id": _STR,
    "order_id": _STR,
    "user_id": _STR,
    "amount": _NUM,
    "reason": _STR,
    "status": _STR,
    "created_date": _DATE,
    "expected_credit_date": _DATE,
}
_USER = _id("user", "u", 'The shopper\'s user id, e.g. "u3".')
_PRODUCT = _id("product", "p", 'The product id, e.g. "p12".')
_ORDER = _id("order", "o", 'The order id, e.g. "o7".')


def _tools() -> list[Tool]:
    summary = _obj(
        {
            "product_id": _STR,
            "name": _STR,
            "category": _STR,
            "price": _NUM,
            "rating": _NUM,
            "in_stock": _BOOL,
        },
        ["product_id", "name", "category", "price", "rating", "in_stock"],
    )
    product = _obj(
        {
            "product_id": _STR,
            "name": _STR,
            "category": _STR,
            "price": _NUM,
            "stock": _INT,
            "rating": _NUM,
            "review_count": _INT,
        },
        ["product_id", "name", "category", "price", "stock", "rating", "review_count"],
    )
    order_row = _obj(
        {"order_id": _STR, "status": _STR, "placed_date": _DATE, "total": _NUM},
        ["order_id", "status", "placed_date", "total"],
    )
    order = _obj(
        {
            "order_id": _STR,
            "user_id": _STR,
            "status": _enum(ORDER_STATUSES),
            "placed_date": _DATE,
            "items": {"type": "array", "items": _LINE},
            "subtotal": _NUM,
            "shipping_cost": _NUM,
            "total": _NUM,
            "shipping_speed": _STR,
            "estimated_delivery": _DATE,
            "refund_id": {"type": ["string", "null"]},
            "cancel_reason": {"type": ["string", "null"]},
        },
        ["order_id", "user_id", "status", "placed_date", "items", "total", "refund_id"],
    )
    return [
        Tool(
            "search_products",
            "Search the catalogue by words in the product name, category and price bounds.",
            _obj(
                {
                    "query": {
                        "type": "string",
                        "description": "Words that must all occur in the product name or "
                        "category; omit to match everything.",
                    },
                    "category": _enum(CATEGORIES, "Only products of this category."),
                    "min_price": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 10000,
                        "description": "Lowest price in USD (inclusive).",
                    },
                    "max_price": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 10000,
                        "description": "Highest price in USD (inclusive).",
                    },
                    "sort": _enum(
                        SORTS, "Result order; relevance (most reviewed first) if omitted."
                    ),
                    "in_stock_only": {
                        "type": "boolean",
                        "description": "Leave out products with no stock.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 20,
                        "description": "Most results to return (default 10).",
                    },
                },
                [],
            ),
            _obj(
                {"results": {"type": "array", "items": summary}, "count": _INT},
                ["results", "count"],
            ),
            latency_ms=180.0,
        ),
        Tool(
            "get_product",
            "Details of one product: price, stock left, rating and review count.",
            _obj({"product_id": _PRODUCT}, ["product_id"]),
            product,
            latency_ms=60.0,
        ),
        Tool(
            "add_to_cart",
            "Add a quantity of a product to a user's cart (the cart may not exceed the stock).",
            _obj(
                {
                    "user_id": _USER,
                    "product_id": _PRODUCT,
                    "quantity": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 10,
                        "description": "How many units to add.",
                    },
                },
                ["user_id", "product_id", "quantity"],
            ),
            _obj(
                {"user_id": _STR, "product_id": _STR, "quantity_in_cart": _INT, "subtotal": _NUM},
                ["user_id", "product_id", "quantity_in_cart", "subtotal"],
            ),
            writes=True,
            latency_ms=200.0,
        ),
        Tool(
            "remove_from_cart",
            "Remove a product (all its units) from a user's cart.",
            _obj({"user_id": _USER, "product_id": _PRODUCT}, ["user_id", "product_id"]),
            _obj(
                {"user_id": _STR, "removed_product_id": _STR, "item_count": _INT, "subtotal": _NUM},
                ["user_id", "removed_product_id", "item_count", "subtotal"],
            ),
            writes=True,
            latency_ms=180.0,
        ),
        Tool(
            "view_cart",
            "The items in a user's cart with their quantities and the subtotal.",
            _obj({"user_id": _USER}, ["user_id"]),
            _CART,
            latency_ms=80.0,
        ),
        Tool(
            "place_order",
            "Order everything in a user's cart with a shipping speed; empties the cart.",
            _obj(
                {
                    "user_id": _USER,
                    "shipping_speed": _enum(SPEEDS, "How fast to ship."),
                },
                ["user_id", "shipping_speed"],
            ),
            _obj(
                {
                    "order_id": _STR,
                    "status": _STR,
                    "item_count": _INT,
                    "subtotal": _NUM,
                    "shipping_cost": _NUM,
                    "total": _NUM,
                    "carrier": _STR,
                    "estimated_delivery": _DATE,
                },
                ["order_id", "status", "item_count", "subtotal", "shipping_cost", "total"],
            ),
            writes=True,
            latency_ms=350.0,
        ),
        Tool(
            "get_order",
            "One order: status, items, totals, dates and any refund.",
            _obj({"order_id": _ORDER}, ["order_id"]),
            order,
            latency_ms=70.0,
        ),
        Tool(
            "list_orders",
            "A user's orders, newest first, optionally filtered by status and date.",
            _obj(
                {
                    "user_id": _USER,
                    "status": _enum(ORDER_STATUSES, "Only orders in this status."),
                    "placed_after": {
                        "type": "string",
                        "format": "date",
                        "description": "Only orders placed on or after this date (YYYY-MM-DD).",
                    },
                },
                ["user_id"],
            ),
            _obj(
                {"user_id": _STR, "orders": {"type": "array", "items": order_row}, "count": _INT},
                ["user_id", "orders", "count"],
            ),
            latency_ms=120.0,
        ),
        Tool(
            "cancel_order",
            "Cancel an order that has not shipped yet; its stock is restored and it is refunded.",
            _obj(
                {
                    "order_id": _ORDER,
                    "reason": _enum(CANCEL_REASONS, "Why the order is cancelled."),
                },
                ["order_id", "reason"],
            ),
            _obj(
                {"order_id": _STR, "status": _STR, "refund_amount": _NUM},
                ["order_id", "status", "refund_amount"],
            ),
            writes=True,
            latency_ms=300.0,
        ),
        Tool(
            "request_refund",
            f"Refund a delivered order within {RETURN_WINDOW_DAYS} days of delivery; "
            "creates a refund.",
            _obj(
                {
                    "order_id": _ORDER,
                    "reason": _enum(REFUND_REASONS, "Why the items are returned."),
                },
                ["order_id", "reason"],
            ),
            _obj(_REFUND, list(_REFUND)),
            writes=True,
            latency_ms=320.0,
        ),
        Tool(
            "get_refund",
            "The status, amount and expected credit date of a refund.",
            _obj({"refund_id": _id("refund", "r")}, ["refund_id"]),
            _obj(_REFUND, list(_REFUND)),
            latency_ms=70.0,
        ),
        Tool(
            "get_shipping_options",
            "Shipping speeds to a user's address with carrier, cost and delivery date.",
            _obj(
                {"user_id": _USER, "speed": _enum(SPEEDS, "Only this speed.")},
                ["user_id"],
            ),
            _obj(
                {"user_id": _STR, "city": _STR, "options": {"type": "array", "items": _OPTION}},
                ["user_id", "city", "options"],
            ),
            latency_ms=110.0,
        ),
        Tool(
            "track_shipment",
            "Where an order's parcel is: carrier, tracking number, status and delivery date.",
            _obj({"order_id": _ORDER}, ["order_id"]),
            _obj(_SHIP, list(_SHIP)),
            latency_ms=150.0,
        ),
    ]


_TOOL_NAMES = frozenset(tool.name for tool in _tools())

# --------------------------------------------------------------------------- helpers


def _num(key: str) -> int:
    return int(key[1:])


def _add_days(date: str, days: int) -> str:
    return (dt.date.fromisoformat(date) + dt.timedelta(days=days)).isoformat()


def _days_between(start: str, end: str) -> int:
    return (dt.date.fromisoformat(end) - dt.date.fromisoformat(start)).days


def _subtotal(lines: list[dict[str, Any]]) -> float:
    return round(float(sum(line["unit_price"] * line["quantity"] for line in lines)), 2)


def _option(state: dict[str, Any], zone: int, speed: str, start: str) -> dict[str, Any]:
    ship = state["shipping"][speed]
    return {
        "speed": speed,
        "carrier": ship["carrier"],
        "cost": round(ship["cost"] + _ZONE_SURCHARGE[zone], 2),
        "days": ship["days"] + zone - 1,
        "estimated_delivery": _add_days(start, ship["days"] + zone - 1),
    }


def _tracking(speed: str, order_num: int) -> str:
    return f"{_SHIPPING[speed]['code']}{100000 + order_num * 7919 % 900000}"


def _get(state: dict[str, Any], kind: str, key: str) -> dict[str, Any]:
    found = state[kind + "s"].get(key)
    if found is None:
        raise not_found(kind, key)
    return found


def _fact(value: Any) -> str:
    """A result value as its JSON text shows it (floats as ``json.dumps`` writes them)."""
    return json.dumps(value) if isinstance(value, float) else str(value)


# --------------------------------------------------------------------------- domain


class EcommerceDomain(Domain):
    """An online shop: catalogue search, carts, orders, shipping, tracking and refunds."""

    name = "ecommerce"
    description = (
        "An online shop: search products, manage carts, place, track, cancel and refund orders."
    )

    def tools(self) -> list[Tool]:
        """The 13 shop tools, in a fixed order."""
        return _tools()

    def build(self, seed: int) -> dict[str, Any]:
        """Products, users, carts, orders (in every status) and refunds, seeded by ``seed``."""
        rng = random.Random(seed)
        products: dict[str, Any] = {}
        names: set[str] = set()
        for i in range(1, N_PRODUCTS + 1):
            category = CATEGORIES[(i - 1) % len(CATEGORIES)]
            name = ""
            while not name or name in names:
                name = f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS[category]).title()}"
            names.add(name)
            low, high = _PRICE_RANGES[category]
            products[f"p{i}"] = {
                "product_id": f"p{i}",
                "name": name,
                "category": category,
                "price": round(rng.randint(low, high) + rng.choice(_CENTS), 2),
                "stock": 0 if rng.random() < 0.1 else rng.randint(3, 40),
                "rating": round(rng.uniform(2.5, 5.0), 1),
                "review_count": rng.randint(0, 900),
            }
        users: dict[str, Any] = {}
        cities = sorted(_CITIES)
        for i in range(1, N_USERS + 1):
            first, last = rng.choice(_FIRST), rng.choice(_LAST)
            city = rng.choice(cities)
            users[f"u{i}"] = {
                "user_id": f"u{i}",
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}{i}@example.com",
                "city": city,
                "zone": _CITIES[city],
            }
        stocked = [pid for pid, p in products.items() if p["stock"] > 0]
        carts: dict[str, Any] = {}
        for uid in users:
            lines = []
            if _num(uid) % 2 == 1:
                for pid in sorted(rng.sample(stocked, rng.randint(1, 2)), key=_num):
                    p = products[pid]
                    lines.append(
                        {
                            "product_id": pid,
                            "name": p["name"],
                            "unit_price": p["price"],
                            "quantity": rng.randint(1, min(3, p["stock"])),
                        }
                    )
            carts[uid] = lines
        state: dict[str, Any] = {
            "today": TODAY,
            "return_window_days": RETURN_WINDOW_DAYS,
            "products": products,
            "users": users,
            "carts": carts,
            "orders": {},
            "refunds": {},
            "shipping": copy.deepcopy(_SHIPPING),
            "next_order": 1,
            "next_refund": 1,
        }
        kinds = ["placed", "shipped", "recent", "old", "cancelled", "returned"]
        kinds *= N_USERS * ORDERS_PER_USER // len(kinds)
        rng.shuffle(kinds)
        for n, kind in enumerate(kinds, start=1):
            self._seed_order(state, rng, f"u{(n - 1) % N_USERS + 1}", kind)
        return state

    def _seed_order(self, state: dict[str, Any], rng: random.Random, uid: str, kind: str) -> None:
        """Add one pre-existing order of ``kind`` (a status; "recent"/"old" are delivered
        orders inside/outside the return window)."""
        back = {
            "placed": (0, 1),
            "shipped": (2, 4),
            "recent": (8, 20),
            "old": (50, 90),
            "cancelled": (3, 40),
            "returned": (12, 25),
        }[kind]
        placed = _add_days(TODAY, -rng.randint(*back))
        speed = rng.choice(SPEEDS)
        lines = []
        for pid in sorted(
            rng.sample(sorted(state["products"], key=_num), rng.randint(1, 3)), key=_num
        ):
            p = state["products"][pid]
            lines.append(
                {
                    "product_id": pid,
                    "name": p["name"],
                    "unit_price": p["price"],
                    "quantity": rng.randint(1, 3),
                }
            )
        num = state["next_order"]
        state["next_order"] += 1
        oid = f"o{num}"
        opt = _option(state, state["users"][uid]["zone"], speed, placed)
        status = "delivered" if kind in ("recent", "old") else kind
        delivered = (
            _add_days(placed, rng.randint(1, 3)) if kind in ("recent", "old", "returned") else None
        )
        ship_status, where = {
            "placed": ("label_created", "warehouse"),
            "shipped": ("in_transit", rng.choice(_HUBS)),
            "delivered": ("delivered", state["users"][uid]["city"]),
            "cancelled": ("cancelled", "warehouse"),
            "returned": ("returned", "warehouse"),
        }[status]
        subtotal = _subtotal(lines)
        state["orders"][oid] = {
            "order_id": oid,
            "user_id": uid,
            "status": status,
            "placed_date": placed,
            "items": lines,
            "subtotal": subtotal,
            "shipping_cost": opt["cost"],
            "total": round(subtotal + opt["cost"], 2),
            "shipping_speed": speed,
            "refund_id": None,
            "cancel_reason": rng.choice(CANCEL_REASONS) if kind == "cancelled" else None,
            "shipping": {
                "carrier": opt["carrier"],
                "tracking_number": _tracking(speed, num),
                "status": ship_status,
                "estimated_delivery": opt["estimated_delivery"],
                "delivered_date": delivered,
                "last_location": where,
            },
        }
        if kind == "returned":
            when = _add_days(str(delivered), 2)
            self._new_refund(state, state["orders"][oid], rng.choice(REFUND_REASONS), when)

    @staticmethod
    def _new_refund(
        state: dict[str, Any], order: dict[str, Any], reason: str, when: str
    ) -> dict[str, Any]:
        """Create an approved refund of ``order``'s total dated ``when``; the order is returned."""
        rid = f"r{state['next_refund']}"
        state["next_refund"] += 1
        refund = {
            "refund_id": rid,
            "order_id": order["order_id"],
            "user_id": order["user_id"],
            "amount": order["total"],
            "reason": reason,
            "status": "approved",
            "created_date": when,
            "expected_credit_date": _add_days(when, REFUND_CREDIT_DAYS),
        }
        state["refunds"][rid] = refund
        order["status"] = "returned"
        order["refund_id"] = rid
        order["shipping"]["status"] = "returned"
        return refund

    # ----------------------------------------------------------------------- calls

    def call(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run one validated call; writes change ``state`` in place."""
        if name not in _TOOL_NAMES:
            raise ValueError(f"unknown ecommerce tool {name!r}")
        return getattr(self, "_" + name)(state, **arguments)

    def _search_products(
        self,
        state: dict[str, Any],
        query: str = "",
        category: str | None = None,
        min_price: float = 0.0,
        max_price: float = 10000.0,
        sort: str = "relevance",
        in_stock_only: bool = False,
        limit: int = 10,
    ) -> dict[str, Any]:
        words = query.lower().split()
        hits = [
            p
            for p in state["products"].values()
            if (category is None or p["category"] == category)
            and min_price <= p["price"] <= max_price
            and (p["stock"] > 0 or not in_stock_only)
            and all(w in p["name"].lower() or w == p["category"] for w in words)
        ]
        keys: dict[str, Callable[[dict[str, Any]], tuple[Any, ...]]] = {
            "relevance": lambda p: (-p["review_count"], _num(p["product_id"])),
            "price_asc": lambda p: (p["price"], _num(p["product_id"])),
            "price_desc": lambda p: (-p["price"], _num(p["product_id"])),
            "rating_desc": lambda p: (-p["rating"], _num(p["product_id"])),
        }
        hits.sort(key=keys[sort])
        results = [
            {
                "product_id": p["product_id"],
                "name": p["name"],
                "category": p["category"],
                "price": p["price"],
                "rating": p["rating"],
                "in_stock": p["stock"] > 0,
            }
            for p in hits[:limit]
        ]
        return {"results": results, "count": len(results)}

    def _get_product(self, state: dict[str, Any], product_id: str) -> dict[str, Any]:
        return dict(_get(state, "product", product_id))

    def _add_to_cart(
        self, state: dict[str, Any], user_id: str, product_id: str, quantity: int
    ) -> dict[str, Any]:
        _get(state, "user", user_id)
        product = _get(state, "product", product_id)
        lines = state["carts"][user_id]
        line = next((x for x in lines if x["product_id"] == product_id), None)
        have = line["quantity"] if line else 0
        if have + quantity > product["stock"]:
            raise ToolFailure(
                "failed_precondition",
                f"only {product['stock']} of {product_id} in stock and {have} already in the "
                f"cart; add at most {max(product['stock'] - have, 0)}",
            )
        if line is None:
            line = {
                "product_id": product_id,
                "name": product["name"],
                "unit_price": product["price"],
                "quantity": 0,
            }
            lines.append(line)
            lines.sort(key=lambda x: _num(x["product_id"]))
        line["quantity"] += quantity
        return {
            "user_id": user_id,
            "product_id": product_id,
            "quantity_in_cart": line["quantity"],
            "subtotal": _subtotal(lines),
        }

    def _remove_from_cart(
        self, state: dict[str, Any], user_id: str, product_id: str
    ) -> dict[str, Any]:
        _get(state, "user", user_id)
        _get(state, "product", product_id)
        lines = state["carts"][user_id]
        kept = [x for x in lines if x["product_id"] != product_id]
        if len(kept) == len(lines):
            raise ToolFailure(
                "failed_precondition",
                f"{product_id} is not in {user_id}'s cart; view_cart lists what is there",
            )
        lines[:] = kept
        return {
            "user_id": user_id,
            "removed_product_id": product_id,
            "item_count": sum(x["quantity"] for x in lines),
            "subtotal": _subtotal(lines),
        }

    def _view_cart(self, state: dict[str, Any], user_id: str) -> dict[str, Any]:
        _get(state, "user", user_id)
        lines = state["carts"][user_id]
        return {
            "user_id": user_id,
            "items": [dict(x) for x in lines],
            "item_count": sum(x["quantity"] for x in lines),
            "subtotal": _subtotal(lines),
        }

    def _place_order(
        self, state: dict[str, Any], user_id: str, shipping_speed: str
    ) -> dict[str, Any]:
        user = _get(state, "user", user_id)
        lines = state["carts"][user_id]
        if not lines:
            raise ToolFailure(
                "failed_precondition", f"{user_id}'s cart is empty; add_to_cart first"
            )
        for line in lines:
            stock = state["products"][line["product_id"]]["stock"]
            if line["quantity"] > stock:
                raise ToolFailure(
                    "failed_precondition",
                    f"only {stock} of {line['product_id']} in stock; lower its quantity in the "
                    "cart (remove_from_cart, then add_to_cart) and retry",
                )
        for line in lines:
            state["products"][line["product_id"]]["stock"] -= line["quantity"]
        num = state["next_order"]
        state["next_order"] += 1
        oid = f"o{num}"
        opt = _option(state, user["zone"], shipping_speed, state["today"])
        subtotal = _subtotal(lines)
        total = round(subtotal + opt["cost"], 2)
        state["orders"][oid] = {
            "order_id": oid,
            "user_id": user_id,
            "status": "placed",
            "placed_date": state["today"],
            "items": [dict(x) for x in lines],
            "subtotal": subtotal,
            "shipping_cost": opt["cost"],
            "total": total,
            "shipping_speed": shipping_speed,
            "refund_id": None,
            "cancel_reason": None,
            "shipping": {
                "carrier": opt["carrier"],
                "tracking_number": _tracking(shipping_speed, num),
                "status": "label_created",
                "estimated_delivery": opt["estimated_delivery"],
                "delivered_date": None,
                "last_location": "warehouse",
            },
        }
        item_count = sum(x["quantity"] for x in lines)
        lines.clear()
        return {
            "order_id": oid,
            "status": "placed",
            "item_count": item_count,
            "subtotal": subtotal,
            "shipping_cost": opt["cost"],
            "total": total,
            "carrier": opt["carrier"],
            "estimated_delivery": opt["estimated_delivery"],
        }

    def _get_order(self, state: dict[str, Any], order_id: str) -> dict[str, Any]:
        order = _get(state, "order", order_id)
        out = {k: v for k, v in order.items() if k != "shipping"}
        out["items"] = [dict(x) for x in order["items"]]
        out["estimated_delivery"] = order["shipping"]["estimated_delivery"]
        return out

    def _list_orders(
        self,
        state: dict[str, Any],
        user_id: str,
        status: str | None = None,
        placed_after: str = "0001-01-01",
    ) -> dict[str, Any]:
        _get(state, "user", user_id)
        rows = [
            {
                "order_id": o["order_id"],
                "status": o["status"],
                "placed_date": o["placed_date"],
                "total": o["total"],
            }
            for o in state["orders"].values()
            if o["user_id"] == user_id
            and (status is None or o["status"] == status)
            and o["placed_date"] >= placed_after
        ]
        rows.sort(key=lambda r: (r["placed_date"], _num(r["order_id"])), reverse=True)
        return {"user_id": user_id, "orders": rows, "count": len(rows)}

    def _cancel_order(self, state: dict[str, Any], order_id: str, reason: str) -> dict[str, Any]:
        order = _get(state, "order", order_id)
        if order["status"] != "placed":
            hint = {
                "shipped": "it has already shipped; once delivered, request_refund instead",
                "delivered": "it was delivered; use request_refund instead",
            }.get(order["status"], "nothing is left to cancel")
            raise ToolFailure(
                "failed_precondition", f"order {order_id} is {order['status']}: {hint}"
            )
        for line in order["items"]:
            state["products"][line["product_id"]]["stock"] += line["quantity"]
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["shipping"]["status"] = "cancelled"
        return {"order_id": order_id, "status": "cancelled", "refund_amount": order["total"]}

    def _request_refund(self, state: dict[str, Any], order_id: str, reason: str) -> dict[str, Any]:
        order = _get(state, "order", order_id)
        if order["refund_id"] is not None:
            raise ToolFailure(
                "failed_precondition",
                f"order {order_id} already has refund {order['refund_id']}; get_refund shows it",
            )
        if order["status"] != "delivered":
            raise ToolFailure(
                "failed_precondition",
                f"order {order_id} is {order['status']}: only delivered orders can be refunded"
                + ("; cancel_order it instead" if order["status"] == "placed" else ""),
            )
        age = _days_between(order["shipping"]["delivered_date"], state["today"])
        if age > state["return_window_days"]:
            raise ToolFailure(
                "failed_precondition",
                f"order {order_id} was delivered {age} days ago, past the "
                f"{state['return_window_days']}-day return window; it cannot be refunded",
            )
        return dict(self._new_refund(state, order, reason, state["today"]))

    def _get_refund(self, state: dict[str, Any], refund_id: str) -> dict[str, Any]:
        return dict(_get(state, "refund", refund_id))

    def _get_shipping_options(
        self, state: dict[str, Any], user_id: str, speed: str | None = None
    ) -> dict[str, Any]:
        user = _get(state, "user", user_id)
        options = [
            _option(state, user["zone"], s, state["today"])
            for s in SPEEDS
            if speed is None or s == speed
        ]
        return {"user_id": user_id, "city": user["city"], "options": options}

    def _track_shipment(self, state: dict[str, Any], order_id: str) -> dict[str, Any]:
        order = _get(state, "order", order_id)
        return {"order_id": order_id, **order["shipping"]}

    # ----------------------------------------------------------------------- resources

    def resources(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
        """Read and written paths; calls whose ids are allocated from a counter or whose
        products are unknown up front write the whole collection."""
        user = f"users/{arguments.get('user_id')}"
        cart = f"carts/{arguments.get('user_id')}"
        order = f"orders/{arguments.get('order_id')}"
        product = f"products/{arguments.get('product_id')}"
        table: dict[str, tuple[list[str], list[str]]] = {
            "search_products": (["products"], []),
            "get_product": ([product], []),
            "add_to_cart": ([user, product, cart], [cart]),
            "remove_from_cart": ([user, product, cart], [cart]),
            "view_cart": ([user, cart], []),
            "place_order": ([user, cart, "products"], [cart, "products", "orders"]),
            "get_order": ([order], []),
            "list_orders": ([user, "orders"], []),
            "cancel_order": ([order], [order, "products"]),
            "request_refund": ([order], [order, "refunds"]),
            "get_refund": ([f"refunds/{arguments.get('refund_id')}"], []),
            "get_shipping_options": ([user], []),
            "track_shipment": ([order], []),
        }
        reads, writes = table[name]
        return list(reads), list(writes)

    # ----------------------------------------------------------------------- tasks

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks of each type, templates taken in turn and entities drawn with a
        seeded rng; gold results come from running the calls on a copy of ``state``."""
        out: list[Task] = []
        for t, task_type in enumerate(TASK_TYPES):
            gen = _TaskGen(self, state, random.Random(seed * 7919 + t))
            templates = gen.templates[task_type]
            for i in range(per_type):
                draft = None
                for k in range(len(templates)):
                    draft = templates[(i + k) % len(templates)]()
                    if draft is not None:
                        break
                if draft is None:
                    raise RuntimeError(f"no {task_type} task fits this state")
                task = Task(
                    id=f"ecommerce-{task_type}-{i:04d}",
                    task_type=task_type,
                    request=draft.request,
                    gold_calls=tuple(tuple(turn) for turn in draft.turns),
                    answer_facts=tuple(draft.facts),
                    hidden_facts=dict(draft.hidden),
                )
                out.append(replace(task, clarify_reply=draft.reply) if draft.reply else task)
        return out


# --------------------------------------------------------------------------- task templates

_CANCEL_WORDS = {
    "changed_mind": "I changed my mind",
    "found_cheaper": "I found it cheaper elsewhere",
    "ordered_by_mistake": "I ordered it by mistake",
    "delivery_too_slow": "the delivery is too slow",
}
_REFUND_WORDS = {
    "damaged": "it arrived damaged",
    "wrong_item": "I received the wrong item",
    "not_as_described": "it is not as described",
    "no_longer_needed": "I no longer need it",
}
_TOPICS = ("autumn", "the sea", "a lost cat", "friendship", "city lights", "mountains", "rain")
_PLACES = ("Lisbon", "Osaka", "Nairobi", "Toronto", "Oslo", "Santiago", "Hanoi", "Perth")
_LANGS = ("French", "German", "Japanese", "Spanish", "Swahili", "Italian")
_PHRASES = ("good morning", "where is the station", "thank you very much", "see you soon")
_DISHES = ("lasagne", "pad thai", "banana bread", "ramen", "paella", "shakshuka")
_FIELDS = ("the French Revolution", "photosynthesis", "black holes", "the Roman Empire")


@dataclass
class _Draft:
    request: str
    turns: list[list[Call]]
    facts: list[str]
    reply: str = ""
    hidden: dict[str, str] = field(default_factory=dict)


class _TaskGen:
    """Task templates over one initial state; each returns a draft or None when the state
    has no entity that fits."""

    def __init__(self, domain: EcommerceDomain, state: dict[str, Any], rng: random.Random):
        self.dom = domain
        self.state = state
        self.rng = rng
        orders = sorted(state["orders"].values(), key=lambda o: _num(o["order_id"]))
        self.by_status = {
            s: [o["order_id"] for o in orders if o["status"] == s] for s in ORDER_STATUSES
        }
        self.refundable = [
            o["order_id"]
            for o in orders
            if o["status"] == "delivered"
            and _days_between(o["shipping"]["delivered_date"], state["today"])
            <= state["return_window_days"]
        ]
        self.users = sorted(state["users"], key=_num)
        self.cart_users = [u for u in self.users if state["carts"][u]]
        self.refunds = sorted(state["refunds"], key=_num)
        self.products = sorted(state["products"], key=_num)
        self.templates: dict[str, list[Callable[[], _Draft | None]]] = {
            "single": [
                self.s_add,
                self.s_product,
                self.s_search,
                self.s_place,
                self.s_cart,
                self.s_order,
                self.s_cancel,
                self.s_list,
                self.s_track,
                self.s_refund,
                self.s_options,
                self.s_remove,
                self.s_get_refund,
            ],
            "multiple": [
                self.m_add_place,
                self.m_cart_options,
                self.m_product_add,
                self.m_order_track,
                self.m_cancel_list,
                self.m_product_search,
                self.m_refund_order,
                self.m_remove_view,
                self.m_add_view_place,
                self.m_refund_list,
            ],
            "parallel": [
                self.p_add_users,
                self.p_products,
                self.p_cancel_track,
                self.p_tracks,
                self.p_refund_mix,
                self.p_mix,
                self.p_remove_add,
                self.p_orders,
                self.p_list_refund,
            ],
            "dependent": [
                self.d_search_add,
                self.d_cheapest_details,
                self.d_list_cancel,
                self.d_list_track,
                self.d_list_refund,
                self.d_refund_status,
                self.d_place_track,
                self.d_search_detail_add,
                self.d_list_get_cancel,
                self.d_list_refund_status,
            ],
            "irrelevance": [
                self.i_poem,
                self.i_weather,
                self.i_maths,
                self.i_translate,
                self.i_recipe,
                self.i_distance,
                self.i_explain,
            ],
            "clarification": [
                self.c_track,
                self.c_cancel,
                self.c_add,
                self.c_cart,
                self.c_place,
                self.c_product,
                self.c_refund,
                self.c_list,
                self.c_order,
            ],
        }

    # ------------------------------------------------------------------- utilities

    def _pick(self, items: list[str]) -> str | None:
        return self.rng.choice(items) if items else None

    def _room(self, st: dict[str, Any], uid: str, pid: str) -> int:
        """How many more units of ``pid`` fit in ``uid``'s cart (capped at 3)."""
        have = sum(x["quantity"] for x in st["carts"][uid] if x["product_id"] == pid)
        return min(3, st["products"][pid]["stock"] - have)

    def _addable(self, uid: str) -> tuple[str, int] | None:
        pids = [p for p in self.products if self._room(self.state, uid, p) >= 1]
        if not pids:
            return None
        pid = self.rng.choice(pids)
        return pid, self.rng.randint(1, self._room(self.state, uid, pid))

    def _run(self, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[list[Call]], list[Any]]:
        """Run calls one per turn on a fresh copy; the turns and their results."""
        st = copy.deepcopy(self.state)
        turns, results = [], []
        for name, args in calls:
            results.append(self.dom.call(st, name, args))
            turns.append([Call(name, args)])
        return turns, results

    def _run_turn(
        self, calls: list[tuple[str, dict[str, Any]]]
    ) -> tuple[list[list[Call]], list[Any]]:
        """Run calls issued together in one turn on a fresh copy."""
        st = copy.deepcopy(self.state)
        results = [self.dom.call(st, name, args) for name, args in calls]
        return [[Call(name, args) for name, args in calls]], results

    def _cart_user(self) -> str:
        """A user with a non-empty cart (any user when every cart is empty)."""
        return self.rng.choice(self.cart_users or self.users)

    def _owner(self, oid: str) -> str:
        return str(self.state["orders"][oid]["user_id"])

    def _name(self, pid: str) -> str:
        return str(self.state["products"][pid]["name"])

    # ------------------------------------------------------------------- single

    def s_add(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        got = self._addable(uid)
        if got is None:
            return None
        pid, qty = got
        turns, (r,) = self._run(
            [("add_to_cart", {"user_id": uid, "product_id": pid, "quantity": qty})]
        )
        return _Draft(
            f"I'm user {uid}. Please add {qty} of product {pid} ({self._name(pid)}) to my cart "
            "and tell me the new cart subtotal.",
            turns,
            [_fact(r["subtotal"]), str(r["quantity_in_cart"])],
        )

    def s_product(self) -> _Draft | None:
        pid = self.rng.choice(self.products)
        turns, (r,) = self._run([("get_product", {"product_id": pid})])
        return _Draft(
            f"How much does product {pid} cost, how many are in stock and how is it rated?",
            turns,
            [_fact(r["price"]), str(r["stock"]), _fact(r["rating"])],
        )

    def s_search(self) -> _Draft | None:
        cat = self.rng.choice(CATEGORIES)
        prices = sorted(p["price"] for p in self.state["products"].values() if p["category"] == cat)
        if not prices:
            return None
        cap = int(self.rng.choice(prices)) + 1
        sort = self.rng.choice(("price_asc", "rating_desc"))
        args = {"category": cat, "max_price": cap, "sort": sort}
        turns, (r,) = self._run([("search_products", args)])
        order = "cheapest first" if sort == "price_asc" else "best rated first"
        top = r["results"][0]
        return _Draft(
            f"Show me products in the {cat} category that cost at most ${cap}, {order}.",
            turns,
            [top["name"], _fact(top["price"])],
        )

    def s_place(self) -> _Draft | None:
        uid = self._pick(self.cart_users)
        if uid is None:
            return None
        speed = self.rng.choice(SPEEDS)
        turns, (r,) = self._run([("place_order", {"user_id": uid, "shipping_speed": speed})])
        return _Draft(
            f"This is user {uid}: please place an order for everything in my cart with "
            f"{speed} shipping. What is the order number and total?",
            turns,
            [r["order_id"], _fact(r["total"])],
        )

    def s_cart(self) -> _Draft | None:
        uid = self._cart_user()
        turns, (r,) = self._run([("view_cart", {"user_id": uid})])
        return _Draft(
            f"What's in the shopping cart of user {uid}, and what is its subtotal?",
            turns,
            [_fact(r["subtotal"]), str(r["item_count"])],
        )

    def s_order(self) -> _Draft | None:
        oid = self.rng.choice(sorted(self.state["orders"], key=_num))
        turns, (r,) = self._run([("get_order", {"order_id": oid})])
        return _Draft(
            f"What's the status and total of order {oid}?",
            turns,
            [r["status"], _fact(r["total"])],
        )

    def s_cancel(self) -> _Draft | None:
        oid = self._pick(self.by_status["placed"])
        if oid is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        turns, (r,) = self._run([("cancel_order", {"order_id": oid, "reason": reason})])
        return _Draft(
            f"Please cancel order {oid}: {_CANCEL_WORDS[reason]}. How much will I get back?",
            turns,
            [r["status"], _fact(r["refund_amount"])],
        )

    def s_list(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        status = self.rng.choice((None, *ORDER_STATUSES))
        args: dict[str, Any] = {"user_id": uid}
        if status is not None:
            args["status"] = status
        turns, (r,) = self._run([("list_orders", args)])
        if not r["orders"]:
            return None
        which = "all my orders" if status is None else f"my {status} orders"
        return _Draft(
            f"I'm customer {uid}. List {which}, please.",
            turns,
            [row["order_id"] for row in r["orders"][:3]],
        )

    def s_track(self) -> _Draft | None:
        oid = self._pick(self.by_status["shipped"] + self.by_status["placed"])
        if oid is None:
            return None
        turns, (r,) = self._run([("track_shipment", {"order_id": oid})])
        return _Draft(
            f"Where is my parcel for order {oid}? Who is the carrier and when will it arrive?",
            turns,
            [r["carrier"], r["estimated_delivery"], r["status"]],
        )

    def s_refund(self) -> _Draft | None:
        oid = self._pick(self.refundable)
        if oid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        turns, (r,) = self._run([("request_refund", {"order_id": oid, "reason": reason})])
        return _Draft(
            f"I want a refund for order {oid} because {_REFUND_WORDS[reason]}.",
            turns,
            [r["refund_id"], _fact(r["amount"])],
        )

    def s_options(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        speed = self.rng.choice(SPEEDS)
        turns, (r,) = self._run([("get_shipping_options", {"user_id": uid, "speed": speed})])
        opt = r["options"][0]
        return _Draft(
            f"How much would {speed} shipping cost to my address (user {uid}), and when would "
            "it arrive if I ordered today?",
            turns,
            [_fact(opt["cost"]), opt["estimated_delivery"]],
        )

    def s_remove(self) -> _Draft | None:
        uid = self._pick(self.cart_users)
        if uid is None:
            return None
        pid = self.rng.choice([x["product_id"] for x in self.state["carts"][uid]])
        turns, (r,) = self._run([("remove_from_cart", {"user_id": uid, "product_id": pid})])
        return _Draft(
            f"User {uid} here. Take product {pid} out of my cart; what's the subtotal now?",
            turns,
            [_fact(r["subtotal"])],
        )

    def s_get_refund(self) -> _Draft | None:
        rid = self._pick(self.refunds)
        if rid is None:
            return None
        turns, (r,) = self._run([("get_refund", {"refund_id": rid})])
        return _Draft(
            f"What's the status of refund {rid}, and when will the money reach my account?",
            turns,
            [r["status"], r["expected_credit_date"], _fact(r["amount"])],
        )

    # ------------------------------------------------------------------- multiple

    def m_add_place(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        got = self._addable(uid)
        if got is None:
            return None
        pid, qty = got
        speed = self.rng.choice(SPEEDS)
        turns, (_, r) = self._run(
            [
                ("add_to_cart", {"user_id": uid, "product_id": pid, "quantity": qty}),
                ("place_order", {"user_id": uid, "shipping_speed": speed}),
            ]
        )
        return _Draft(
            f"I'm {uid}. Add {qty} of product {pid} to my cart, then check out the whole cart "
            f"with {speed} shipping. Give me the order id and the total.",
            turns,
            [r["order_id"], _fact(r["total"])],
        )

    def m_cart_options(self) -> _Draft | None:
        uid = self._cart_user()
        turns, (r1, r2) = self._run(
            [("view_cart", {"user_id": uid}), ("get_shipping_options", {"user_id": uid})]
        )
        cheapest = min(r2["options"], key=lambda o: o["cost"])
        return _Draft(
            f"For user {uid}: show my cart's subtotal and all shipping options to my address.",
            turns,
            [_fact(r1["subtotal"]), _fact(cheapest["cost"]), r2["options"][-1]["carrier"]],
        )

    def m_product_add(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        got = self._addable(uid)
        if got is None:
            return None
        pid, qty = got
        turns, (r1, r2) = self._run(
            [
                ("get_product", {"product_id": pid}),
                ("add_to_cart", {"user_id": uid, "product_id": pid, "quantity": qty}),
            ]
        )
        return _Draft(
            f"Tell me the price and rating of product {pid}, and add {qty} of it to the cart of "
            f"user {uid}.",
            turns,
            [_fact(r1["price"]), _fact(r1["rating"]), _fact(r2["subtotal"])],
        )

    def m_order_track(self) -> _Draft | None:
        oid = self.rng.choice(sorted(self.state["orders"], key=_num))
        turns, (r1, r2) = self._run(
            [("get_order", {"order_id": oid}), ("track_shipment", {"order_id": oid})]
        )
        return _Draft(
            f"Give me the total of order {oid} and its shipment tracking details.",
            turns,
            [_fact(r1["total"]), r2["tracking_number"], r2["carrier"]],
        )

    def m_cancel_list(self) -> _Draft | None:
        oid = self._pick(self.by_status["placed"])
        if oid is None:
            return None
        uid = self._owner(oid)
        reason = self.rng.choice(CANCEL_REASONS)
        turns, (r1, r2) = self._run(
            [
                ("cancel_order", {"order_id": oid, "reason": reason}),
                ("list_orders", {"user_id": uid}),
            ]
        )
        return _Draft(
            f"I'm user {uid}. Cancel order {oid} ({_CANCEL_WORDS[reason]}), then list all my "
            "orders.",
            turns,
            [_fact(r1["refund_amount"]), r1["status"], str(r2["count"])],
        )

    def m_product_search(self) -> _Draft | None:
        pid = self.rng.choice(self.products)
        cat = self.state["products"][pid]["category"]
        turns, (r1, r2) = self._run(
            [
                ("get_product", {"product_id": pid}),
                ("search_products", {"category": cat, "sort": "rating_desc", "limit": 3}),
            ]
        )
        return _Draft(
            f"What does product {pid} cost? Also show me the three best-rated products in the "
            f"{cat} category.",
            turns,
            [_fact(r1["price"]), r2["results"][0]["name"]],
        )

    def m_refund_order(self) -> _Draft | None:
        oid = self._pick(self.refundable)
        if oid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        turns, (r1, r2) = self._run(
            [
                ("request_refund", {"order_id": oid, "reason": reason}),
                ("get_order", {"order_id": oid}),
            ]
        )
        return _Draft(
            f"Refund order {oid} ({_REFUND_WORDS[reason]}) and then show me the order's status.",
            turns,
            [r1["refund_id"], _fact(r1["amount"]), r2["status"]],
        )

    def m_remove_view(self) -> _Draft | None:
        uid = self._pick(self.cart_users)
        if uid is None:
            return None
        pid = self.rng.choice([x["product_id"] for x in self.state["carts"][uid]])
        turns, (_, r2) = self._run(
            [
                ("remove_from_cart", {"user_id": uid, "product_id": pid}),
                ("view_cart", {"user_id": uid}),
            ]
        )
        return _Draft(
            f"Remove product {pid} from the cart of user {uid}, then show me what's left.",
            turns,
            [_fact(r2["subtotal"]), str(r2["item_count"])],
        )

    def m_add_view_place(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        got = self._addable(uid)
        if got is None:
            return None
        pid, qty = got
        speed = self.rng.choice(SPEEDS)
        turns, (_, r2, r3) = self._run(
            [
                ("add_to_cart", {"user_id": uid, "product_id": pid, "quantity": qty}),
                ("view_cart", {"user_id": uid}),
                ("place_order", {"user_id": uid, "shipping_speed": speed}),
            ]
        )
        return _Draft(
            f"User {uid}: put {qty} x {pid} in my cart, show me the cart, then place the order "
            f"with {speed} shipping.",
            turns,
            [_fact(r2["subtotal"]), r3["order_id"], _fact(r3["total"])],
        )

    def m_refund_list(self) -> _Draft | None:
        rid = self._pick(self.refunds)
        if rid is None:
            return None
        uid = str(self.state["refunds"][rid]["user_id"])
        turns, (r1, r2) = self._run(
            [
                ("get_refund", {"refund_id": rid}),
                ("list_orders", {"user_id": uid, "status": "placed"}),
            ]
        )
        return _Draft(
            f"I'm {uid}. What's the status of refund {rid}, and which of my orders are placed "
            "but not shipped yet?",
            turns,
            [r1["status"], _fact(r1["amount"]), str(r2["count"])],
        )

    # ------------------------------------------------------------------- parallel

    def p_add_users(self) -> _Draft | None:
        uids = self.rng.sample(self.users, self.rng.randint(2, 3))
        calls, parts = [], []
        for uid in uids:
            got = self._addable(uid)
            if got is None:
                return None
            pid, qty = got
            calls.append(("add_to_cart", {"user_id": uid, "product_id": pid, "quantity": qty}))
            parts.append(f"{qty} of {pid} to {uid}'s cart")
        turns, results = self._run_turn(calls)
        return _Draft(
            "At the same time, add " + "; ".join(parts) + ". Report each cart's subtotal.",
            turns,
            [_fact(r["subtotal"]) for r in results],
        )

    def p_products(self) -> _Draft | None:
        pids = sorted(self.rng.sample(self.products, self.rng.randint(2, 4)), key=_num)
        turns, results = self._run_turn([("get_product", {"product_id": p}) for p in pids])
        return _Draft(
            f"Compare the prices of products {', '.join(pids[:-1])} and {pids[-1]}.",
            turns,
            [_fact(r["price"]) for r in results[:3]],
        )

    def p_cancel_track(self) -> _Draft | None:
        oid = self._pick(self.by_status["placed"])
        other = self._pick([o for o in self.by_status["shipped"] if o != oid])
        if oid is None or other is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        turns, (r1, r2) = self._run_turn(
            [
                ("cancel_order", {"order_id": oid, "reason": reason}),
                ("track_shipment", {"order_id": other}),
            ]
        )
        return _Draft(
            f"Cancel order {oid} ({_CANCEL_WORDS[reason]}) and, meanwhile, tell me where order "
            f"{other} is.",
            turns,
            [_fact(r1["refund_amount"]), r2["last_location"], r2["estimated_delivery"]],
        )

    def p_tracks(self) -> _Draft | None:
        pool = self.by_status["shipped"] + self.by_status["placed"]
        if len(pool) < 2:
            return None
        oids = sorted(self.rng.sample(pool, min(len(pool), self.rng.randint(2, 3))), key=_num)
        turns, results = self._run_turn([("track_shipment", {"order_id": o}) for o in oids])
        return _Draft(
            f"When will orders {', '.join(oids[:-1])} and {oids[-1]} arrive?",
            turns,
            [r["estimated_delivery"] for r in results],
        )

    def p_refund_mix(self) -> _Draft | None:
        oid = self._pick(self.refundable)
        if oid is None:
            return None
        uid = self._cart_user()
        pid = self.rng.choice(self.products)
        reason = self.rng.choice(REFUND_REASONS)
        turns, (r1, r2, r3) = self._run_turn(
            [
                ("request_refund", {"order_id": oid, "reason": reason}),
                ("view_cart", {"user_id": uid}),
                ("get_product", {"product_id": pid}),
            ]
        )
        return _Draft(
            f"Three things: refund order {oid} because {_REFUND_WORDS[reason]}; show the cart "
            f"of user {uid}; and tell me the price of product {pid}.",
            turns,
            [r1["refund_id"], _fact(r2["subtotal"]), _fact(r3["price"])],
        )

    def p_mix(self) -> _Draft | None:
        uid = self._cart_user()
        other = self.rng.choice([u for u in self.users if u != uid])
        oid = self.rng.choice(sorted(self.state["orders"], key=_num))
        turns, (r1, r2, r3) = self._run_turn(
            [
                ("view_cart", {"user_id": uid}),
                ("get_order", {"order_id": oid}),
                ("get_shipping_options", {"user_id": other, "speed": "express"}),
            ]
        )
        return _Draft(
            f"Show the cart of user {uid}, the status of order {oid}, and the express "
            f"shipping cost to user {other}.",
            turns,
            [_fact(r1["subtotal"]), r2["status"], _fact(r3["options"][0]["cost"])],
        )

    def p_remove_add(self) -> _Draft | None:
        uid = self._pick(self.cart_users)
        if uid is None:
            return None
        other = self.rng.choice([u for u in self.users if u != uid])
        pid = self.rng.choice([x["product_id"] for x in self.state["carts"][uid]])
        got = self._addable(other)
        if got is None:
            return None
        new, qty = got
        turns, (r1, r2) = self._run_turn(
            [
                ("remove_from_cart", {"user_id": uid, "product_id": pid}),
                ("add_to_cart", {"user_id": other, "product_id": new, "quantity": qty}),
            ]
        )
        return _Draft(
            f"Remove product {pid} from {uid}'s cart, and add {qty} of product {new} to "
            f"{other}'s cart. What are the two subtotals afterwards?",
            turns,
            [_fact(r1["subtotal"]), _fact(r2["subtotal"])],
        )

    def p_orders(self) -> _Draft | None:
        everything = sorted(self.state["orders"], key=_num)
        oids = sorted(self.rng.sample(everything, self.rng.randint(2, 3)), key=_num)
        turns, results = self._run_turn([("get_order", {"order_id": o}) for o in oids])
        return _Draft(
            f"What are the totals of orders {', '.join(oids[:-1])} and {oids[-1]}?",
            turns,
            [_fact(r["total"]) for r in results],
        )

    def p_list_refund(self) -> _Draft | None:
        rid = self._pick(self.refunds)
        if rid is None:
            return None
        uid = self.rng.choice(self.users)
        status = self.rng.choice(("delivered", "shipped", "placed"))
        turns, (r1, r2) = self._run_turn(
            [
                ("list_orders", {"user_id": uid, "status": status}),
                ("get_refund", {"refund_id": rid}),
            ]
        )
        return _Draft(
            f"How many {status} orders does user {uid} have? Also, how much is refund {rid}?",
            turns,
            [str(r1["count"]), _fact(r2["amount"])],
        )

    # ------------------------------------------------------------------- dependent

    def _deliver_user(self) -> str | None:
        """A user whose latest delivered order can still be refunded."""
        fits = []
        for uid in self.users:
            rows = self.dom.call(self.state, "list_orders", {"user_id": uid, "status": "delivered"})
            if rows["orders"] and rows["orders"][0]["order_id"] in self.refundable:
                fits.append(uid)
        return self._pick(fits)

    def _status_user(self, status: str) -> str | None:
        return self._pick(sorted({self._owner(o) for o in self.by_status[status]}, key=_num))

    def d_search_add(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        nouns = sorted(
            {
                p["name"].split()[-1].lower()
                for p in self.state["products"].values()
                if p["stock"]
                - sum(
                    x["quantity"]
                    for x in self.state["carts"][uid]
                    if x["product_id"] == p["product_id"]
                )
                >= 1
            }
        )
        noun = self._pick(nouns)
        if noun is None:
            return None
        st = copy.deepcopy(self.state)
        a1 = {"query": noun, "sort": "rating_desc", "in_stock_only": True, "limit": 1}
        r1 = self.dom.call(st, "search_products", a1)
        pid = r1["results"][0]["product_id"]
        if self._room(st, uid, pid) < 1:
            return None
        qty = self.rng.randint(1, self._room(st, uid, pid))
        a2 = {"user_id": uid, "product_id": pid, "quantity": qty}
        r2 = self.dom.call(st, "add_to_cart", a2)
        return _Draft(
            f"I'm user {uid}. Find the best-rated {noun} you have in stock and add {qty} of it "
            "to my cart.",
            [[Call("search_products", a1)], [Call("add_to_cart", a2)]],
            [r1["results"][0]["name"], _fact(r2["subtotal"])],
        )

    def d_cheapest_details(self) -> _Draft | None:
        cat = self.rng.choice(CATEGORIES)
        st = copy.deepcopy(self.state)
        a1 = {"category": cat, "sort": "price_asc", "limit": 1}
        r1 = self.dom.call(st, "search_products", a1)
        if not r1["results"]:
            return None
        a2 = {"product_id": r1["results"][0]["product_id"]}
        r2 = self.dom.call(st, "get_product", a2)
        return _Draft(
            f"What is the cheapest item in the {cat} category? How many are left in stock?",
            [[Call("search_products", a1)], [Call("get_product", a2)]],
            [r2["name"], _fact(r2["price"]), str(r2["stock"])],
        )

    def _list_then(
        self, uid: str, status: str, follow: list[tuple[str, dict[str, Any]]]
    ) -> tuple[list[list[Call]], list[Any]]:
        """list_orders(uid, status), then calls on its newest order (``"$o"`` stands for its
        id, ``"$r"`` for the refund id of an earlier result)."""
        st = copy.deepcopy(self.state)
        a1 = {"user_id": uid, "status": status}
        results = [self.dom.call(st, "list_orders", a1)]
        turns = [[Call("list_orders", a1)]]
        oid = results[0]["orders"][0]["order_id"]
        for name, args in follow:
            real = {
                k: oid if v == "$o" else results[-1]["refund_id"] if v == "$r" else v
                for k, v in args.items()
            }
            results.append(self.dom.call(st, name, real))
            turns.append([Call(name, real)])
        return turns, results

    def d_list_cancel(self) -> _Draft | None:
        uid = self._status_user("placed")
        if uid is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        turns, (_, r) = self._list_then(
            uid, "placed", [("cancel_order", {"order_id": "$o", "reason": reason})]
        )
        return _Draft(
            f"User {uid} here: cancel my most recent order that hasn't shipped yet, "
            f"{_CANCEL_WORDS[reason]}.",
            turns,
            [r["order_id"], _fact(r["refund_amount"])],
        )

    def d_list_track(self) -> _Draft | None:
        uid = self._status_user("shipped")
        if uid is None:
            return None
        turns, (_, r) = self._list_then(uid, "shipped", [("track_shipment", {"order_id": "$o"})])
        return _Draft(
            f"I'm {uid}. Where is my most recent order that has shipped, and when will it arrive?",
            turns,
            [r["carrier"], r["last_location"], r["estimated_delivery"]],
        )

    def d_list_refund(self) -> _Draft | None:
        uid = self._deliver_user()
        if uid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        turns, (_, r) = self._list_then(
            uid, "delivered", [("request_refund", {"order_id": "$o", "reason": reason})]
        )
        return _Draft(
            f"I'm user {uid}. I'd like a refund for my latest delivered order: "
            f"{_REFUND_WORDS[reason]}.",
            turns,
            [r["refund_id"], _fact(r["amount"])],
        )

    def d_refund_status(self) -> _Draft | None:
        oid = self._pick(self.refundable)
        if oid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        st = copy.deepcopy(self.state)
        a1 = {"order_id": oid, "reason": reason}
        r1 = self.dom.call(st, "request_refund", a1)
        a2 = {"refund_id": r1["refund_id"]}
        r2 = self.dom.call(st, "get_refund", a2)
        return _Draft(
            f"Please refund order {oid} ({_REFUND_WORDS[reason]}) and then look up the refund to "
            "tell me when the money will be credited.",
            [[Call("request_refund", a1)], [Call("get_refund", a2)]],
            [r2["refund_id"], r2["expected_credit_date"]],
        )

    def d_place_track(self) -> _Draft | None:
        uid = self._pick(self.cart_users)
        if uid is None:
            return None
        speed = self.rng.choice(SPEEDS)
        st = copy.deepcopy(self.state)
        a1 = {"user_id": uid, "shipping_speed": speed}
        r1 = self.dom.call(st, "place_order", a1)
        a2 = {"order_id": r1["order_id"]}
        r2 = self.dom.call(st, "track_shipment", a2)
        return _Draft(
            f"I'm {uid}. Check out my cart with {speed} shipping, then give me "
            "the tracking number of the new order.",
            [[Call("place_order", a1)], [Call("track_shipment", a2)]],
            [r1["order_id"], r2["tracking_number"], _fact(r1["total"])],
        )

    def d_search_detail_add(self) -> _Draft | None:
        cat = self.rng.choice(CATEGORIES)
        uid = self.rng.choice(self.users)
        st = copy.deepcopy(self.state)
        a1 = {"category": cat, "sort": "price_desc", "in_stock_only": True, "limit": 1}
        r1 = self.dom.call(st, "search_products", a1)
        if not r1["results"]:
            return None
        pid = r1["results"][0]["product_id"]
        a2 = {"product_id": pid}
        r2 = self.dom.call(st, "get_product", a2)
        if self._room(st, uid, pid) < 1:
            return None
        a3 = {"user_id": uid, "product_id": pid, "quantity": 1}
        r3 = self.dom.call(st, "add_to_cart", a3)
        return _Draft(
            f"Find the most expensive in-stock {cat} product, check its rating, and add one to "
            f"the cart of user {uid}.",
            [[Call("search_products", a1)], [Call("get_product", a2)], [Call("add_to_cart", a3)]],
            [r2["name"], _fact(r2["rating"]), _fact(r3["subtotal"])],
        )

    def d_list_get_cancel(self) -> _Draft | None:
        uid = self._status_user("placed")
        if uid is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        turns, (_, r2, r3) = self._list_then(
            uid,
            "placed",
            [
                ("get_order", {"order_id": "$o"}),
                ("cancel_order", {"order_id": "$o", "reason": reason}),
            ],
        )
        return _Draft(
            f"I'm {uid}. Look up what's in my newest unshipped order, then cancel it: "
            f"{_CANCEL_WORDS[reason]}.",
            turns,
            [r2["order_id"], r2["items"][0]["name"], _fact(r3["refund_amount"])],
        )

    def d_list_refund_status(self) -> _Draft | None:
        uid = self._deliver_user()
        if uid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        turns, (_, r2, r3) = self._list_then(
            uid,
            "delivered",
            [
                ("request_refund", {"order_id": "$o", "reason": reason}),
                ("get_refund", {"refund_id": "$r"}),
            ],
        )
        return _Draft(
            f"User {uid}: refund my most recent delivered order ({_REFUND_WORDS[reason]}) and "
            "then check that refund's status.",
            turns,
            [r2["refund_id"], r3["status"], r3["expected_credit_date"]],
        )

    # ------------------------------------------------------------------- irrelevance

    def _none(self, request: str) -> _Draft:
        return _Draft(request, [], [])

    def i_poem(self) -> _Draft | None:
        return self._none(f"Write me a four-line poem about {self.rng.choice(_TOPICS)}.")

    def i_weather(self) -> _Draft | None:
        day = self.rng.choice(("tomorrow", "this weekend", "on Friday"))
        return self._none(f"What will the weather be like in {self.rng.choice(_PLACES)} {day}?")

    def i_maths(self) -> _Draft | None:
        a, b = self.rng.randint(12, 999), self.rng.randint(12, 999)
        return self._none(f"What is {a} multiplied by {b}?")

    def i_translate(self) -> _Draft | None:
        phrase, lang = self.rng.choice(_PHRASES), self.rng.choice(_LANGS)
        return self._none(f"How do you say '{phrase}' in {lang}?")

    def i_recipe(self) -> _Draft | None:
        return self._none(f"Can you give me a recipe for {self.rng.choice(_DISHES)}?")

    def i_distance(self) -> _Draft | None:
        a, b = self.rng.sample(_PLACES, 2)
        return self._none(f"How far is it from {a} to {b} by plane, in kilometres?")

    def i_explain(self) -> _Draft | None:
        level = self.rng.choice(("a child", "a high-school student", "an expert"))
        return self._none(f"Explain {self.rng.choice(_FIELDS)} to {level} in a paragraph.")

    # ------------------------------------------------------------------- clarification

    def _greet(self) -> str:
        return self.rng.choice(("", "Hi! ", "Hello! ", "Hi there. ", "Good morning. "))

    def c_track(self) -> _Draft | None:
        oid = self._pick(self.by_status["shipped"] + self.by_status["placed"])
        if oid is None:
            return None
        turns, (r,) = self._run([("track_shipment", {"order_id": oid})])
        return _Draft(
            self._greet() + "Can you tell me where my package is and when it will be delivered?",
            turns,
            [r["status"], r["estimated_delivery"]],
            reply=f"It's order {oid}.",
            hidden={"order_id": oid},
        )

    def c_cancel(self) -> _Draft | None:
        oid = self._pick(self.by_status["placed"])
        if oid is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        turns, (r,) = self._run([("cancel_order", {"order_id": oid, "reason": reason})])
        return _Draft(
            self._greet() + f"Please cancel my order, {_CANCEL_WORDS[reason]}.",
            turns,
            [r["status"], _fact(r["refund_amount"])],
            reply=f"The order number is {oid}.",
            hidden={"order_id": oid},
        )

    def c_add(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        got = self._addable(uid)
        if got is None:
            return None
        pid, qty = got
        turns, (r,) = self._run(
            [("add_to_cart", {"user_id": uid, "product_id": pid, "quantity": qty})]
        )
        return _Draft(
            self._greet() + f"Please add {qty} of product {pid} to my cart.",
            turns,
            [_fact(r["subtotal"])],
            reply=f"My user id is {uid}.",
            hidden={"user_id": uid},
        )

    def c_cart(self) -> _Draft | None:
        uid = self._cart_user()
        turns, (r,) = self._run([("view_cart", {"user_id": uid})])
        return _Draft(
            self._greet() + "What's in my shopping cart right now, and what does it add up to?",
            turns,
            [_fact(r["subtotal"])],
            reply=f"I'm user {uid}.",
            hidden={"user_id": uid},
        )

    def c_place(self) -> _Draft | None:
        uid = self._pick(self.cart_users)
        if uid is None:
            return None
        speed = self.rng.choice(SPEEDS)
        turns, (r,) = self._run([("place_order", {"user_id": uid, "shipping_speed": speed})])
        return _Draft(
            self._greet() + f"I'm user {uid}. Please check out everything in my cart.",
            turns,
            [r["order_id"], _fact(r["total"])],
            reply=f"Use {speed} shipping, please.",
            hidden={"shipping_speed": speed},
        )

    def c_product(self) -> _Draft | None:
        pid = self.rng.choice(self.products)
        turns, (r,) = self._run([("get_product", {"product_id": pid})])
        return _Draft(
            self._greet() + "Is that product still in stock, and what rating does it have?",
            turns,
            [str(r["stock"]), _fact(r["rating"])],
            reply=f"I mean product {pid}.",
            hidden={"product_id": pid},
        )

    def c_refund(self) -> _Draft | None:
        oid = self._pick(self.refundable)
        if oid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        turns, (r,) = self._run([("request_refund", {"order_id": oid, "reason": reason})])
        return _Draft(
            self._greet() + f"I want my money back for an order: {_REFUND_WORDS[reason]}.",
            turns,
            [r["refund_id"], _fact(r["amount"])],
            reply=f"It was order {oid}.",
            hidden={"order_id": oid},
        )

    def c_list(self) -> _Draft | None:
        uid = self.rng.choice(self.users)
        turns, (r,) = self._run([("list_orders", {"user_id": uid})])
        return _Draft(
            self._greet() + "Could you list all the orders I've placed?",
            turns,
            [row["order_id"] for row in r["orders"][:3]],
            reply=f"My customer id is {uid}.",
            hidden={"user_id": uid},
        )

    def c_order(self) -> _Draft | None:
        oid = self.rng.choice(sorted(self.state["orders"], key=_num))
        turns, (r,) = self._run([("get_order", {"order_id": oid})])
        return _Draft(
            self._greet() + "What's the current status of my order, and how much did it cost?",
            turns,
            [r["status"], _fact(r["total"])],
            reply=f"Order {oid}.",
            hidden={"order_id": oid},
        )
