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

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks of each type, gold calls run on a copy of ``state``.

        Templates are taken in turn and entities drawn with a seeded rng.
        """
        return tasks.generate(self, state, seed, per_type)
