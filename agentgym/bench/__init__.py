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
}


def run_bench(part: str, console: Console, quick: bool = False) -> dict[str, Any]:
    """Run one part's benchmark and print its tables (``quick``: small sizes, a smoke run)."""
    if part not in PARTS:
        raise BadInput(f"unknown bench part {part!r}: available: {', '.join(PARTS)}")
    module = importlib.import_module(PARTS[part])
    doc: dict[str, Any] = module.run(console, quick=quick)
    return doc
