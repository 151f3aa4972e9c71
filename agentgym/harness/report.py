"""Printing results for people (tables) next to the JSON for scripts."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def print_results(console: Console, results: dict[str, dict[str, Any]]) -> None:
    """One row per (agent, env): runs, mean success, mean steps per episode, errored episodes.

    Args:
        console: where to print.
        results: results documents by the name to show for their agent.
    """
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
