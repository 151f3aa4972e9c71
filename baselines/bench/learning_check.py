"""``agentgym bench learning --quick``: the main job's recipe, small, against recorded figures.

A change to the trainer, the rollouts, a policy, a recipe or an env's text can move every
learning figure, and a full three-seed benchmark takes hours. This check takes minutes: one
training seed of :data:`~agentgym.baselines.config.QUICKSTART` (the recipe ``agentgym
quickstart`` trains) with a shorter warm start and RL budget (:data:`SMALL`), its warm start
and its RL result scored greedily on the test split; training runs on the recipe's torch
threads and the checkpoints play on one (the summation order is part of the result: two
threads instead of one moved the main job's RL figure by 7 points). Each
figure is then set against :data:`RECORD`: "same" when it lies inside the recorded figure's
95% interval, "changed" when it does not (say why in the change's note, then record the new
figures with ``--record``), "not comparable" when the settings differ from the recorded ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.baselines.bench.learning_runs import same_settings
from agentgym.baselines.config import QUICKSTART, TrainConfig

RECORD = Path(__file__).with_name("learning_quick.json")
"""The recorded figures: settings, and each row's mean and 95% interval."""
SMALL = {"sft_steps": 600, "sft_episodes": 600, "token_budget": 60_000}
"""The small budget, in the recipe's option names: a third of the warm start's steps, and
about fifteen RL steps."""
TEST_SEEDS = 100


def recipe() -> TrainConfig:
    """The main job's recipe at the small budget (its thread count too)."""
    return QUICKSTART.with_options(**SMALL)


def variant() -> str:
    """The variant the main job trains (its RL row)."""
    return QUICKSTART.credit


def settings(doc: dict[str, Any]) -> dict[str, Any]:
    """What a learning document's figures depend on: its budget, the thread count included."""
    return dict(doc["budget"])


def figures(doc: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each row's success and interval, and the paired gain of RL over the warm start."""
    rows = {
        r["variant"]: {k: round(float(r[k]), 4) for k in ("mean", "ci_low", "ci_high")}
        for r in doc["rows"]
    }
    gain = doc["comparisons"].get(f"{variant()} vs sft")
    if gain is not None:
        rows[f"{variant()} - sft"] = {
            "mean": round(float(gain["diff"]), 4),
            "ci_low": round(float(gain["ci_low"]), 4),
            "ci_high": round(float(gain["ci_high"]), 4),
        }
    return rows


def check(console: Console, doc: dict[str, Any], record: bool = False) -> dict[str, Any]:
    """Compare ``doc``'s figures with :data:`RECORD` (or write them there, ``record``).

    Returns:
        ``{"record": path, "verdicts": {row: "same" | "changed" | "new" | "not
        comparable"}}``, which the bench adds to its document.
    """
    now = {"settings": settings(doc), "figures": figures(doc)}
    if record:
        RECORD.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        console.print(f"recorded these figures in {RECORD}")
        return {"record": str(RECORD), "verdicts": {name: "recorded" for name in now["figures"]}}
    try:
        then = json.loads(RECORD.read_text())
    except (OSError, ValueError):
        then = {"settings": None, "figures": {}}
    comparable = same_settings(then["settings"], now["settings"])
    table = Table("row", "now", "recorded", "verdict", title=f"against {RECORD.name}")
    verdicts = {}
    for name, fig in now["figures"].items():
        old = then["figures"].get(name)
        if not comparable:
            verdict = "not comparable"
        elif old is None:
            verdict = "new"
        else:
            inside = old["ci_low"] <= fig["mean"] <= old["ci_high"]
            verdict = "same" if inside else "changed"
        verdicts[name] = verdict
        table.add_row(
            name,
            _figure(fig),
            "" if old is None else _figure(old),
            f"[bold red]{verdict}[/]" if verdict == "changed" else verdict,
        )
    console.print(table)
    if not comparable:
        console.print(
            "the recorded figures were measured with other settings (budget, recipe or thread "
            "count): record new ones with --record"
        )
    return {"record": str(RECORD), "verdicts": verdicts}


def _figure(fig: dict[str, float]) -> str:
    return f"{fig['mean']:+.3f} [{fig['ci_low']:+.3f}, {fig['ci_high']:+.3f}]"
