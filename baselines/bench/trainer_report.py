"""The tables and JSON rows of ``agentgym bench trainer`` (:mod:`.trainer` measures)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.baselines.bench.grpo_task import GOAL, RunResult


def row(r: RunResult) -> dict[str, Any]:
    """One run as a JSON row."""
    return {
        "side": r.side,
        "run": r.run,
        "steps": r.steps,
        "completion_tokens": r.tokens,
        "seconds": round(r.seconds, 4),
        "cpu_seconds": round(r.cpu_seconds, 4),
        "tokens_per_s": round(r.tokens_per_s, 1),
        "steps_per_s": round(r.steps / r.seconds, 3) if r.seconds > 0 else 0.0,
        "peak_mib": round(r.peak_mib, 1),
        "mean_reward": round(r.mean_reward, 4),
        "threads": r.threads,
        "phase_s": {k: round(v, 4) for k, v in r.phases.items()},
    }


def shares(results: list[RunResult]) -> dict[str, float]:
    """Share of the timed seconds spent in each phase, summed over runs."""
    total = sum(r.seconds for r in results)
    names = list(results[0].phases) if results else []
    return {n: round(sum(r.phases[n] for r in results) / total, 3) for n in names if total > 0}


def print_tables(console: Console, doc: dict[str, Any]) -> None:
    """The runs with their medians and ratios, where the time goes, and what is pinned."""
    s = doc["settings"]
    title = (
        f"trainer: {s['prompts']} prompts × {s['completions']} completions × ≤"
        f"{s['max_new_tokens']} tokens per step, {s['steps']} timed steps per run after "
        f"{s['warmup']} warm-up, GPT-2 {s['n_layer']}×{s['n_embd']}, {s['threads']} thread(s)"
    )
    table = Table(
        "side",
        "run",
        "tokens",
        "seconds",
        "tokens/s",
        "tokens/CPU s",
        "peak MiB",
        "generate",
        title=title,
    )
    for r in doc["rows"]:
        gen = r["phase_s"]["generate"] / r["seconds"] if r["seconds"] > 0 else 0.0
        per_cpu = r["completion_tokens"] / r["cpu_seconds"] if r["cpu_seconds"] > 0 else 0.0
        table.add_row(
            r["side"],
            str(r["run"]),
            f"{r['completion_tokens']:,}",
            f"{r['seconds']:.2f}",
            f"{r['tokens_per_s']:,.0f}",
            f"{per_cpu:,.0f}",
            f"{r['peak_mib']:,.0f}",
            f"{gen:.0%}",
        )
    _summary_rows(table, doc)
    console.print(table)
    phases = Table("side", "phase", "share of timed seconds", title="where the time goes")
    for side, shares in doc["phase_shares"].items():
        for name, share in shares.items():
            phases.add_row(side, name, f"{share:.1%}")
    console.print(phases)
    pins = "; ".join(
        f"{side}: {', '.join(f'{k}={v}' for k, v in pinned.items())}"
        for side, pinned in doc["fairness"].items()
    )
    console.print(f"pinned for a fair comparison: {pins}")
    console.print(
        f"tokens: {doc['counting']}; peak MiB: resident memory above each run's start "
        f"(live heap, sampled every 2 ms); peak RSS of this process: {doc['peak_rss_mib']:,.0f} MiB"
    )


def _summary_rows(table: Table, doc: dict[str, Any]) -> None:
    """The medians of each side and the ratios, under the runs."""
    for side, median in doc["medians_tokens_per_s"].items():
        gen = doc["phase_shares"][side].get("generate", 0.0)
        cpu, mib = doc["medians_tokens_per_cpu_s"][side], doc["medians_peak_mib"][side]
        table.add_row(
            side, "median", "", "", f"{median:,.0f}", f"{cpu:,.0f}", f"{mib:,.0f}", f"{gen:.0%}"
        )
    r = doc["ratios"]
    table.add_row(
        "ours/TRL",
        "",
        "",
        "",
        f"{r['ours/trl tokens_per_s']:.2f}x",
        f"{r['ours/trl tokens_per_cpu_s']:.2f}x",
        f"{r['ours/trl peak_mib']:.2f}x",
        f"goal ≥ {GOAL:g}x",
    )
