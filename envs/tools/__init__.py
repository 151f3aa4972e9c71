"""The tool-call family: schema-guided mock APIs, and BFCL's tasks.

The mock APIs run over seeded stateful backends (e-commerce, customer accounts, travel), with
synchronous or asynchronous calls.
"""

from __future__ import annotations

import fastjsonschema  # noqa: F401  (the family's dependency: skip registration without it)

from agentgym.registry import register as _register

_DOMAINS = {
    "Ecommerce": ("EcommerceEnv", "catalogue search, carts, orders, refunds and shipping"),
    "Accounts": ("AccountsEnv", "profiles, addresses, loyalty points and support tickets"),
    "Travel": ("TravelEnv", "flights, hotels, bookings and payments"),
}

# (version, what the description adds, constructor arguments)
_VERSIONS: tuple[tuple[int, str, dict[str, bool]], ...] = (
    (0, "", {}),
    (1, "; invalid-action reasons without the grammar", {"grammar_in_errors": False}),
)


def register() -> None:
    """Register the family's ids (idempotent); the BFCL ids only with bfcl-eval installed."""
    for name, (cls, what) in _DOMAINS.items():
        entry = f"agentgym.envs.tools.env:{cls}"
        # v1: an invalid action's reason no longer repeats the grammar that ends every
        # observation. v0 keeps its text byte for byte (recorded transcripts replay on it).
        for version, note, extra in _VERSIONS:
            _register(
                f"agentgym/Tools-{name}-v{version}",
                entry,
                family="tools",
                description=f"Schema-guided mock APIs: {what}{note}",
                kwargs=dict(extra),
            )
            _register(
                f"agentgym/Tools-{name}-Async-v{version}",
                entry,
                family="tools",
                description=f"Schema-guided mock APIs with asynchronous calls: {what}{note}",
                kwargs={"async_calls": True, **extra},
            )
        # v2 (async only): futures run on across turns, an action waits only for the results
        # it uses; the v0 and v1 async ids keep gathering each turn's calls
        _register(
            f"agentgym/Tools-{name}-Async-v2",
            entry,
            family="tools",
            description=(
                f"Schema-guided mock APIs with asynchronous calls that overlap across turns: {what}"
            ),
            kwargs={"async_calls": True, "overlap": "cross", "grammar_in_errors": False},
        )
    # the three domains' v1 tasks behind one id, info["domain"] naming each task's domain
    _register(
        "agentgym/Tools-Mixed-v1",
        "agentgym.envs.tools.mixed:MixedToolsEnv",
        family="tools",
        description="Schema-guided mock APIs: the e-commerce, accounts and travel tasks together",
        kwargs={"grammar_in_errors": False},
    )
    from agentgym.envs.tools.bfcl import register_ids

    register_ids(_register)
