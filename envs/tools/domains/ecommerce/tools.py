"""The shop's vocabulary and its 13 tools: names, JSON schemas, descriptions and latencies."""

from __future__ import annotations

from typing import Any

from agentgym.envs.tools.backend import Tool
from agentgym.envs.tools.taskgen import array, enum, obj, string, typed

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


def _id(kind: str, prefix: str, what: str = "") -> dict[str, Any]:
    return typed(
        "string",
        pattern=f"^{prefix}[0-9]+$",
        description=what or f'The {kind} id, e.g. "{prefix}3".',
    )


def _bounded(json_type: str, low: int, high: int, what: str) -> dict[str, Any]:
    return typed(json_type, minimum=low, maximum=high, description=what)


_STR = typed("string")
_INT = typed("integer")
_NUM = typed("number")
_BOOL = typed("boolean")
_DATE = typed("string", format="date")
_NULL_DATE = typed(["string", "null"], format="date")
_LINE = obj({"product_id": _STR, "name": _STR, "unit_price": _NUM, "quantity": _INT})
_CART = obj({"user_id": _STR, "items": array(_LINE), "item_count": _INT, "subtotal": _NUM})
_SHIP = {
    "order_id": _STR,
    "carrier": _STR,
    "tracking_number": _STR,
    "status": enum(("label_created", "in_transit", "delivered", "cancelled", "returned")),
    "estimated_delivery": _DATE,
    "delivered_date": _NULL_DATE,
    "last_location": _STR,
}
_OPTION = obj(
    {"speed": _STR, "carrier": _STR, "cost": _NUM, "days": _INT, "estimated_delivery": _DATE}
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
_SUMMARY = obj(
    {
        "product_id": _STR,
        "name": _STR,
        "category": _STR,
        "price": _NUM,
        "rating": _NUM,
        "in_stock": _BOOL,
    }
)
_PRODUCT_VIEW = obj(
    {
        "product_id": _STR,
        "name": _STR,
        "category": _STR,
        "price": _NUM,
        "stock": _INT,
        "rating": _NUM,
        "review_count": _INT,
    }
)
_ORDER_ROW = obj({"order_id": _STR, "status": _STR, "placed_date": _DATE, "total": _NUM})
_ORDER_VIEW = obj(
    {
        "order_id": _STR,
        "user_id": _STR,
        "status": enum(ORDER_STATUSES),
        "placed_date": _DATE,
        "items": array(_LINE),
        "subtotal": _NUM,
        "shipping_cost": _NUM,
        "total": _NUM,
        "shipping_speed": _STR,
        "estimated_delivery": _DATE,
        "refund_id": typed(["string", "null"]),
        "cancel_reason": typed(["string", "null"]),
    },
    ["order_id", "user_id", "status", "placed_date", "items", "total", "refund_id"],
)
_SEARCH = obj(
    {
        "query": string(
            "Words that must all occur in the product name or category; omit to match everything."
        ),
        "category": enum(CATEGORIES, "Only products of this category."),
        "min_price": _bounded("number", 0, 10000, "Lowest price in USD (inclusive)."),
        "max_price": _bounded("number", 0, 10000, "Highest price in USD (inclusive)."),
        "sort": enum(SORTS, "Result order; relevance (most reviewed first) if omitted."),
        "in_stock_only": typed("boolean", description="Leave out products with no stock."),
        "limit": _bounded("integer", 1, 20, "Most results to return (default 10)."),
    },
    [],
)
_PLACED = obj(
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
)
_LIST_ORDERS = obj(
    {
        "user_id": _USER,
        "status": enum(ORDER_STATUSES, "Only orders in this status."),
        "placed_after": typed(
            "string",
            format="date",
            description="Only orders placed on or after this date (YYYY-MM-DD).",
        ),
    },
    ["user_id"],
)

TOOLS = (
    Tool(
        "search_products",
        "Search the catalogue by words in the product name, category and price bounds.",
        _SEARCH,
        obj({"results": array(_SUMMARY), "count": _INT}),
        latency_ms=180.0,
    ),
    Tool(
        "get_product",
        "Details of one product: price, stock left, rating and review count.",
        obj({"product_id": _PRODUCT}),
        _PRODUCT_VIEW,
        latency_ms=60.0,
    ),
    Tool(
        "add_to_cart",
        "Add a quantity of a product to a user's cart (the cart may not exceed the stock).",
        obj(
            {
                "user_id": _USER,
                "product_id": _PRODUCT,
                "quantity": _bounded("integer", 1, 10, "How many units to add."),
            }
        ),
        obj({"user_id": _STR, "product_id": _STR, "quantity_in_cart": _INT, "subtotal": _NUM}),
        writes=True,
        latency_ms=200.0,
    ),
    Tool(
        "remove_from_cart",
        "Remove a product (all its units) from a user's cart.",
        obj({"user_id": _USER, "product_id": _PRODUCT}),
        obj({"user_id": _STR, "removed_product_id": _STR, "item_count": _INT, "subtotal": _NUM}),
        writes=True,
        latency_ms=180.0,
    ),
    Tool(
        "view_cart",
        "The items in a user's cart with their quantities and the subtotal.",
        obj({"user_id": _USER}),
        _CART,
        latency_ms=80.0,
    ),
    Tool(
        "place_order",
        "Order everything in a user's cart with a shipping speed; empties the cart.",
        obj({"user_id": _USER, "shipping_speed": enum(SPEEDS, "How fast to ship.")}),
        _PLACED,
        writes=True,
        latency_ms=350.0,
    ),
    Tool(
        "get_order",
        "One order: status, items, totals, dates and any refund.",
        obj({"order_id": _ORDER}),
        _ORDER_VIEW,
        latency_ms=70.0,
    ),
    Tool(
        "list_orders",
        "A user's orders, newest first, optionally filtered by status and date.",
        _LIST_ORDERS,
        obj({"user_id": _STR, "orders": array(_ORDER_ROW), "count": _INT}),
        latency_ms=120.0,
    ),
    Tool(
        "cancel_order",
        "Cancel an order that has not shipped yet; its stock is restored and it is refunded.",
        obj({"order_id": _ORDER, "reason": enum(CANCEL_REASONS, "Why the order is cancelled.")}),
        obj({"order_id": _STR, "status": _STR, "refund_amount": _NUM}),
        writes=True,
        latency_ms=300.0,
    ),
    Tool(
        "request_refund",
        f"Refund a delivered order within {RETURN_WINDOW_DAYS} days of delivery; creates a refund.",
        obj({"order_id": _ORDER, "reason": enum(REFUND_REASONS, "Why the items are returned.")}),
        obj(_REFUND),
        writes=True,
        latency_ms=320.0,
    ),
    Tool(
        "get_refund",
        "The status, amount and expected credit date of a refund.",
        obj({"refund_id": _id("refund", "r")}),
        obj(_REFUND),
        latency_ms=70.0,
    ),
    Tool(
        "get_shipping_options",
        "Shipping speeds to a user's address with carrier, cost and delivery date.",
        obj({"user_id": _USER, "speed": enum(SPEEDS, "Only this speed.")}, ["user_id"]),
        obj({"user_id": _STR, "city": _STR, "options": array(_OPTION)}),
        latency_ms=110.0,
    ),
    Tool(
        "track_shipment",
        "Where an order's parcel is: carrier, tracking number, status and delivery date.",
        obj({"order_id": _ORDER}),
        obj(_SHIP),
        latency_ms=150.0,
    ),
)
"""The shop's tools, in the order the agent sees them."""

TOOL_NAMES = frozenset(tool.name for tool in TOOLS)
