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
    "tools": "agentgym.bench.tools",
    "text": "agentgym.bench.text",
    "harness": "agentgym.bench.harness",
    "leaderboard": "agentgym.bench.leaderboard",
    "trainer": "agentgym.bench.trainer",
    "learning": "agentgym.bench.learning",
}


def run_bench(
    part: str,
    console: Console,
    quick: bool = False,
    variants: str | None = None,
    rl_steps: int | None = None,
    env: str | None = None,
) -> dict[str, Any]:
    """Run one part's benchmark and print its tables (``quick``: small sizes, a smoke run;
    ``variants``: comma-separated credit variants and ``rl_steps``: each variant's RL steps,
    ``env``: the env whose recipe it trains, all three for the learning part only)."""
    if part not in PARTS:
        raise BadInput(f"unknown bench part {part!r}: available: {', '.join(PARTS)}")
    options: dict[str, Any] = {}
    if variants is not None:
        options["variants"] = tuple(v.strip() for v in variants.split(",") if v.strip())
    if rl_steps is not None:
        if rl_steps < 1:
            raise BadInput(f"--rl-steps must be at least 1, got {rl_steps}")
        options["rl_steps"] = rl_steps
    if env is not None:
        options["env"] = env
    if options and part != "learning":
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in options)
        raise BadInput(f"{flags} applies to bench learning only, not {part!r}")
    module = importlib.import_module(PARTS[part])
    doc: dict[str, Any] = module.run(console, quick=quick, **options)
    return doc
