"""Search env speed: full ``gymnasium.make`` env steps against the bare engine operations."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.agents.builtin import RandomAgent
from agentgym.envs.search.menu_env import SearchMenuEnv
from agentgym.registry import make

IDS = ("agentgym/Search-Menu-Small-v0", "agentgym/Search-Menu-Medium-v0")
EPISODES = 200
REPEATS = 3


def _record(env_id: str) -> list[tuple[int, list[Any]]]:
    """Episodes of mixed oracle/random play: (seed, actions), replayed by both loops."""
    env, agent, rng = make(env_id), RandomAgent(), np.random.default_rng(0)
    base = _base(env)
    episodes = []
    for seed in range(EPISODES):
        obs, info = env.reset(seed=seed)
        agent.reset(env_id, seed)
        actions: list[Any] = []
        while True:
            action = base.oracle_action() if rng.random() < 0.6 else agent.act(obs, info)
            actions.append(action)
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        episodes.append((seed, actions))
    return episodes


def _env_loop(env_id: str, episodes: list[tuple[int, list[Any]]]) -> tuple[int, float]:
    env = make(env_id)
    steps, start = 0, time.perf_counter()
    for seed, actions in episodes:
        env.reset(seed=seed)
        for a in actions:
            env.step(a)
        steps += len(actions)
    return steps, time.perf_counter() - start


def _base(env: Any) -> SearchMenuEnv:
    base = env.unwrapped
    assert isinstance(base, SearchMenuEnv)
    return base


def _engine_loop(env_id: str, episodes: list[tuple[int, list[Any]]]) -> tuple[int, float]:
    """The same transitions through the engine's own operations: no observation text, no info,
    no wrappers; what any implementation of these rules must pay."""
    base = _base(make(env_id))
    steps, start = 0, time.perf_counter()
    for seed, actions in episodes:
        base.reset(seed=seed)
        for a in actions:
            index, _ = base._menu.resolve(a)
            if index is not None:
                op = base._ops[index]
                getattr(base, f"_do_{op[0]}")(*op[1:])
                base._rebuild_menu()
        steps += len(actions)
    return steps, time.perf_counter() - start


def run(console: Console) -> dict[str, Any]:
    """Median steps/s over a few repeats for each id; the ratio is env / engine."""
    rows: list[dict[str, Any]] = []
    ratios: dict[str, float] = {}
    for env_id in IDS:
        episodes = _record(env_id)
        env_rates, engine_rates = [], []
        for _ in range(REPEATS):  # alternate so host noise hits both alike
            n, t = _env_loop(env_id, episodes)
            env_rates.append(n / t)
            n, t = _engine_loop(env_id, episodes)
            engine_rates.append(n / t)
        env_sps, engine_sps = float(np.median(env_rates)), float(np.median(engine_rates))
        rows.append(
            {
                "env_id": env_id,
                "steps": n,
                "env_steps_per_s": round(env_sps, 1),
                "engine_steps_per_s": round(engine_sps, 1),
            }
        )
        ratios[env_id] = round(env_sps / engine_sps, 3)
    table = Table("env", "steps", "env steps/s", "engine-only steps/s", "env / engine")
    for r in rows:
        table.add_row(
            r["env_id"],
            str(r["steps"]),
            f"{r['env_steps_per_s']:,.0f}",
            f"{r['engine_steps_per_s']:,.0f}",
            f"{ratios[r['env_id']]:.2f}",
        )
    console.print(table)
    return {"part": "search", "rows": rows, "ratios": ratios}
