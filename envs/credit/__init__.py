"""The credit family: small text envs whose true per-action credit is known exactly.

Key-to-door (a choice whose effect shows many turns later), a delayed chain (one hidden
decision counts) and a haystack menu (few of many actions matter). Each exposes the exact
values of the uniform and the optimal policy in privileged ``info["credit_values"]``, so
credit-assignment methods can be checked against an exact answer, and each is learnable by
a tiny policy on a CPU.
"""

from __future__ import annotations

from agentgym.registry import register as _register

_IDS: tuple[tuple[str, str, str, dict[str, int]], ...] = (
    (
        "KeyDoor",
        "key_door:KeyDoorEnv",
        "Take the key matching a door opened after 6 distractor turns",
        {"horizon": 6},
    ),
    (
        "KeyDoor-Long",
        "key_door:KeyDoorEnv",
        "Take the key matching a door opened after 24 distractor turns",
        {"horizon": 24},
    ),
    ("Chain", "chain:ChainEnv", "5 menu decisions, one hidden position counts", {}),
    ("Chain-Free", "chain:ChainFreeEnv", "5 typed decisions, one hidden position counts", {}),
    ("Haystack", "haystack:HaystackEnv", "10 items, 2 helpful and 2 harmful, over 6 turns", {}),
)


def register() -> None:
    """Register the family's ids (idempotent)."""
    for name, entry, description, kwargs in _IDS:
        _register(
            f"agentgym/Credit-{name}-v0",
            f"agentgym.envs.credit.{entry}",
            family="credit",
            description=description,
            kwargs=kwargs,
        )
