"""The scoring half of ``agentgym quickstart``: every agent over the test split, compared.

The trained checkpoints come from the trainer (through the CLI's command table); this module
evaluates them beside the oracle and a random agent, prints the report and the paired
differences, and draws the figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from agentgym.harness.compare import compare as paired
from agentgym.harness.evaluate import evaluate
from agentgym.harness.plot import plot_report
from agentgym.harness.pool import open_pool
from agentgym.harness.report import print_report, report_json
from agentgym.terminal import out

WORKERS = 2
"""Processes that play the evaluation episodes (the cores of a small machine); a checkpoint
plays on one torch thread in each, so its records do not depend on how many there are."""


def score_agents(
    env_id: str, trained: dict[str, str], seeds: int, out_dir: Path
) -> dict[str, dict[str, Any]]:
    """Evaluate the trained agents, the oracle and a random agent; print, compare, plot.

    ``trained`` maps a name to a checkpoint, the RL one first; each agent plays ``seeds``
    test episodes, on :data:`WORKERS` processes.

    Returns:
        Each agent's results document, by name.
    """
    agents = {**trained, "oracle": "oracle", "random": "random"}
    after_rl = next(iter(trained))  # "sft+<variant>"
    results, summary = {}, {}
    with open_pool("process", WORKERS) as pool:
        for name, agent in agents.items():
            path = out_dir / f"{name}.json"
            results[name] = evaluate(
                agent, [env_id], seeds=seeds, out=path, overwrite=True, progress=True, pool=pool
            )
            summary[name] = report_json(results[name])
            out.print(f"wrote {path}")
    print_report(out, results)
    for a, b in (("sft", after_rl), ("random", after_rl)):
        files = (str(out_dir / f"{a}.json"), str(out_dir / f"{b}.json"))
        comparison = paired(results[a], results[b], names=(a, b), files=files)
        out.print(escape(f"paired: {comparison['verdict']}"), soft_wrap=True)
    plot_report(summary, out_dir / "report.png")
    out.print(f"wrote {out_dir / 'report.png'}")
    return results
