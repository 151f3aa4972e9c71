"""Harness speed, against peers run in the same process.

Measured: overhead per episode against a bare env/agent loop, process-pool scaling on
CPU-bound episodes, and Ray's per-episode overhead.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.agents import load_agent
from agentgym.harness.runner import execute, ray_session
from agentgym.harness.seeds import episode_seeds
from agentgym.registry import make

ENV_ID = "agentgym/Search-Menu-Small-v0"
BUSY_MS = 20.0


class BusyAgent:
    """A random agent that also computes for ``BUSY_MS`` per action.

    The computation stands in for a model's forward pass, so that episodes are CPU-bound.
    """

    def __init__(self) -> None:
        """Wrap the built-in random agent."""
        self._inner = load_agent("random")

    def reset(self, env_id: str, seed: int) -> None:
        """Start an episode (the random agent's reset)."""
        self._inner.reset(env_id, seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """Busy for ``BUSY_MS``, then the random agent's action."""
        end = time.perf_counter() + BUSY_MS / 1000
        x = 0.0
        while time.perf_counter() < end:
            x += float(np.sqrt(np.arange(256.0)).sum())
        return self._inner.act(observation, info)


def _units(agent: str, seeds: int) -> list[Any]:
    from agentgym.harness.evaluate import RunPlan, plan_units

    return plan_units(RunPlan(agent, (ENV_ID,), seeds), done=set())


def _harness_s(agent: str, seeds: int, **backend: Any) -> float:
    start = time.perf_counter()
    n = sum(1 for _ in execute(_units(agent, seeds), **backend))
    assert n == seeds
    return time.perf_counter() - start


def _direct_s(agent_spec: str, seeds: int) -> float:
    """The same episodes with no harness: make, reset, act, step."""
    plan = [row[0] for row in episode_seeds(0, seeds, 1)]
    start = time.perf_counter()
    env, agent = make(ENV_ID, split="test"), load_agent(agent_spec)
    for seed in plan:
        obs, info = env.reset(seed=seed)
        agent.reset(ENV_ID, seed)
        while True:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
    return time.perf_counter() - start


def run(console: Console, quick: bool = False) -> dict[str, Any]:
    """The three measurements (medians of alternating repeats where cheap)."""
    n_fast, n_busy = (200, 8) if quick else (2000, 40)
    harness, direct = [], []
    for _ in range(3):
        harness.append(_harness_s("random", n_fast))
        direct.append(_direct_s("random", n_fast))
    overhead_ms = (np.median(harness) - np.median(direct)) / n_fast * 1000
    busy = "agentgym.harness.bench:BusyAgent"
    one = _harness_s(busy, n_busy, backend="process", workers=1)
    two = _harness_s(busy, n_busy, backend="process", workers=2)
    rows: list[dict[str, Any]] = [
        {
            "measure": "harness overhead per episode",
            "ms": round(float(overhead_ms), 4),
            "note": f"{n_fast} random-agent episodes on {ENV_ID}, local backend vs bare loop",
        },
        {
            "measure": "process backend, 1 worker",
            "episodes_per_s": round(n_busy / one, 2),
            "note": f"{n_busy} CPU-bound episodes ({BUSY_MS:g} ms per action)",
        },
        {
            "measure": "process backend, 2 workers",
            "episodes_per_s": round(n_busy / two, 2),
            "note": f"{n_busy} CPU-bound episodes ({BUSY_MS:g} ms per action)",
        },
    ]
    ratios = {"2 workers / 1 worker": round(one / two, 2)}
    ray_row = _ray_row(n_fast, float(np.median(harness)))
    if ray_row:
        rows.append(ray_row)
    _print(console, rows, ratios)
    return {"part": "harness", "rows": rows, "ratios": ratios}


def _ray_row(n: int, local_s: float) -> dict[str, Any] | None:
    if importlib.util.find_spec("ray") is None:
        return None
    start = time.perf_counter()
    with ray_session(num_cpus=2):
        init_s = time.perf_counter() - start
        ray_s = _harness_s("random", n, backend="ray", workers=2)
    return {
        "measure": "ray backend overhead per episode",
        "ms": round((ray_s - local_s) / n * 1000, 4),
        "note": f"{n} episodes, one task per run, local Ray on 2 CPUs; ray.init {init_s:.1f} s "
        "excluded",
    }


def _print(console: Console, rows: list[dict[str, Any]], ratios: dict[str, float]) -> None:
    table = Table("measure", "value", "note", title="harness")
    for r in rows:
        value = f"{r['ms']:.3f} ms" if "ms" in r else f"{r['episodes_per_s']:.2f} episodes/s"
        table.add_row(r["measure"], value, r["note"])
    for name, ratio in ratios.items():
        table.add_row(name, f"{ratio:.2f}x", "speed-up")
    console.print(table)
