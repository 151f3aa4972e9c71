"""The search family: multi-hop question answering over a seeded synthetic encyclopedia."""

from __future__ import annotations

import rank_bm25  # noqa: F401  (the family's optional dependency: skip registration without it)

from agentgym.registry import register as _register

_MENU = "agentgym.envs.search.menu_env:SearchMenuEnv"


def register() -> None:
    """Register the family's ids (idempotent)."""
    _register(
        "agentgym/Search-Menu-Small-v0",
        _MENU,
        family="search",
        description="Multi-hop QA, menu actions over a 50-page encyclopedia (CPU-trainable)",
        kwargs={"preset": "small"},
    )
    _register(
        "agentgym/Search-Menu-Medium-v0",
        _MENU,
        family="search",
        description="Multi-hop QA, menu actions over a 5,000-page encyclopedia",
        kwargs={"preset": "medium"},
    )
