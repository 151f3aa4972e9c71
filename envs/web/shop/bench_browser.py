"""How fast the shop's browser mode is: steps per second, reset time, browser start, memory.

``bench_browser(steps)`` plays oracle and random episodes on one browser env (and the same
episodes in the text mode, for the ratio) and returns JSON-able numbers; ``agentgym bench
web`` shows them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from agentgym.agents.builtin import OracleAgent, RandomAgent
from agentgym.envs.web.shop.browser_env import BrowserShopEnv
from agentgym.envs.web.shop.env import ShopEnv

Agent = Any


def _play(env: ShopEnv, make_agent: Callable[[], Agent], steps: int, seed: int) -> dict[str, Any]:
    """Play episodes from ``seed`` on until ``steps`` steps are taken; time steps and resets."""
    step_s, resets, taken, episode = 0.0, [], 0, 0
    while taken < steps:
        agent = make_agent()
        t0 = time.perf_counter()
        obs, info = env.reset(seed=seed + episode)
        resets.append(time.perf_counter() - t0)
        agent.reset("bench", seed + episode)
        if hasattr(agent, "bind"):
            agent.bind(env)
        done = False
        while not done and taken < steps:
            action = agent.act(obs, info)
            t0 = time.perf_counter()
            obs, _, terminated, truncated, info = env.step(action)
            step_s += time.perf_counter() - t0
            taken += 1
            done = terminated or truncated
        episode += 1
    return {
        "steps": taken,
        "episodes": episode,
        "steps_per_s": round(taken / step_s, 2) if step_s else 0.0,
        "reset_ms": round(1000 * statistics.median(resets), 2),
    }


def bench_browser(steps: int = 200, *, preset: str = "small", seed: int = 0) -> dict[str, Any]:
    """Measure the browser mode of the shop on ``preset``.

    Args:
        steps: steps per agent (oracle, then random), over as many episodes as it takes.
        preset: the catalogue (``small`` or ``large``).
        seed: the first episode's seed; episode ``k`` uses ``seed + k`` (test split).

    Returns:
        ``browser_start_s`` (Chromium and its driver), ``first_page_s`` (the first reset
        after the start: the site's first page), then per agent (``oracle``, ``random``) the
        browser mode's ``steps_per_s`` and median ``reset_ms``, the text mode's
        ``text_steps_per_s`` on the same episodes and their ratio ``slowdown``; and the
        browser's memory: ``browser_processes``, ``browser_rss_mb`` (summed RSS, counting
        shared pages once per process) and ``browser_pss_mb`` (proportional set size: what
        one more browser costs).
    """
    env = BrowserShopEnv(preset=preset, split="test")
    text = ShopEnv(preset=preset, split="test")
    try:
        env.task_ids()  # build the catalogue outside the timings
        t0 = time.perf_counter()
        env.browser.start()
        start_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        env.reset(seed=seed)
        first_s = time.perf_counter() - t0
        out: dict[str, Any] = {
            "preset": preset,
            "browser_start_s": round(start_s, 3),
            "first_page_s": round(first_s, 3),
        }
        for name, make_agent in (("oracle", OracleAgent), ("random", RandomAgent)):
            browser = _play(env, make_agent, steps, seed)
            plain = _play(text, make_agent, steps, seed)
            browser["text_steps_per_s"] = plain["steps_per_s"]
            browser["slowdown"] = round(plain["steps_per_s"] / max(browser["steps_per_s"], 1e-9), 1)
            out[name] = browser
        pids = env.browser.pids()
        memory = env.browser.memory()
        out["browser_processes"] = len(pids)
        out["browser_rss_mb"] = round(memory["rss"] / 2**20, 1)
        out["browser_pss_mb"] = round(memory["pss"] / 2**20, 1)
        return out
    finally:
        env.close()
        text.close()
