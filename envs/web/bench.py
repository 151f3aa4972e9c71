"""Web family speed and difficulty: the shop in text and browser modes, and MiniWoB++.

* Shop text mode: steps per second and reset time over recorded oracle and random episodes
  replayed in alternating rounds, menu form and free text (goal: at least 500 steps per
  second on Small).
* Shop browser mode: steps per second of the same shop through headless Chromium, reset and
  browser start time, memory per browser (goal: at least 20 steps per second).
* MiniWoB++: step latency of agentgym's env against the miniwob package's own env on the
  same tasks and actions (goal: at most 1.2 times miniwob's).
* The oracle's and a random agent's success on each id over 50 test seeds.

Speed targets live here, never in tests.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from agentgym.agents.builtin import OracleAgent, RandomAgent
from agentgym.core.timing import Stopwatch, alternate
from agentgym.registry import env_ids, make

GOAL_TEXT_STEPS_PER_S = 500.0
GOAL_BROWSER_STEPS_PER_S = 20.0
GOAL_MINIWOB_RATIO = 1.2
SUCCESS_SEEDS = 50
BROWSER_BENCH = "agentgym.envs.web.shop.bench_browser:bench_browser"
MINIWOB_BENCH = "agentgym.envs.web.miniwob.bench:bench_miniwob"

Episode = tuple[int, list[Any]]  # (test seed, actions)


def record(env: Any, agent: Any, seeds: range) -> list[Episode]:
    """The actions ``agent`` takes on each test seed of ``env``."""
    episodes = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        agent.reset("", seed)
        if hasattr(agent, "bind"):
            agent.bind(env.unwrapped)
        actions = []
        while True:
            action = agent.act(obs, info)
            actions.append(action)
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        episodes.append((seed, actions))
    return episodes


def _replay(env: Any, episodes: list[Episode], resets: list[float]) -> Callable[[], Any]:
    def side() -> Any:
        watch = Stopwatch()
        for seed, actions in episodes:
            start = time.perf_counter()
            with watch:
                env.reset(seed=seed)
            resets.append(time.perf_counter() - start)
            with watch:
                for action in actions:
                    env.step(action)
        return watch.sample

    return side


def text_row(preset: str, episodes: int, repeats: int) -> dict[str, Any]:
    """Steps per second of ``Shop-<preset>``, free text and menu, on the same episodes."""
    env_id = f"agentgym/Shop-{preset}-v0"
    envs = {form: make(env_id, split="test", menu=form == "menu") for form in ("text", "menu")}
    recorded: dict[str, list[Episode]] = {}
    for form, env in envs.items():
        seeds = range(episodes)
        recorded[form] = record(env, OracleAgent(), seeds) + record(env, RandomAgent(), seeds)
    resets: dict[str, list[float]] = {form: [] for form in envs}
    timed = alternate(
        {form: _replay(env, recorded[form], resets[form]) for form, env in envs.items()},
        repeats=repeats,
    )
    row: dict[str, Any] = {"env": f"Shop-{preset}", "episodes": 2 * episodes, "repeats": repeats}
    for form in envs:
        steps = sum(len(a) for _, a in recorded[form])
        row[f"{form}_steps"] = steps
        row[f"{form}_steps_per_s"] = round(steps / timed.median(form), 1)
        row[f"{form}_steps_per_cpu_s"] = round(steps / timed.median(form, "cpu"), 1)
        row[f"{form}_reset_ms"] = round(1e3 * statistics.median(resets[form]), 3)
    row["timing_s"] = timed.summary()
    return row


def success_row(env_id: str, seeds: int = SUCCESS_SEEDS, **kwargs: Any) -> dict[str, Any]:
    """The oracle's and a random agent's success over the first ``seeds`` test seeds."""
    env = make(env_id, split="test", **kwargs)
    out: dict[str, Any] = {"env": env_id + "".join(f" {k}={v}" for k, v in kwargs.items())}
    out["oracle_success"] = None  # an env without a scripted solver (some MiniWoB++ tasks)
    agents: list[tuple[str, Any]] = [("random", RandomAgent())]
    if getattr(env.unwrapped, "has_oracle", True):
        agents.insert(0, ("oracle", OracleAgent()))
    for name, agent in agents:
        wins = 0
        for seed in range(seeds):
            obs, info = env.reset(seed=seed)
            agent.reset(env_id, seed)
            if hasattr(agent, "bind"):
                agent.bind(env.unwrapped)
            while True:
                obs, _, term, trunc, info = env.step(agent.act(obs, info))
                if term or trunc:
                    break
            wins += bool(info.get("won"))
        out[f"{name}_success"] = wins / seeds
    out["seeds"] = seeds
    env.close()
    return out


def _optional(target: str) -> Callable[..., dict[str, Any]] | None:
    module, _, name = target.partition(":")
    try:
        found: Callable[..., dict[str, Any]] = getattr(importlib.import_module(module), name)
    except ImportError:
        return None
    return found


def run(console: Console, quick: bool = False) -> dict[str, Any]:
    """Every table; ``quick`` plays fewer episodes, repeated less (a smoke run).

    A full run takes about an hour on two cores, most of it the MiniWoB++ success sweep
    (two agents, 50 seeds, every registered task).
    """
    episodes, repeats, seeds = (5, 2, 5) if quick else (50, 5, SUCCESS_SEEDS)
    presets = ("Small",) if quick else ("Small", "Large")
    text = [text_row(p, episodes, repeats) for p in presets]
    success = [success_row(f"agentgym/Shop-{p}-v0", seeds) for p in presets]
    success += [success_row(f"agentgym/Shop-{p}-v0", seeds, menu=True) for p in presets]
    doc: dict[str, Any] = {"part": "web", "text": text, "success": success}
    ratios = {f"{r['env']}_text_vs_goal": round(r["text_steps_per_s"] / GOAL_TEXT_STEPS_PER_S, 3)
              for r in text}  # fmt: skip
    browser_bench = _optional(BROWSER_BENCH)
    if browser_bench is not None:
        doc["browser"] = browser = browser_bench(steps=20 if quick else 300)
        slowest = min(browser[agent]["steps_per_s"] for agent in ("oracle", "random"))
        ratios["Shop-Browser-Small_vs_goal"] = round(slowest / GOAL_BROWSER_STEPS_PER_S, 3)
        success.append(success_row("agentgym/Shop-Browser-Small-v0", seeds))
    miniwob_bench = _optional(MINIWOB_BENCH)
    if miniwob_bench is not None:
        steps, runs = (10, 2) if quick else (40, 5)
        doc["miniwob"] = miniwob_bench(steps=steps, seeds=seeds, repeats=runs)
        ratios.update(doc["miniwob"]["ratios"])
        ids = [i for i in env_ids("web") if i.startswith("agentgym/MiniWoB-")]
        success += [success_row(i, seeds) for i in (ids[:2] if quick else ids)]
    doc["rows"] = text + success
    doc["ratios"] = ratios
    doc["goals"] = {
        "text_steps_per_s": GOAL_TEXT_STEPS_PER_S,
        "browser_steps_per_s": GOAL_BROWSER_STEPS_PER_S,
        "miniwob_step_ratio": GOAL_MINIWOB_RATIO,
    }
    _print(console, doc)
    return doc


def _print(console: Console, doc: dict[str, Any]) -> None:
    table = Table(
        *("env", "episodes", "text st/s", "text st/CPU s", "text reset ms"),
        *("menu st/s", "menu st/CPU s", "menu reset ms"),
        title=f"Shop, text mode (goal: ≥{GOAL_TEXT_STEPS_PER_S:g} steps/s on Small; medians of "
        "alternating runs over the same oracle and random episodes)",
    )
    for r in doc["text"]:
        cells = [f"{r[f'{form}_{k}']:,}" for form in ("text", "menu")
                 for k in ("steps_per_s", "steps_per_cpu_s", "reset_ms")]  # fmt: skip
        table.add_row(r["env"], str(r["episodes"]), *cells)
    console.print(table)
    if "browser" in doc:
        b = doc["browser"]
        browser = Table(
            *("agent", "browser st/s", "text st/s", "slowdown", "reset ms"),
            title=f"Shop, browser mode (goal: ≥{GOAL_BROWSER_STEPS_PER_S:g} steps/s); browser "
            f"start {b['browser_start_s']:.2f} s, {b['browser_processes']} processes, "
            f"{b['browser_pss_mb']:,.0f} MB PSS ({b['browser_rss_mb']:,.0f} MB RSS)",
        )
        for agent in ("oracle", "random"):
            a = b[agent]
            browser.add_row(
                agent, f"{a['steps_per_s']:.1f}", f"{a['text_steps_per_s']:,.0f}",
                f"{a['slowdown']:.0f}×", f"{a['reset_ms']:.0f}",
            )  # fmt: skip
        console.print(browser)
    if "miniwob" in doc:
        m = Table(
            *("task", "ours ms/step", "miniwob ms/step", "no screenshots", "ours / no shots"),
            *("ours reset ms", "miniwob reset ms"),
            title=f"MiniWoB++ against the miniwob package's env (goal: ≤{GOAL_MINIWOB_RATIO:g}×; "
            "same tasks and actions, alternating runs)",
        )
        for r in doc["miniwob"]["rows"]:
            step, reset = r["step_ms"], r["reset_ms"]
            m.add_row(
                r["task"], f"{step['agentgym']:.1f}", f"{step['miniwob']:.1f}",
                f"{step['miniwob_noshot']:.1f}", f"{r['step_ratio_vs_miniwob_noshot']:.2f}",
                f"{reset['agentgym']:.0f}", f"{reset['miniwob']:.0f}",
            )  # fmt: skip
        console.print(m)
    success = Table("env", "seeds", "oracle", "random", title="Success over test seeds")
    for r in doc["success"]:
        oracle = "no oracle" if r["oracle_success"] is None else f"{r['oracle_success']:.0%}"
        success.add_row(r["env"], str(r["seeds"]), oracle, f"{r['random_success']:.0%}")
    console.print(success)
