"""``agentgym bench serve``: the env service against the in-process env, on loopback.

Measured, with a server started in its own process (``agentgym serve --port 0``):

* per-step latency of random-agent episodes on Search-Menu-Small-v1 and Tools-Ecommerce-v0,
  in process and through agentgym/Remote-v0, alternating (p50 and p99 of each, and the
  overhead: remote minus local);
* a load run: ``sessions`` concurrent client sessions (one thread and one Remote-v0 env
  each) each playing a full seeded episode against the one server; every transcript is
  compared with the local env's, so an episode lost (an error) or crossed (another
  session's answers) is counted; step latency percentiles over all sessions and the
  throughput.

Bounded: each session has a deadline and the run stops by itself.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.agents.builtin import RandomAgent
from agentgym.core.canonical import canonical
from agentgym.envs.remote.server import spawn
from agentgym.registry import make

STEP_ENVS = ("agentgym/Search-Menu-Small-v1", "agentgym/Tools-Ecommerce-v0")
LOAD_ENV = "agentgym/Search-Menu-Small-v1"
SESSION_DEADLINE_S = 600.0


@contextlib.contextmanager
def server_process(env_ids: tuple[str, ...]) -> Iterator[str]:
    """``agentgym serve`` on a free loopback port in a child process; its URL."""
    proc, url = spawn(env_ids)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def play(env: Any, seed: int) -> tuple[bytes, list[float]]:
    """One random-agent episode from ``seed``: its canonical transcript and step latencies."""
    agent, lines, latencies = RandomAgent(), [], []
    obs, info = env.reset(seed=seed)
    agent.reset("", seed)
    lines.append(canonical([obs, info]))
    while True:
        action = agent.act(obs, info)
        begin = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step(action)
        latencies.append(time.perf_counter() - begin)
        lines.append(canonical([action, obs, reward, terminated, truncated, info]))
        if terminated or truncated:
            return b"\n".join(lines), latencies


def _ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(values), q)) * 1000, 3) if values else float("nan")


def step_rows(url: str, episodes: int) -> list[dict[str, Any]]:
    """Per-step latency in process and through the service, alternating episode by episode."""
    rows = []
    for env_id in STEP_ENVS:
        local = make(env_id)
        remote = make("agentgym/Remote-v0", url=url, env_id=env_id)
        times: dict[str, list[float]] = {"local": [], "remote": []}
        same = True
        for seed in range(episodes):
            a, local_s = play(local, seed)
            b, remote_s = play(remote, seed)
            times["local"] += local_s
            times["remote"] += remote_s
            same = same and a == b
        remote.close()
        rows.append(
            {
                "measure": f"step latency {env_id.split('/')[1]}",
                "steps": len(times["local"]),
                "local p50 ms": _ms(times["local"], 50),
                "local p99 ms": _ms(times["local"], 99),
                "remote p50 ms": _ms(times["remote"], 50),
                "remote p99 ms": _ms(times["remote"], 99),
                "overhead p50 ms": round(_ms(times["remote"], 50) - _ms(times["local"], 50), 3),
                "overhead p99 ms": round(_ms(times["remote"], 99) - _ms(times["local"], 99), 3),
                "transcripts equal": same,
            }
        )
    return rows


def load_row(url: str, sessions: int) -> dict[str, Any]:
    """``sessions`` concurrent sessions, one full episode each, checked against local."""
    local = make(LOAD_ENV)
    expected = {seed: play(local, seed)[0] for seed in range(sessions)}
    got: dict[int, bytes] = {}
    errors: dict[int, str] = {}
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(sessions + 1)

    def session(seed: int) -> None:
        try:
            env = make("agentgym/Remote-v0", url=url, env_id=LOAD_ENV)
            start.wait(timeout=SESSION_DEADLINE_S)
            transcript, times = play(env, seed)
            env.close()
            with lock:
                got[seed] = transcript
                latencies.extend(times)
        except Exception as e:  # counted as a lost episode
            with lock:
                errors[seed] = f"{type(e).__name__}: {e}"

    threads = [threading.Thread(target=session, args=(s,), daemon=True) for s in expected]
    for t in threads:
        t.start()
    start.wait(timeout=SESSION_DEADLINE_S)
    begin = time.perf_counter()
    deadline = time.monotonic() + SESSION_DEADLINE_S
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    wall = time.perf_counter() - begin
    crossed = sum(1 for s, t in got.items() if t != expected[s])
    return {
        "measure": f"{sessions} concurrent sessions on {LOAD_ENV.split('/')[1]}",
        "episodes": sessions,
        "equal to local": sum(1 for s, t in got.items() if t == expected[s]),
        "lost": sessions - len(got),
        "crossed": crossed,
        "steps": len(latencies),
        "p50 ms": _ms(latencies, 50),
        "p99 ms": _ms(latencies, 99),
        "steps/s": round(len(latencies) / wall, 1) if wall > 0 else float("nan"),
        "wall s": round(wall, 2),
        "errors": sorted(set(errors.values()))[:3],
    }


def run(console: Console, quick: bool = False) -> dict[str, Any]:
    """The measurements; prints the tables, returns the doc."""
    episodes, sessions = (3, 20) if quick else (20, 200)
    with server_process((*STEP_ENVS, LOAD_ENV)) as url:
        steps = step_rows(url, episodes)
        load = load_row(url, sessions)
    table = Table(title="env service vs in-process env (loopback, server in its own process)")
    for col in ("measure", "steps", "local p50", "local p99", "remote p50", "remote p99", "equal"):
        table.add_column(col)
    for r in steps:
        table.add_row(
            r["measure"],
            str(r["steps"]),
            *(
                str(r[k])
                for k in ("local p50 ms", "local p99 ms", "remote p50 ms", "remote p99 ms")
            ),
            str(r["transcripts equal"]),
        )
    console.print(table)
    console.print(
        f"{load['measure']}: {load['equal to local']}/{load['episodes']} transcripts equal to "
        f"local, {load['lost']} lost, {load['crossed']} crossed; {load['steps']} steps, "
        f"p50 {load['p50 ms']} ms, p99 {load['p99 ms']} ms, {load['steps/s']} steps/s, "
        f"{load['wall s']} s"
    )
    ratios = {
        f"remote/local p50 {r['measure'].split()[-1]}": round(
            r["remote p50 ms"] / r["local p50 ms"], 2
        )
        for r in steps
        if r["local p50 ms"]
    }
    return {"part": "serve", "rows": [*steps, load], "ratios": ratios}
