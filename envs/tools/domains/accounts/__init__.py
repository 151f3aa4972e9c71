"""The customer-accounts domain: profiles, addresses, loyalty points and support tickets.

Contact details, saved addresses, loyalty points with a reward catalogue and support tickets,
over a seeded backend of a few dozen customers.
"""

from __future__ import annotations

from typing import Any

from agentgym.envs.tools.backend import Domain, Task, Tool
from agentgym.envs.tools.domains.accounts import backend, tasks
from agentgym.envs.tools.domains.accounts.tools import TOOLS

__all__ = ["AccountsDomain"]


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
        return list(TOOLS)

    def build(self, seed: int) -> dict[str, Any]:
        """24 customers (1-4 addresses and 3-8 points entries each) and 36 tickets."""
        return backend.build(seed)

    def call(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> Any:
        """Run one validated call; results are fresh objects, never views of ``state``."""
        return backend.call(state, name, arguments)

    def resources(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(read, written) paths of a call; see the class docstring for the tree."""
        return backend.resources(name, arguments)

    def changes(self, state: dict[str, Any], name: str, arguments: dict[str, Any]) -> list[str]:
        """Finer than :meth:`resources`: a new redemption or ticket is one entity.

        Its id is the counter's next, read from ``state`` before the call.
        """
        if name == "redeem_reward":
            customer = f"customers/{arguments['customer_id']}"
            return [customer, f"redemptions/r{state['next_redemption']}"]
        if name == "open_ticket":
            return [f"tickets/t{state['next_ticket']}"]
        return backend.resources(name, arguments)[1]

    def tasks(self, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
        """``per_type`` tasks of each type, gold calls replayed on a copy of ``state``."""
        return tasks.generate(self, state, seed, per_type)
