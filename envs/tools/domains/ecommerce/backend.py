"""The shop's backend: seeded state, tool implementations and resource paths.

The state holds products, users, carts, orders and refunds.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
from collections.abc import Callable
from typing import Any

from agentgym.envs.tools.backend import entity, failed_precondition
from agentgym.envs.tools.backend import id_number as _num
from agentgym.envs.tools.domains.ecommerce.tools import (
    CANCEL_REASONS,
    CATEGORIES,
    N_PRODUCTS,
    N_USERS,
    ORDERS_PER_USER,
    REFUND_CREDIT_DAYS,
    REFUND_REASONS,
    RETURN_WINDOW_DAYS,
    SPEEDS,
    TODAY,
    TOOL_NAMES,
)

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
_ORDER_AGES = {
    "placed": (0, 1),
    "shipped": (2, 4),
    "recent": (8, 20),
    "old": (50, 90),
    "cancelled": (3, 40),
    "returned": (12, 25),
}
"""Days before TODAY a seeded order of each kind was placed (low, high)."""

# --------------------------------------------------------------------------- helpers


def add_days(date: str, days: int) -> str:
    """The ISO date ``days`` after ``date``."""
    return (dt.date.fromisoformat(date) + dt.timedelta(days=days)).isoformat()


def days_between(start: str, end: str) -> int:
    """Days from the ISO date ``start`` to ``end``."""
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
        "estimated_delivery": add_days(start, ship["days"] + zone - 1),
    }


def _tracking(speed: str, order_num: int) -> str:
    return f"{_SHIPPING[speed]['code']}{100000 + order_num * 7919 % 900000}"


def _get(state: dict[str, Any], kind: str, key: str) -> dict[str, Any]:
    return entity(state, kind + "s", kind, key)


def _line(product: dict[str, Any], quantity: int) -> dict[str, Any]:
    return {
        "product_id": product["product_id"],
        "name": product["name"],
        "unit_price": product["price"],
        "quantity": quantity,
    }


# --------------------------------------------------------------------------- state


def build(seed: int) -> dict[str, Any]:
    """Products, users, carts, orders (in every status) and refunds, seeded by ``seed``."""
    rng = random.Random(seed)
    products = _products(rng)
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
                lines.append(_line(p, rng.randint(1, min(3, p["stock"]))))
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
        _seed_order(state, rng, f"u{(n - 1) % N_USERS + 1}", kind)
    return state


def _products(rng: random.Random) -> dict[str, Any]:
    """The catalogue: N_PRODUCTS products with distinct names, categories in turn."""
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
    return products


def _seed_order(state: dict[str, Any], rng: random.Random, uid: str, kind: str) -> None:
    """Add one pre-existing order of ``kind``.

    A kind is a status, or "recent"/"old" for delivered orders inside/outside the return
    window.
    """
    placed = add_days(TODAY, -rng.randint(*_ORDER_AGES[kind]))
    speed = rng.choice(SPEEDS)
    lines = []
    for pid in sorted(rng.sample(sorted(state["products"], key=_num), rng.randint(1, 3)), key=_num):
        lines.append(_line(state["products"][pid], rng.randint(1, 3)))
    num = state["next_order"]
    state["next_order"] += 1
    oid = f"o{num}"
    opt = _option(state, state["users"][uid]["zone"], speed, placed)
    status = "delivered" if kind in ("recent", "old") else kind
    delivered = (
        add_days(placed, rng.randint(1, 3)) if kind in ("recent", "old", "returned") else None
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
        "shipping": _shipping(opt, _tracking(speed, num), ship_status, delivered, where),
    }
    if kind == "returned":
        when = add_days(str(delivered), 2)
        _new_refund(state, state["orders"][oid], rng.choice(REFUND_REASONS), when)


def _shipping(
    opt: dict[str, Any], tracking: str, status: str, delivered: str | None, where: str
) -> dict[str, Any]:
    """An order's parcel record."""
    return {
        "carrier": opt["carrier"],
        "tracking_number": tracking,
        "status": status,
        "estimated_delivery": opt["estimated_delivery"],
        "delivered_date": delivered,
        "last_location": where,
    }


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
        "expected_credit_date": add_days(when, REFUND_CREDIT_DAYS),
    }
    state["refunds"][rid] = refund
    order["status"] = "returned"
    order["refund_id"] = rid
    order["shipping"]["status"] = "returned"
    return refund


# --------------------------------------------------------------------------- calls


def call(state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
    """Run one validated call; writes change ``state`` in place.

    Args:
        state: the backend state.
        name: a tool name.
        arguments: the call's arguments, valid for the tool's schema.

    Returns:
        The call's JSON-able result (a fresh object, never a view of ``state``).
    """
    if name not in TOOL_NAMES:
        raise ValueError(f"unknown ecommerce tool {name!r}")
    return _HANDLERS[name](state, **arguments)


def _search_products(
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


def _get_product(state: dict[str, Any], product_id: str) -> dict[str, Any]:
    return dict(_get(state, "product", product_id))


def _add_to_cart(
    state: dict[str, Any], user_id: str, product_id: str, quantity: int
) -> dict[str, Any]:
    _get(state, "user", user_id)
    product = _get(state, "product", product_id)
    lines = state["carts"][user_id]
    line = next((x for x in lines if x["product_id"] == product_id), None)
    have = line["quantity"] if line else 0
    if have + quantity > product["stock"]:
        raise failed_precondition(
            f"only {product['stock']} of {product_id} in stock and {have} already in the "
            f"cart; add at most {max(product['stock'] - have, 0)}"
        )
    if line is None:
        line = _line(product, 0)
        lines.append(line)
        lines.sort(key=lambda x: _num(x["product_id"]))
    line["quantity"] += quantity
    return {
        "user_id": user_id,
        "product_id": product_id,
        "quantity_in_cart": line["quantity"],
        "subtotal": _subtotal(lines),
    }


def _remove_from_cart(state: dict[str, Any], user_id: str, product_id: str) -> dict[str, Any]:
    _get(state, "user", user_id)
    _get(state, "product", product_id)
    lines = state["carts"][user_id]
    kept = [x for x in lines if x["product_id"] != product_id]
    if len(kept) == len(lines):
        raise failed_precondition(
            f"{product_id} is not in {user_id}'s cart; view_cart lists what is there"
        )
    lines[:] = kept
    return {
        "user_id": user_id,
        "removed_product_id": product_id,
        "item_count": sum(x["quantity"] for x in lines),
        "subtotal": _subtotal(lines),
    }


def _view_cart(state: dict[str, Any], user_id: str) -> dict[str, Any]:
    _get(state, "user", user_id)
    lines = state["carts"][user_id]
    return {
        "user_id": user_id,
        "items": [dict(x) for x in lines],
        "item_count": sum(x["quantity"] for x in lines),
        "subtotal": _subtotal(lines),
    }


def _place_order(state: dict[str, Any], user_id: str, shipping_speed: str) -> dict[str, Any]:
    user = _get(state, "user", user_id)
    lines = state["carts"][user_id]
    if not lines:
        raise failed_precondition(f"{user_id}'s cart is empty; add_to_cart first")
    for line in lines:
        stock = state["products"][line["product_id"]]["stock"]
        if line["quantity"] > stock:
            raise failed_precondition(
                f"only {stock} of {line['product_id']} in stock; lower its quantity in the "
                "cart (remove_from_cart, then add_to_cart) and retry"
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
        "shipping": _shipping(
            opt, _tracking(shipping_speed, num), "label_created", None, "warehouse"
        ),
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


def _get_order(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    order = _get(state, "order", order_id)
    out = {k: v for k, v in order.items() if k != "shipping"}
    out["items"] = [dict(x) for x in order["items"]]
    out["estimated_delivery"] = order["shipping"]["estimated_delivery"]
    return out


def _list_orders(
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


def _cancel_order(state: dict[str, Any], order_id: str, reason: str) -> dict[str, Any]:
    order = _get(state, "order", order_id)
    if order["status"] != "placed":
        hint = {
            "shipped": "it has already shipped; once delivered, request_refund instead",
            "delivered": "it was delivered; use request_refund instead",
        }.get(order["status"], "nothing is left to cancel")
        raise failed_precondition(f"order {order_id} is {order['status']}: {hint}")
    for line in order["items"]:
        state["products"][line["product_id"]]["stock"] += line["quantity"]
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["shipping"]["status"] = "cancelled"
    return {"order_id": order_id, "status": "cancelled", "refund_amount": order["total"]}


def _request_refund(state: dict[str, Any], order_id: str, reason: str) -> dict[str, Any]:
    order = _get(state, "order", order_id)
    if order["refund_id"] is not None:
        raise failed_precondition(
            f"order {order_id} already has refund {order['refund_id']}; get_refund shows it"
        )
    if order["status"] != "delivered":
        raise failed_precondition(
            f"order {order_id} is {order['status']}: only delivered orders can be refunded"
            + ("; cancel_order it instead" if order["status"] == "placed" else "")
        )
    age = days_between(order["shipping"]["delivered_date"], state["today"])
    if age > state["return_window_days"]:
        raise failed_precondition(
            f"order {order_id} was delivered {age} days ago, past the "
            f"{state['return_window_days']}-day return window; it cannot be refunded"
        )
    return dict(_new_refund(state, order, reason, state["today"]))


def _get_refund(state: dict[str, Any], refund_id: str) -> dict[str, Any]:
    return dict(_get(state, "refund", refund_id))


def _get_shipping_options(
    state: dict[str, Any], user_id: str, speed: str | None = None
) -> dict[str, Any]:
    user = _get(state, "user", user_id)
    options = [
        _option(state, user["zone"], s, state["today"])
        for s in SPEEDS
        if speed is None or s == speed
    ]
    return {"user_id": user_id, "city": user["city"], "options": options}


def _track_shipment(state: dict[str, Any], order_id: str) -> dict[str, Any]:
    order = _get(state, "order", order_id)
    return {"order_id": order_id, **order["shipping"]}


_HANDLERS: dict[str, Callable[..., dict[str, Any]]] = {
    "search_products": _search_products,
    "get_product": _get_product,
    "add_to_cart": _add_to_cart,
    "remove_from_cart": _remove_from_cart,
    "view_cart": _view_cart,
    "place_order": _place_order,
    "get_order": _get_order,
    "list_orders": _list_orders,
    "cancel_order": _cancel_order,
    "request_refund": _request_refund,
    "get_refund": _get_refund,
    "get_shipping_options": _get_shipping_options,
    "track_shipment": _track_shipment,
}


def resources(name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Read and written paths of a call.

    Calls whose ids are allocated from a counter, or whose products are unknown up front,
    write the whole collection.
    """
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
