"""``agentgym bench PART``: speed measured against a peer in the same run.

Each part's code lives beside what it measures (an env family's ``bench`` module, the
trainer's under ``baselines``, the leaderboard's under ``leaderboard``); this package holds
only the table that names them by import string, the way the registry names env entry
points, so the bottom layer never imports the packages above it. An env family's part is
found by its folder (``envs/<family>/bench.py``); the others are listed in
:data:`OTHER_PARTS`. A part is a module with
``run(console, quick=False, **options) -> {part, rows: [...], ratios: {...}}`` that also
prints its tables. Speed targets live in the parts, never in tests.
"""

from __future__ import annotations

import importlib
from typing import Any

from rich.console import Console

from agentgym.core.errors import BadInput
from agentgym.registry import ENVS_PACKAGE, family_dirs

OTHER_PARTS = {
    "harness": "agentgym.harness.bench",
    "leaderboard": "agentgym.leaderboard.bench",
    "trainer": "agentgym.baselines.bench.trainer",
    "learning": "agentgym.baselines.bench.learning",
    "credit": "agentgym.baselines.bench.credit",
    "serve": "agentgym.envs.remote.service_bench",
    "rollouts": "agentgym.baselines.bench.rollouts",
    "attribution": "agentgym.baselines.bench.attribution",
}
"""The parts that are not an env family's, by name -> the module that measures it."""


def _family_parts() -> dict[str, str]:
    """Every env family with a ``bench`` module (or package) in its folder, found on disk."""
    return {
        name: f"{ENVS_PACKAGE}.{name}.bench"
        for name, folder in family_dirs().items()
        if (folder / "bench.py").is_file() or (folder / "bench" / "__init__.py").is_file()
    }


PARTS = {**_family_parts(), **OTHER_PARTS}
"""Part name -> the module that measures it (imported only when that part runs): each env
family's ``bench`` module under the family's name, then :data:`OTHER_PARTS`."""


PART_OPTIONS = {
    "learning": frozenset(
        {
            "variants",
            "rl_steps",
            "env",
            "seeds",
            "first_seed",
            "tokens",
            "aggregation",
            "plot",
            "work",
            "device",
            "curve",
            "sft_mode",
            "sft_teacher",
            "split",
            "rl_options",
            "record",
        }
    ),
    "credit": frozenset({"variants", "env", "plot", "checkpoint", "k", "tasks", "group_size"}),
    "attribution": frozenset({"env", "checkpoint", "tasks"}),
}
"""The options each part takes beyond ``quick`` (the others take none)."""


def run_bench(
    part: str,
    console: Console,
    quick: bool = False,
    variants: str | None = None,
    rl_steps: int | None = None,
    env: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run one part's benchmark and print its tables.

    ``quick``: small sizes, a smoke run. The learning and credit parts take ``variants``
    (comma-separated credit variants), ``env`` and ``plot``; learning also ``rl_steps`` (RL
    steps instead of the token budget), ``seeds``, ``first_seed``, ``tokens``, ``aggregation``,
    ``work``, ``device``, ``curve``, ``sft_mode``, ``sft_teacher``, ``split``, ``rl_options``
    and ``record``; credit ``checkpoint``, ``k``, ``tasks`` and ``group_size``; attribution
    ``env``, ``checkpoint`` and ``tasks`` (:data:`PART_OPTIONS`; None: the part's default).
    """
    if part not in PARTS:
        raise BadInput(f"unknown bench part {part!r}: available: {', '.join(PARTS)}")
    given: dict[str, Any] = {}
    if variants is not None:
        given["variants"] = tuple(v.strip() for v in variants.split(",") if v.strip())
    if rl_steps is not None:
        if rl_steps < 1:
            raise BadInput(f"--rl-steps must be at least 1, got {rl_steps}")
        given["rl_steps"] = rl_steps
    if env is not None:
        given["env"] = env
    given.update((k, v) for k, v in options.items() if v is not None)
    stray = sorted(set(given) - PART_OPTIONS.get(part, frozenset()))
    if stray:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in stray)
        takers = [p for p, names in PART_OPTIONS.items() if set(stray) <= names]
        named = (
            ", ".join(takers[:-1]) + " and " + takers[-1] if len(takers) > 1 else "".join(takers)
        )
        where = f"bench {named} only" if takers else "no bench part"
        raise BadInput(f"{flags} applies to {where}, not {part!r}")
    module = importlib.import_module(PARTS[part])
    doc: dict[str, Any] = module.run(console, quick=quick, **given)
    return doc
