"""The travel domain: flights, hotels, bookings for saved travellers and payments.

Payments are refunded on cancellation. Every date lies in March 2027, so the backend is
deterministic.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentgym.envs.tools.backend import Domain, Task, Tool
from agentgym.envs.tools.domains.travel import backend, tasks
from agentgym.envs.tools.domains.travel.backend import calls_conflict
from agentgym.envs.tools.domains.travel.tools import TOOLS

__all__ = ["TravelDomain", "calls_conflict"]


class TravelDomain(Domain):
    """Flights, hotels, bookings, payments and saved travellers over March 2027."""

    name: ClassVar[str] = "travel"
    description: ClassVar[str] = (
        "Travel booking: search flights and hotels, book them for saved travellers, pay, "
        "cancel and get refunds."
    )

    def tools(self) -> list[Tool]:
        """The twelve travel tools, in a fixed order."""
        return list(TOOLS)

    def build(self, seed: int) -> dict[str, Any]:
        """Ten airports, about 40 flights, 25 hotels, 8 travellers and 18 earlier bookings."""
        return backend.build(seed)

    def call(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run one validated call; results never share objects with ``state``."""
        return backend.call(state, name, arguments)

    def resources(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
        """Paths under flights/, hotels/, travellers/, bookings/ and payments/."""
        return backend.resources(name, arguments)

    def changes(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[str]:
        """Finer than :meth:`resources`: the entities a write changes, from ``state``."""
        return backend.changes(state, name, arguments)

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks per type, gold calls run on copies of ``state``.

        Templates are cycled over entities drawn with a seeded rng; drafts that repeat an
        earlier (request, reply) or break their type's rules are redrawn.
        """
        return tasks.generate(self, state, seed, per_type)
