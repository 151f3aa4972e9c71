"""The search family: multi-hop question answering over an encyclopedia.

The encyclopedia is a seeded synthetic one (menu and free-form action spaces) or official
HotpotQA / 2WikiMultiHopQA data.
"""

from __future__ import annotations

import rank_bm25  # noqa: F401  (the family's optional dependency: skip registration without it)

from agentgym.registry import register as _register

_MENU = "agentgym.envs.search.menu_env:SearchMenuEnv"
_FREE = "agentgym.envs.search.free_env:SearchFreeEnv"
_SIZES = {"Small": "50", "Medium": "5,000", "Large": "100,000"}


def register() -> None:
    """Register the family's ids (idempotent)."""
    for preset, pages in _SIZES.items():
        kwargs = {"preset": preset.lower()}
        _register(
            f"agentgym/Search-Menu-{preset}-v0",
            _MENU,
            family="search",
            description=f"Multi-hop QA, menu actions over a {pages}-page encyclopedia",
            kwargs=kwargs,
        )
        _register(
            f"agentgym/Search-Free-{preset}-v0",
            _FREE,
            family="search",
            description=f"Multi-hop QA, free-form <search>/<answer> over {pages} pages",
            kwargs=kwargs,
        )
    # v1: Small's world with every question it yields (1,505 against v0's 300), so that the
    # train split teaches reading rather than 210 memorisable questions and the test split
    # (300 questions) can tell small differences apart. v0 stays for comparability.
    kwargs = {"preset": "small-full"}
    _register(
        "agentgym/Search-Menu-Small-v1",
        _MENU,
        family="search",
        description="Multi-hop QA, menu actions over 50 pages, all 1,505 questions",
        kwargs=kwargs,
    )
    _register(
        "agentgym/Search-Free-Small-v1",
        _FREE,
        family="search",
        description="Multi-hop QA, free-form <search>/<answer> over 50 pages, all questions",
        kwargs=kwargs,
    )
    for name, fmt in (("HotpotQA", "hotpotqa"), ("2Wiki", "2wiki")):
        _register(
            f"agentgym/Search-Free-{name}-Official-v0",
            _FREE,
            family="search",
            description=f"Official {name} questions from path=DIR, free-form search",
            kwargs={"fmt": fmt},
        )
