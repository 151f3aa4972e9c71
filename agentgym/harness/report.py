"""Reports for people (rich tables) and scripts (``report --json``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.harness.stats import DEFAULT_REPS, aggregate


def report_json(doc: dict[str, Any]) -> dict[str, Any]:
    """``{env_id: {n, mean, iqm, ci_low, ci_high, by_task_type}}``, recomputed from the
    episodes with the file's recorded bootstrap seed and repetitions (same file, same
    numbers)."""
    boot = doc.get("bootstrap") or {}
    return aggregate(
        doc["episodes"],
        bootstrap_seed=int(boot.get("seed", 0)),
        reps=boot.get("reps") or DEFAULT_REPS,
    )


def print_report(console: Console, docs: dict[str, Any]) -> None:
    """One table: per env, agent and task type the runs, mean, IQM and 95% interval.

    Args:
        console: where to print.
        docs: one results document, or several by the name to show for their agent.
    """
    if "episodes" in docs:  # a single results document
        docs = {docs["agent"]["spec"]: docs}
    named: dict[str, dict[str, Any]] = docs
    table = Table("env", "agent", "tasks", "runs", "mean", "IQM", "95% CI", "errored")
    flags = []
    for name, doc in named.items():
        summary = report_json(doc)
        for env_id, agg in summary.items():
            errored = sum(e["error"] is not None for e in doc["episodes"] if e["env_id"] == env_id)
            table.add_row(env_id, name, "all", *_cells(agg), str(errored))
            for task_type, sub in sorted(agg.get("by_task_type", {}).items()):
                table.add_row("", "", task_type, *_cells(sub), "")
        flags += _control_flags(name, doc.get("controls") or {})
    console.print(table)
    for line in flags:
        console.print(line)


def _cells(agg: dict[str, Any]) -> list[str]:
    return [
        str(agg["n"]),
        f"{agg['mean']:.3f}",
        f"{agg['iqm']:.3f}",
        f"[{agg['ci_low']:.3f}, {agg['ci_high']:.3f}]",
    ]


def _control_flags(name: str, controls: dict[str, Any]) -> list[str]:
    lines = []
    for env_id, c in controls.items():
        pos, null = c["positive"], c.get("null")
        verdict = "passed" if pos["ok"] and (null is None or null["ok"]) else "[red]FAILED[/red]"
        text = f"controls for {name} on {env_id}: {verdict}; oracle {pos['mean']:.3f}"
        if null is not None:
            text += f", permuted answers {null['mean']:.3f} (chance {null['chance']:.3f})"
        lines.append(text)
    return lines
