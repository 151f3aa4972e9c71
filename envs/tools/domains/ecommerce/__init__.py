"""The e-commerce domain: an online shop over a small seeded backend.

A product catalogue, per-user carts, orders, shipping and refunds.
"""

from __future__ import annotations

from typing import Any

from agentgym.envs.tools.backend import Domain, Task, Tool
from agentgym.envs.tools.domains.ecommerce import backend, tasks
from agentgym.envs.tools.domains.ecommerce.tools import TOOLS

__all__ = ["EcommerceDomain"]


class EcommerceDomain(Domain):
    """An online shop: catalogue search, carts, orders, shipping, tracking and refunds."""

    name = "ecommerce"
    description = (
        "An online shop: search products, manage carts, place, track, cancel and refund orders."
    )

    def tools(self) -> list[Tool]:
        """The 13 shop tools, in a fixed order."""
        return list(TOOLS)

    def build(self, seed: int) -> dict[str, Any]:
        """Products, users, carts, orders (in every status) and refunds, seeded by ``seed``."""
        return backend.build(seed)

    def call(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run one validated call; writes change ``state`` in place."""
        return backend.call(state, name, arguments)

    def resources(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
        """Read and written paths; counters and unknown products write whole collections."""
        return backend.resources(name, arguments)

    def changes(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[str]:
        """Finer than :meth:`resources`, from ``state`` before the call.

        A new order or refund is one entity under the counter's next id; placing or cancelling
        an order changes the stock of the products in its lines only.
        """
        if name == "place_order":
            cart = f"carts/{arguments['user_id']}"
            lines = state["carts"].get(arguments["user_id"]) or []
            stock = [f"products/{line['product_id']}" for line in lines]
            return [cart, f"orders/o{state['next_order']}", *stock]
        if name == "cancel_order":
            order = state["orders"].get(arguments["order_id"])
            items = order["items"] if order is not None else []
            return [f"orders/{arguments['order_id']}"] + [
                f"products/{line['product_id']}" for line in items
            ]
        if name == "request_refund":
            return [f"orders/{arguments['order_id']}", f"refunds/r{state['next_refund']}"]
        return backend.resources(name, arguments)[1]

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks of each type, gold calls run on a copy of ``state``.

        Templates are taken in turn and entities drawn with a seeded rng.
        """
        return tasks.generate(self, state, seed, per_type)
