"""Learning on this machine: test-split success against training wall-clock for the tiny policy.

The env is Search-Menu-Small (or another env with a recipe, ``--env``). One SFT warm start
from the oracle's demonstrations, then each credit variant from that same checkpoint with
the same seed and step budget; every kept checkpoint is evaluated greedily on the test split
over many seeds through the harness, and each variant is compared with grpo (and grpo with
SFT alone) through the paired comparison of ``agentgym compare``. Evaluation time is never
counted as training time.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.baselines.config import RECIPES, SEARCH_MENU_SMALL, TrainConfig
from agentgym.core.errors import BadInput

ENV_ID = SEARCH_MENU_SMALL.env
GOAL = {"success": 0.8, "seconds": 15 * 60}
"""The target on Search-Menu-Small: test success of SFT + RL within 15 CPU minutes of training
(other envs report no goal)."""


@dataclass(frozen=True)
class Budget:
    """What every variant gets: training settings and the test seeds per checkpoint.

    The training settings are the warm start's and each variant's, in one ``TrainConfig``
    (``steps`` is each variant's RL steps).
    """

    train: TrainConfig
    test_seeds: int

    @property
    def env(self) -> str:
        """The env id trained on and tested on."""
        return self.train.env


def budget_for(env: str, quick: bool = False) -> Budget:
    """The full (or quick) budget on ``env``, from its recipe in ``RECIPES``."""
    if env not in RECIPES:
        raise BadInput(f"bench learning has no recipe for {env!r}: choose from {sorted(RECIPES)}")
    recipe = RECIPES[env]
    if not quick:
        return Budget(
            recipe.with_options(steps=40, checkpoint_every=10, tensorboard=False), test_seeds=100
        )
    return Budget(
        recipe.with_options(
            preset="nano",
            sft_steps=20,
            sft_episodes=10,
            steps=2,
            checkpoint_every=1,
            tasks_per_step=2,
            group_size=2,
            tensorboard=False,
        ),
        test_seeds=4,
    )


def run(
    console: Console,
    quick: bool = False,
    variants: tuple[str, ...] = ("grpo", "gigpo"),
    rl_steps: int | None = None,
    env: str = ENV_ID,
) -> dict[str, Any]:
    """Warm start, the variants, the evaluations, the comparisons; prints two tables.

    ``rl_steps`` replaces the budget's RL steps per variant; ``env`` picks the recipe.
    """
    from agentgym.baselines.credit import compose
    from agentgym.registry import make

    budget = budget_for(env, quick)
    if rl_steps is not None:
        budget = replace(budget, train=budget.train.with_options(steps=rl_steps))
    variants = tuple(dict.fromkeys(variants))
    if not variants:
        raise BadInput("--variants needs at least one credit variant")
    probe = make(budget.env)
    for name in variants:
        # an unknown name, a clash or a misfitting env fails now, not after the warm start
        compose(name, None).check(probe)
    base = budget.train.with_options(steps=0)
    work = Path(tempfile.mkdtemp(prefix="agentgym-bench-learning-"))
    try:
        return _run(console, budget, base, variants, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(
    console: Console, budget: Budget, base: TrainConfig, variants: tuple[str, ...], work: Path
) -> dict[str, Any]:
    from agentgym.baselines.train import train
    from agentgym.harness.compare import compare

    console.print(f"warm start: {base.sft.steps} SFT steps ({base.model.preset} policy)")
    train(base, work / "warm")
    sft_ckpt = work / "warm" / "sft"
    sft_seconds = _train_seconds(sft_ckpt)
    rows = [_row(budget.env, "sft", 0, sft_seconds, 0, _evaluate(sft_ckpt, budget))]
    finals: dict[str, dict[str, Any]] = {"sft": rows[0].pop("doc")}
    for name in variants:
        console.print(f"{name}: {budget.train.rl.steps} RL steps from the warm start")
        out = work / name
        cfg = base.with_options(
            credit=name, init=str(sft_ckpt), sft_steps=0, steps=budget.train.rl.steps
        )
        train(cfg, out)
        tokens = _cumulative_tokens(out / "metrics.csv")
        for ckpt in sorted((out / "steps").iterdir()):
            doc = _evaluate(ckpt, budget)
            step = int(ckpt.name.split("_")[1])
            seconds = sft_seconds + _train_seconds(ckpt)
            row = _row(budget.env, name, step, seconds, tokens[step], doc)
            finals[name] = row.pop("doc")
            rows.append(row)
    comparisons = {}
    if "grpo" in finals:
        comparisons["grpo vs sft"] = _comparison(compare(finals["sft"], finals["grpo"]))
        for name in variants:
            if name != "grpo":
                comparisons[f"{name} vs grpo"] = _comparison(compare(finals["grpo"], finals[name]))
    _print(console, rows, comparisons, budget)
    best = max((r for r in rows if r["variant"] != "sft"), key=lambda r: r["mean"], default=None)
    within = [r for r in rows if r["variant"] != "sft" and r["seconds"] <= GOAL["seconds"]]
    return {
        "part": "learning",
        "env": budget.env,
        "budget": {**budget.train.to_json(), "test_seeds": budget.test_seeds},
        "rows": rows,
        "comparisons": comparisons,
        "ratios": {
            "best success / goal": round(best["mean"] / GOAL["success"], 3)
            if best and budget.env == ENV_ID
            else None,
        },
        "goal": {**GOAL, "met": any(r["mean"] >= GOAL["success"] for r in within)}
        if budget.env == ENV_ID
        else None,
    }


def _evaluate(ckpt: Path, budget: Budget) -> dict[str, Any]:
    from agentgym.harness.evaluate import evaluate

    return evaluate(str(ckpt), [budget.env], seeds=budget.test_seeds, root_seed=0, split="test")


def _train_seconds(ckpt: Path) -> float:
    manifest = json.loads((ckpt / "agentgym_agent.json").read_text())
    return float(manifest["config"]["train_seconds"])


def _cumulative_tokens(metrics_csv: Path) -> dict[int, int]:
    """RL step -> policy-loss tokens trained on up to and including that step."""
    import csv

    total, out = 0, {}
    with metrics_csv.open() as f:
        for row in csv.DictReader(f):
            if row["phase"] == "rl":
                total += int(float(row.get("tokens") or 0))
                out[int(row["step"])] = total
    return out


def _row(
    env: str, variant: str, step: int, seconds: float, tokens: int, doc: dict[str, Any]
) -> dict[str, Any]:
    agg = doc["aggregates"][env]
    return {
        "variant": variant,
        "rl_step": step,
        "seconds": round(seconds, 1),
        "rl_tokens": tokens,
        "n": agg["n"],
        "mean": agg["mean"],
        "ci_low": agg["ci_low"],
        "ci_high": agg["ci_high"],
        "doc": doc,
    }


def _comparison(doc: dict[str, Any]) -> dict[str, Any]:
    keys = ("diff", "ci_low", "ci_high", "prob_improvement", "n_pairs", "verdict")
    return {k: doc[k] for k in keys}


def _print(
    console: Console,
    rows: list[dict[str, Any]],
    comparisons: dict[str, dict[str, Any]],
    budget: Budget,
) -> None:
    title = f"{budget.env}, test split, {budget.test_seeds} seeds, greedy"
    table = Table("variant", "RL step", "train s", "RL tokens", "success", "95% CI", title=title)
    for r in rows:
        ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        table.add_row(
            r["variant"],
            str(r["rl_step"]),
            f"{r['seconds']:.0f}",
            str(r["rl_tokens"]),
            f"{r['mean']:.3f}",
            ci,
        )
    console.print(table)
    if comparisons:
        paired = Table("comparison (final checkpoints)", "verdict", title="paired, B − A")
        for name, c in comparisons.items():
            paired.add_row(name, c["verdict"])
        console.print(paired)
