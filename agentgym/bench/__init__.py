"""``agentgym bench PART``: speed measured against a peer in the same run.

Each part returns ``{part, rows: [...], ratios: {...}}`` and prints a table. Speed targets
live here, never in tests.
"""

from __future__ import annotations

import importlib
from typing import Any

from rich.console import Console

from agentgym.core.errors import BadInput

PARTS = {
    "search": "agentgym.bench.search",
    "harness": "agentgym.bench.harness",
    "leaderboard": "agentgym.bench.leaderboard",
    "trainer": "agentgym.bench.trainer",
    "learning": "agentgym.bench.learning",
}


def run_bench(
    part: str, console: Console, quick: bool = False, variants: str | None = None
) -> dict[str, Any]:
    """Run one part's benchmark and print its tables (``quick``: small sizes, a smoke run;
    ``variants``: comma-separated credit variants, for the learning part)."""
    if part not in PARTS:
        raise BadInput(f"unknown bench part {part!r}: available: {', '.join(PARTS)}")
    module = importlib.import_module(PARTS[part])
    if variants is None:
        doc: dict[str, Any] = module.run(console, quick=quick)
    elif part == "learning":
        names = tuple(v.strip() for v in variants.split(",") if v.strip())
        doc = module.run(console, quick=quick, variants=names)
    else:
        raise BadInput(f"--variants applies to bench learning only, not {part!r}")
    return doc
