"""Reports for people (rich tables) and scripts (``report --json``).

The table's statistic columns come from :data:`agentgym.harness.stats.STATISTICS`: runs,
mean, one column per statistic, then the mean's 95% interval. An exact (Clopper-Pearson)
interval, given where every run scored the same 0 or 1, is marked with :data:`EXACT_MARK` and
explained under the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.harness import stats
from agentgym.harness.results import EnvSummary, Summary

EXACT_MARK = "*"
"""Follows an interval that is exact binomial rather than bootstrap."""
EXACT_NOTE = (
    f"{EXACT_MARK} exact binomial (Clopper-Pearson) interval, as every run scored the same; "
    "the other intervals are stratified bootstrap percentiles"
)
"""The footnote under a table that holds an exact interval."""


def report_json(doc: Mapping[str, Any]) -> dict[str, EnvSummary]:
    """The ``report --json`` document, recomputed from the episodes.

    Args:
        doc: a results document.

    Returns:
        ``{env_id: {n, mean, iqm, ci_low, ci_high, by_task_type}}``, computed with the file's
        recorded bootstrap seed and repetitions (same file, same numbers).
    """
    boot = doc.get("bootstrap") or {}
    return stats.aggregate(
        doc["episodes"],
        bootstrap_seed=int(boot.get("seed", 0)),
        reps=boot.get("reps") or stats.DEFAULT_REPS,
    )


def columns() -> list[str]:
    """Headers of the statistic columns: runs, mean, each statistic's label, the interval."""
    return ["runs", "mean", *(s.label for s in stats.STATISTICS), "95% CI"]


def cells(summary: Summary) -> list[str]:
    """The statistic cells of one summary, under :func:`columns`.

    The interval ends in :data:`EXACT_MARK` when it is the exact binomial one.
    """
    values: Mapping[str, Any] = summary
    mark = EXACT_MARK if is_exact(summary) else ""
    return [
        str(summary["n"]),
        f"{summary['mean']:.3f}",
        *(f"{values[s.key]:.3f}" for s in stats.STATISTICS),
        f"[{summary['ci_low']:.3f}, {summary['ci_high']:.3f}]{mark}",
    ]


def is_exact(summary: Summary) -> bool:
    """Whether the summary's interval is the exact binomial one (``ci_method``)."""
    return summary.get("ci_method") == stats.CI_EXACT


def print_report(console: Console, docs: Mapping[str, Any]) -> None:
    """One table: per env, agent and task type the runs, mean, statistics and 95% interval.

    Args:
        console: where to print.
        docs: one results document, or several by the name to show for their agent.
    """
    if "episodes" in docs:  # a single results document
        docs = {docs["agent"]["spec"]: docs}
    table = Table("env", "agent", "tasks", *columns(), "errored")
    flags, exact = [], False
    for name, doc in docs.items():
        summary = report_json(doc)
        for env_id, agg in summary.items():
            errored = sum(e["error"] is not None for e in doc["episodes"] if e["env_id"] == env_id)
            table.add_row(env_id, name, "all", *cells(agg), str(errored))
            subs = sorted(agg.get("by_task_type", {}).items())
            for task_type, sub in subs:
                table.add_row("", "", task_type, *cells(sub), "")
            exact = exact or any(is_exact(s) for s in (agg, *(sub for _, sub in subs)))
        flags += _control_flags(name, doc.get("controls") or {})
    console.print(table)
    if exact:
        console.print(EXACT_NOTE)
    for line in flags:
        console.print(line)


def _control_flags(name: str, controls: Mapping[str, Any]) -> list[str]:
    """One line per env on whether the metric controls (``eval --controls``) passed."""
    lines = []
    for env_id, c in controls.items():
        pos, null = c["positive"], c.get("null")
        verdict = "passed" if pos["ok"] and (null is None or null["ok"]) else "[red]FAILED[/red]"
        text = f"controls for {name} on {env_id}: {verdict}; oracle {pos['mean']:.3f}"
        if null is not None:
            text += f", permuted answers {null['mean']:.3f} (chance {null['chance']:.3f})"
        lines.append(text)
    return lines
