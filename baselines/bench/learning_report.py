"""bench learning's report: the tables, the paired comparisons, the JSON document, the plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.harness.compare import difference
from agentgym.harness.plot import agg_figure
from agentgym.harness.stats import nested_bootstrap_ci, run_scores

if TYPE_CHECKING:
    from agentgym.baselines.bench.learning import Budget


def mean_success(doc: dict[str, Any], env: str) -> float:
    """The mean success on ``env`` of one results document."""
    return float(doc["aggregates"][env]["mean"])


def scores(doc: dict[str, Any], env: str) -> np.ndarray:
    """The test-run scores of one results document, in run order."""
    return run_scores(doc["episodes"], env)


def report(
    console: Console,
    budget: Budget,
    variants: tuple[str, ...],
    runs: list[dict[str, dict[str, Any]]],
    plot: str | None,
) -> dict[str, Any]:
    """Print the tables, write the plot; the JSON document of the benchmark."""
    env = budget.env
    rows = [_row(name, [r[name] for r in runs], env) for name in ("sft", *variants)]
    comparisons = {f"{name} vs sft": _paired(runs, "sft", name, env) for name in variants}
    if "grpo" in variants:
        for name in variants:
            if name != "grpo":
                comparisons[f"{name} vs grpo"] = _paired(runs, "grpo", name, env)
    _print(console, budget, rows, comparisons)
    if plot:
        _plot(budget, variants, runs, Path(plot))
        console.print(f"wrote {plot}")
    ratios = {
        f"{r['variant']} / grpo success": round(r["mean"] / grpo["mean"], 3)
        for grpo in rows
        if grpo["variant"] == "grpo" and grpo["mean"] > 0
        for r in rows
        if r["variant"] not in ("grpo", "sft")
    }
    return {
        "part": "learning",
        "env": env,
        "budget": {
            **budget.rl_train.to_json(),
            "seeds": list(budget.seeds),
            "test_seeds": budget.test_seeds,
            "split": budget.split,
            "scored": "final checkpoints",
        },
        "rows": rows,
        "comparisons": comparisons,
        "curves": {name: [r[name]["curve"] for r in runs] for name in variants},
        "ratios": ratios,
    }


def _row(name: str, per_seed: list[dict[str, Any]], env: str) -> dict[str, Any]:
    est = nested_bootstrap_ci([scores(r["doc"], env) for r in per_seed])
    return {
        "variant": name,
        "mean": est.point,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "per_seed": [mean_success(r["doc"], env) for r in per_seed],
        "generated_tokens": [r["tokens"] for r in per_seed],
        "rl_steps": [r["steps"] for r in per_seed],
        "train_seconds": [round(r.get("seconds", 0.0), 1) for r in per_seed],
        "teacher_tokens": [int(r.get("teacher_tokens", 0)) for r in per_seed],
        "teacher_seconds": [round(r.get("teacher_seconds", 0.0), 1) for r in per_seed],
        # the teachers a variant distils from were trained for it (bench learning trains them)
        "teachers_train_seconds": [
            round(r.get("teachers_train_seconds", 0.0), 1) for r in per_seed
        ],
        # torch's threads in the process that trained each run: the summation order they set
        # moves a run's figures by several points, so a figure is reproduced at its count
        "threads": [r.get("threads") for r in per_seed],
        "n": sum(len(scores(r["doc"], env)) for r in per_seed),
    }


def _paired(runs: list[dict[str, dict[str, Any]]], a: str, b: str, env: str) -> dict[str, Any]:
    """B − A on the same training seeds and test episodes, with the two-level interval."""
    diffs = [scores(r[b]["doc"], env) - scores(r[a]["doc"], env) for r in runs]
    est = nested_bootstrap_ci(diffs)
    return {
        "diff": est.point,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "per_seed": [float(d.mean()) for d in diffs],
        "n_pairs": sum(len(d) for d in diffs),
        "verdict": difference(
            est.point, est.ci_low, est.ci_high, a=a, b=b, over=" over training and test seeds"
        ),
    }


def _print(
    console: Console,
    budget: Budget,
    rows: list[dict[str, Any]],
    comparisons: dict[str, dict[str, Any]],
) -> None:
    table = Table(
        "variant",
        "success",
        "95% CI (train × test seeds)",
        "per seed",
        "generated tokens",
        "RL steps",
        "train s (teachers s) +teachers' training s",
        title=budget.describe(),
    )
    start = "sft" if budget.train.sft.steps > 0 else "start (no SFT)"
    for r in rows:
        table.add_row(
            start if r["variant"] == "sft" else r["variant"],
            f"{r['mean']:.3f}",
            f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
            " ".join(f"{x:.2f}" for x in r["per_seed"]),
            " ".join(f"{t:,}" for t in r["generated_tokens"]),
            " ".join(str(s) for s in r["rl_steps"]),
            " ".join(
                f"{t:.0f} ({x:.0f})" + (f" +{y:.0f}" if y else "")
                for t, x, y in zip(
                    r["train_seconds"],
                    r["teacher_seconds"],
                    r["teachers_train_seconds"],
                    strict=True,
                )
            ),
        )
    console.print(table)
    if comparisons:
        paired = Table("comparison (final checkpoints)", "verdict", title="paired, B − A")
        for name, c in comparisons.items():
            paired.add_row(name, c["verdict"])
        console.print(paired)


def _plot(
    budget: Budget, variants: tuple[str, ...], runs: list[dict[str, dict[str, Any]]], path: Path
) -> None:
    """Test success against generated tokens: the mean over seeds and its min-max band."""
    fig = agg_figure(figsize=(7, 4))
    ax = fig.add_subplot()
    sft = float(np.mean([mean_success(r["sft"]["doc"], budget.env) for r in runs]))
    label = "warm start (SFT)" if budget.train.sft.steps > 0 else "initial policy (no SFT)"
    ax.axhline(sft, color="grey", linestyle="--", label=label)
    for name in variants:
        curves = [r[name]["curve"] for r in runs]
        n = min(len(c) for c in curves)
        x = np.mean([[p[0] for p in c[:n]] for c in curves], axis=0)
        y = np.array([[p[1] for p in c[:n]] for c in curves])
        (line,) = ax.plot(x, y.mean(axis=0), "o-", label=name)
        ax.fill_between(x, y.min(axis=0), y.max(axis=0), color=line.get_color(), alpha=0.2)
    ax.set(
        xlabel="generated tokens",
        ylabel="test success (greedy)",
        ylim=(-0.02, 1.02),
        title=f"{budget.env}, {len(runs)} training seeds (band: min to max)",
    )
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
