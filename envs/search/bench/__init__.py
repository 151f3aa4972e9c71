"""Search family speed: env steps, BM25, dense search and query encoding.

Env steps are measured against the bare engine and BM25 against rank-bm25. Every comparison
is measured in the same run, the sides alternating (runs in rounds, or queries one by one),
on wall and CPU time: medians, with the rounds' range or the queries' p95.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.agents.builtin import RandomAgent
from agentgym.core.timing import Sample, Stopwatch, alternate
from agentgym.envs.search.bench.bm25 import bm25_rows
from agentgym.envs.search.bench.dense import dense_rows
from agentgym.envs.search.menu_env import SearchMenuEnv
from agentgym.registry import make

ENV_IDS = (
    "agentgym/Search-Menu-Small-v0",
    "agentgym/Search-Menu-Medium-v0",
    "agentgym/Search-Free-Small-v0",
    "agentgym/Search-Free-Medium-v0",
)
REPEATS = 5
"""Alternating rounds of each env run (2 in a quick run)."""


def _record(env_id: str, episodes: int) -> list[tuple[int, list[Any]]]:
    """Episodes of mixed oracle/random play: (seed, actions), replayed by the timed loops."""
    env, agent, rng = make(env_id), RandomAgent(), np.random.default_rng(0)
    played = []
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        agent.reset(env_id, seed)
        actions: list[Any] = []
        while True:
            use_oracle = rng.random() < 0.6 or "action_mask" not in info
            base: Any = env.unwrapped
            action = base.oracle_action() if use_oracle else agent.act(obs, info)
            actions.append(action)
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        played.append((seed, actions))
    return played


def _env_loop(env_id: str, episodes: list[tuple[int, list[Any]]]) -> Sample:
    """The env replaying ``episodes`` (resets included, env construction not)."""
    env = make(env_id)
    with Stopwatch() as watch:
        for seed, actions in episodes:
            env.reset(seed=seed)
            for a in actions:
                env.step(a)
    return watch.sample


def _engine_loop(env_id: str, episodes: list[tuple[int, list[Any]]]) -> Sample:
    """The menu env's transitions through its own operations, with nothing else.

    That is no observation text, no info, no wrappers: what any implementation of these
    rules must pay.
    """
    base = make(env_id).unwrapped
    assert isinstance(base, SearchMenuEnv)
    with Stopwatch() as watch:
        for seed, actions in episodes:
            base.reset(seed=seed)
            for a in actions:
                index, _ = base._menu.resolve(a)
                if index is not None:
                    op = base._ops[index]
                    getattr(base, f"_do_{op[0]}")(*op[1:])
                    base._rebuild_menu()
    return watch.sample


def env_rows(episodes: int = 200, repeats: int = REPEATS) -> list[dict[str, Any]]:
    """Median steps/s of each id; for menu ids also of the bare engine, alternating runs.

    Each row also holds ``timing_us_per_step``: each side's median, min and max microseconds
    per step on wall and CPU time over its ``repeats`` runs.
    """
    rows = []
    for env_id in ENV_IDS:
        played = _record(env_id, episodes)
        n = sum(len(actions) for _, actions in played)
        sides = {"env": functools.partial(_env_loop, env_id, played)}
        if "Menu" in env_id:
            sides["engine"] = functools.partial(_engine_loop, env_id, played)
        # the replays follow _record's play of the same episodes: the code is warm already
        timed = alternate(sides, repeats=repeats, warmup=0)
        row: dict[str, Any] = {"env_id": env_id, "steps": n, "repeats": repeats}
        for side in sides:
            row[f"{side}_steps_per_s"] = round(n / timed.median(side), 1)
            row[f"{side}_cpu_steps_per_s"] = round(n / max(timed.median(side, "cpu"), 1e-9), 1)
        if "engine" in sides:
            lo, hi = timed.ratio_range("engine", "env")
            row["env_engine_range"] = [round(lo, 3), round(hi, 3)]
        row["timing_us_per_step"] = timed.summary(per=n, unit="us")
        rows.append(row)
    return rows


def run(console: Console, quick: bool = False) -> dict[str, Any]:
    """All search measurements; ``quick`` shrinks sizes for a smoke run."""
    envs = env_rows(episodes=20 if quick else 200, repeats=2 if quick else REPEATS)
    bm25 = bm25_rows(
        sizes=(500, 2_000) if quick else (2_000, 100_000),
        queries=20 if quick else 200,
        build_repeats=2 if quick else 3,
    )
    dense = dense_rows(n_docs=2_000 if quick else 100_000, queries=10 if quick else 100)
    ratios: dict[str, float] = {}
    for r in envs:
        if "engine_steps_per_s" in r:
            ratios[f"env/engine {r['env_id']}"] = round(
                r["env_steps_per_s"] / r["engine_steps_per_s"], 3
            )
            ratios[f"env/engine (CPU) {r['env_id']}"] = round(
                r["env_cpu_steps_per_s"] / r["engine_cpu_steps_per_s"], 3
            )
    flat = min(r["p50_ms"] for r in dense if r["op"].startswith("faiss"))
    ours = next(r["p50_ms"] for r in dense if r["op"].startswith("DenseRetriever"))
    ratios["dense faiss flat/ours p50"] = round(flat / ours, 2)
    flat_cpu = min(r["cpu_p50_ms"] for r in dense if r["op"].startswith("faiss"))
    ours_cpu = next(r["cpu_p50_ms"] for r in dense if r["op"].startswith("DenseRetriever"))
    ratios["dense faiss flat/ours CPU p50"] = round(flat_cpu / max(ours_cpu, 1e-6), 2)
    for r in bm25:
        ratios[f"bm25 rank-bm25/ours p50 at {r['size']}"] = round(r["speedup_p50"], 1)
        ratios[f"bm25 rank-bm25/ours CPU p50 at {r['size']}"] = round(r["speedup_cpu_p50"], 1)
        ratios[f"bm25 build rank-bm25/ours at {r['size']}"] = round(r["build_speedup"], 2)
        ratios[f"bm25 top-10 agreement at {r['size']}"] = r["top10_agreement"]
    _print(console, envs, bm25, dense)
    rows = [{"kind": "env", **r} for r in envs]
    rows += [{"kind": "bm25", **r} for r in bm25]
    rows += [{"kind": "dense", **r} for r in dense]
    return {"part": "search", "rows": rows, "ratios": ratios}


def _print(
    console: Console,
    envs: list[dict[str, Any]],
    bm25: list[dict[str, Any]],
    dense: list[dict[str, Any]],
) -> None:
    table = Table(
        *("env", "steps", "env steps/s", "CPU", "engine-only steps/s", "CPU"),
        "engine / env time (rounds)",
        title="env steps (medians of alternating runs)",
    )
    for r in envs:
        engine = r.get("engine_steps_per_s")
        span = r.get("env_engine_range")
        table.add_row(
            r["env_id"],
            f"{r['steps']} × {r['repeats']}",
            f"{r['env_steps_per_s']:,.0f}",
            f"{r['env_cpu_steps_per_s']:,.0f}",
            "" if engine is None else f"{engine:,.0f}",
            "" if engine is None else f"{r['engine_cpu_steps_per_s']:,.0f}",
            "" if span is None else f"{span[0]:.2f} … {span[1]:.2f}",
        )
    console.print(table)
    table = Table(
        "pages",
        "ours p50/p95 ms",
        "rank-bm25 p50/p95 ms",
        "speed-up",
        "speed-up (CPU)",
        "build s, ours / rank-bm25",
        "top-10 agreement",
        title="BM25 top-10 query latency (tokenising included; queries interleaved)",
    )
    for r in bm25:
        table.add_row(
            f"{r['size']:,}",
            f"{r['fast_p50_ms']:.3f} / {r['fast_p95_ms']:.3f}",
            f"{r['reference_p50_ms']:.1f} / {r['reference_p95_ms']:.1f}",
            f"{r['speedup_p50']:.0f}x",
            f"{r['speedup_cpu_p50']:.0f}x",
            f"{r['fast_build_s']:.2f} / {r['reference_build_s']:.2f}",
            f"{r['top10_agreement']:.0%} of {r['reference_queries']}",
        )
    console.print(table)
    table = Table(
        "op", "p50 ms", "p95 ms", "CPU p50 ms", "note", title="dense retrieval (interleaved)"
    )
    for r in dense:
        table.add_row(
            r["op"], f"{r['p50_ms']:.3f}", f"{r['p95_ms']:.3f}", f"{r['cpu_p50_ms']:.3f}", r["note"]
        )
    console.print(table)
