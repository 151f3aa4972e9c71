"""Printing results for people (tables) next to the JSON for scripts."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def print_summary(console: Console, result: dict[str, Any]) -> None:
    """One row per env: runs, mean success, episodes, errors."""
    table = Table("env", "agent", "runs", "mean success", "episodes", "errored")
    for env_id, agg in result["aggregates"].items():
        eps = [e for e in result["episodes"] if e["env_id"] == env_id]
        errored = sum(e["error"] is not None for e in eps)
        table.add_row(
            env_id,
            result["agent"]["spec"],
            str(agg["n"]),
            f"{agg['mean']:.3f}",
            str(len(eps)),
            str(errored),
        )
    console.print(table)


def print_comparison(console: Console, results: dict[str, dict[str, Any]]) -> None:
    """Agents side by side on each env: mean success and mean steps per episode."""
    table = Table("env", "agent", "runs", "mean success", "mean steps", "errored")
    for name, result in results.items():
        for env_id, agg in result["aggregates"].items():
            eps = [e for e in result["episodes"] if e["env_id"] == env_id]
            steps = sum(e["steps"] for e in eps) / max(len(eps), 1)
            errored = sum(e["error"] is not None for e in eps)
            table.add_row(
                env_id, name, str(agg["n"]), f"{agg['mean']:.3f}", f"{steps:.1f}", str(errored)
            )
    console.print(table)
