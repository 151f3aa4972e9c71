"""Harness speed, against peers run in the same process.

Measured, each side's median over alternating runs (:func:`agentgym.core.timing.alternate`):

* the harness's overhead per episode against a bare env/agent loop;
* the cost of ``import agentgym`` in a fresh interpreter, and of starting a process pool
  (spawning its workers and importing the package there), each on its own line, because a
  warm pool pays it once, not once per evaluation;
* the throughput of a warm process pool with 1 and with 2 workers on CPU-bound episodes,
  whose agent does a fixed amount of CPU work per action (:class:`BusyAgent`), so that two
  workers overlap only where two cores are free;
* Ray's per-episode overhead, where Ray is installed.

Goal: 2 workers play at least :data:`GOAL_TWO_WORKERS` times as fast as one, once warm. It is
reported, never asserted: a shared host may lack the second core.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.agents import load_agent
from agentgym.core.timing import Alternated, alternate
from agentgym.harness.pool import Pool, ProcessPool
from agentgym.harness.runner import Unit, execute, ray_session
from agentgym.harness.seeds import episode_seeds
from agentgym.registry import make

ENV_ID = "agentgym/Search-Menu-Small-v0"
BUSY_MS = 20.0
"""CPU time of one busy action on the host that calibrates it (see :func:`calibrate`)."""
GOAL_TWO_WORKERS = 1.7
"""Goal: warm 2-worker throughput over warm 1-worker throughput."""
ITERATIONS_VAR = "AGENTGYM_BENCH_BUSY_ITERATIONS"
"""The environment variable that hands the calibrated work to the pool's workers."""
DEFAULT_ITERATIONS = 60_000
"""Busy iterations per action when none were calibrated (about 20 ms on a 2020s core)."""
REPEATS, WARMUP = 3, 1


def busy_work(iterations: int) -> bytes:
    """``iterations`` chained BLAKE2b hashes of 16 bytes: a fixed amount of CPU work.

    Returns:
        The last digest (so the work cannot be skipped).
    """
    digest = b"agentgym"
    for _ in range(iterations):
        digest = hashlib.blake2b(digest, digest_size=16).digest()
    return digest


def calibrate(ms: float = BUSY_MS, trials: int = 5) -> int:
    """Iterations of :func:`busy_work` that take ``ms`` of CPU time here, best of ``trials``.

    CPU time (``process_time``), not wall time, so a busy neighbour slows the calibration
    less; the count is then fixed for every worker and every run of the bench.
    """
    probe = 20_000
    best = float("inf")
    for _ in range(trials):
        start = time.process_time()
        busy_work(probe)
        best = min(best, time.process_time() - start)
    return max(1, round(probe * ms / 1000 / max(best, 1e-9)))


class BusyAgent:
    """A random agent that also does a fixed amount of CPU work per action.

    The work stands in for a model's forward pass, so that episodes are CPU-bound. It is a
    number of iterations (``AGENTGYM_BENCH_BUSY_ITERATIONS``, set by the bench from
    :func:`calibrate`), never a wall-clock deadline: a worker that shares its core with
    another takes longer, as a real model would.
    """

    def __init__(self) -> None:
        """Wrap the built-in random agent; read the work per action from the environment."""
        self._inner = load_agent("random")
        self.iterations = int(os.environ.get(ITERATIONS_VAR, DEFAULT_ITERATIONS))

    def reset(self, env_id: str, seed: int) -> None:
        """Start an episode (the random agent's reset)."""
        self._inner.reset(env_id, seed)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """The fixed work, then the random agent's action."""
        busy_work(self.iterations)
        return self._inner.act(observation, info)


def _units(agent: str, seeds: int) -> list[Unit]:
    from agentgym.harness.evaluate import RunPlan, plan_units

    return plan_units(RunPlan(agent, (ENV_ID,), seeds), done=set())


def _play(units: list[Unit], pool: Pool | None = None) -> int:
    """Play ``units`` (on ``pool``, else in this process); the number of episodes played."""
    played = sum(1 for _ in execute(units, pool=pool))
    assert played == sum(len(u.episodes) for u in units)
    return played


def _direct(agent_spec: str, seeds: int) -> int:
    """The same episodes with no harness: make, reset, act, step."""
    plan = [row[0] for row in episode_seeds(0, seeds, 1)]
    env, agent = make(ENV_ID, split="test"), load_agent(agent_spec)
    for seed in plan:
        obs, info = env.reset(seed=seed)
        agent.reset(ENV_ID, seed)
        while True:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
    return len(plan)


def _import_s() -> float:
    """Median seconds of ``import agentgym`` in a fresh interpreter (three of them)."""
    code = "import time; t = time.perf_counter(); import agentgym; print(time.perf_counter() - t)"
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, check=True, text=True
            ).stdout
        )
        for _ in range(REPEATS)
    ]
    return float(statistics.median(runs))


def run(console: Console, quick: bool = False) -> dict[str, Any]:
    """The measurements (medians of alternating runs); prints the table, returns the doc."""
    n_fast, n_busy = (200, 12) if quick else (2000, 40)
    fast = _units("random", n_fast)
    over = alternate(
        {"harness": lambda: _play(fast), "bare loop": lambda: _direct("random", n_fast)},
        REPEATS,
        WARMUP,
    )
    overhead_ms = (over.median("harness") - over.median("bare loop")) / n_fast * 1000
    rows: list[dict[str, Any]] = [
        {
            "measure": "harness overhead per episode",
            "ms": round(overhead_ms, 4),
            "note": f"{n_fast} random-agent episodes on {ENV_ID}, local backend vs bare loop",
        },
        {
            "measure": "import agentgym",
            "s": round(_import_s(), 3),
            "note": f"fresh interpreter, median of {REPEATS}",
        },
    ]
    iterations = calibrate()
    with _busy_iterations(iterations), ProcessPool(1) as one, ProcessPool(2) as two:
        rows += [_startup_row(p) for p in (one, two)]
        busy = _units("agentgym.harness.bench:BusyAgent", n_busy)
        timed = alternate(
            {"1 worker": lambda: _play(busy, one), "2 workers": lambda: _play(busy, two)},
            REPEATS,
            WARMUP,
        )
    rows += _scaling_rows(timed, n_busy, iterations)
    speedup = round(timed.ratio("1 worker", "2 workers"), 2)
    ratios = {"2 workers / 1 worker": speedup}
    ray_row = _ray_row(n_fast, over.median("harness"))
    if ray_row:
        rows.append(ray_row)
    goal = {"two_workers": GOAL_TWO_WORKERS, "two_workers_met": speedup >= GOAL_TWO_WORKERS}
    _print(console, rows, ratios)
    return {"part": "harness", "rows": rows, "ratios": ratios, "goal": goal}


@contextlib.contextmanager
def _busy_iterations(iterations: int) -> Iterator[None]:
    """Set :data:`ITERATIONS_VAR` for the block (workers spawned in it inherit it)."""
    old = os.environ.get(ITERATIONS_VAR)
    os.environ[ITERATIONS_VAR] = str(iterations)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ITERATIONS_VAR, None)
        else:
            os.environ[ITERATIONS_VAR] = old


def _startup_row(pool: Pool) -> dict[str, Any]:
    workers = f"{pool.workers} worker{'s' if pool.workers > 1 else ''}"
    return {
        "measure": f"pool start-up, {workers}",
        "s": round(pool.startup_s, 3),
        "note": "spawn + import agentgym until every worker is ready; paid once per pool",
    }


def _scaling_rows(timed: Alternated, n: int, iterations: int) -> list[dict[str, Any]]:
    rows = []
    for side in ("1 worker", "2 workers"):
        lo, hi = timed.spread(side)
        rows.append(
            {
                "measure": f"warm process pool, {side}",
                "episodes_per_s": round(n / timed.median(side), 2),
                "min_episodes_per_s": round(n / hi, 2),
                "max_episodes_per_s": round(n / lo, 2),
                "note": f"{n} CPU-bound episodes ({iterations} hashes ≈ {BUSY_MS:g} ms CPU per "
                f"action); median of {REPEATS} alternating runs after {WARMUP} warm-up",
            }
        )
    return rows


def _ray_row(n: int, local_s: float) -> dict[str, Any] | None:
    if importlib.util.find_spec("ray") is None:
        return None
    start = time.perf_counter()
    with ray_session(num_cpus=2):
        init_s = time.perf_counter() - start
        begin = time.perf_counter()
        sum(1 for _ in execute(_units("random", n), backend="ray", workers=2))
        ray_s = time.perf_counter() - begin
    return {
        "measure": "ray backend overhead per episode",
        "ms": round((ray_s - local_s) / n * 1000, 4),
        "note": f"{n} episodes, one task per run, local Ray on 2 CPUs; ray.init {init_s:.1f} s "
        "excluded",
    }


def _value(row: dict[str, Any]) -> str:
    if "ms" in row:
        return f"{row['ms']:.3f} ms"
    if "s" in row:
        return f"{row['s']:.3f} s"
    return f"{row['episodes_per_s']:.2f} episodes/s"


def _print(console: Console, rows: list[dict[str, Any]], ratios: dict[str, float]) -> None:
    table = Table("measure", "value", "note", title="harness")
    for r in rows:
        note = r["note"]
        if "min_episodes_per_s" in r:
            note += f" (range {r['min_episodes_per_s']:.2f}–{r['max_episodes_per_s']:.2f})"
        table.add_row(r["measure"], _value(r), note)
    for name, ratio in ratios.items():
        met = "met" if ratio >= GOAL_TWO_WORKERS else "not met"
        table.add_row(name, f"{ratio:.2f}x", f"speed-up, warm; goal ≥ {GOAL_TWO_WORKERS:g}x: {met}")
    console.print(table)
