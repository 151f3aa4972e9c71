"""Reports for people (rich tables) and scripts (``report --json``).

The table's statistic columns come from :data:`agentgym.harness.stats.STATISTICS`: runs,
mean, one column per statistic, then the mean's 95% interval. An exact (Clopper-Pearson)
interval, given where every run scored the same 0 or 1, is marked with :data:`EXACT_MARK` and
explained under the table. Under the table: per env whose episodes carry an all-optima
certificate, how many episodes a matched metric is ambiguous on; then the metric controls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
AMBIGUOUS_WIDTH = 1e-9
"""An episode is ambiguous on a metric when its range over optimal matchings is wider."""


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
        flags += _certificate_lines(name, doc["episodes"])
        flags += _work_lines(name, doc["episodes"])
        flags += _control_flags(name, doc.get("controls") or {})
    console.print(table)
    if exact:
        console.print(EXACT_NOTE)
    for line in flags:
        console.print(line)


def _certificate_lines(name: str, episodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per env with certified episodes: a heading, then per metric the ambiguous episodes.

    An episode is ambiguous on a metric when its optimal matchings disagree on it. The
    interval is the metric's mean over the env's certified episodes, each scored at its
    lowest and at its highest optimal matching (``certificate.ranges``).
    """
    by_env: dict[str, list[Mapping[str, Any]]] = {}
    for e in episodes:
        if e.get("certificate"):
            by_env.setdefault(e["env_id"], []).append(e["certificate"])
    lines = []
    for env_id, certs in by_env.items():
        head = f"all-optima certificate for {name} on {env_id}:"
        bounded = sum(bool(c["bounded"]) for c in certs)
        if bounded:
            head += f" {bounded} episodes too large to enumerate (ranges are outer bounds)"
        lines.append(head)
        for metric in certs[0]["ranges"]:
            spans = [c["ranges"][metric] for c in certs if metric in c["ranges"]]
            ambiguous = sum(hi - lo > AMBIGUOUS_WIDTH for lo, hi in spans)
            low = sum(lo for lo, _ in spans) / len(spans)
            high = sum(hi for _, hi in spans) / len(spans)
            lines.append(
                f"  {metric}: {ambiguous} of {len(spans)} episodes ambiguous (optimal matchings "
                f"disagree), mean over optima [{low:.3f}, {high:.3f}]"
            )
    return lines


def _work_lines(name: str, episodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """An agent's extra work per episode (``compute``) and its mean blame by agent (``blame``)."""
    lines = []
    counted = [e["compute"] for e in episodes if e.get("compute")]
    if counted:
        keys = dict.fromkeys(k for c in counted for k in c)
        means = ", ".join(
            f"{k} {sum(c.get(k, 0) for c in counted) / len(counted):.1f}" for k in keys
        )
        lines.append(f"extra work of {name} per episode (mean of {len(counted)}): {means}")
    blamed = [e["blame"] for e in episodes if e.get("blame")]
    if blamed:
        share: dict[str, float] = {}
        for blame in blamed:
            for entry in blame:
                share[entry["agent"]] = share.get(entry["agent"], 0.0) + entry["blame"]
        parts = ", ".join(f"{agent} {total / len(blamed):.2f}" for agent, total in share.items())
        lines.append(f"blame of {name}'s failures by agent (mean of {len(blamed)}): {parts}")
    return lines


def _control_flags(name: str, controls: Mapping[str, Any]) -> list[str]:
    """Per env, a line on whether the metric controls (``eval --controls``) passed.

    Each perturbation a metric failed gets a line of its own, naming the metric.
    """
    lines = []
    for env_id, c in controls.items():
        pos, null, pert = c["positive"], c.get("null"), c.get("perturbation")
        checks = (pert or {}).get("checks", [])
        failed = [k for k in checks if not k["ok"]]
        ok = pos["ok"] and (null is None or null["ok"]) and not failed
        verdict = "passed" if ok else "[red]FAILED[/red]"
        text = f"controls for {name} on {env_id}: {verdict}; oracle {pos['mean']:.3f}"
        if null is not None:
            text += f", permuted answers {null['mean']:.3f} (chance {null['chance']:.3f})"
        if checks:
            text += f", perturbations {len(checks) - len(failed)} of {len(checks)} as expected"
        lines.append(text)
        lines += [
            f"  [red]{k['metric']} failed a perturbation[/red]: {k['name']} scored "
            f"{k['mean']:.3f}, expected {k['expected']:.3f} ({k['off']} of {k['episodes']} "
            f"episodes off, e.g. seeds {k['off_seeds']})"
            for k in failed
        ]
    return lines
