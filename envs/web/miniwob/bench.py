"""MiniWoB++ speed against miniwob's own gymnasium env, and the oracle's and random success.

For each task, the oracle plays test-split episodes in agentgym's env until ``steps`` steps are
recorded (seeded random clicks where a task has no oracle); then the same episodes (same
miniwob seeds) and the same actions are replayed on both sides, alternating: agentgym's env,
and ``gymnasium.make("miniwob/<task>-v1")`` as it comes (a screenshot every step) and with
screenshots off (``record_screenshots=False``, the like-for-like peer: agentgym takes none).
Only steps are timed; resets are timed on their own, alternating too. Both sides run the same
system Chromium. Speed goals live here: agentgym's step may take at most
:data:`GOAL_STEP_RATIO` times miniwob's (without screenshots).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from agentgym.agents.builtin import RandomAgent
from agentgym.core.timing import Sample, Stopwatch, alternate
from agentgym.envs.web.miniwob import env_id
from agentgym.envs.web.miniwob.actions import Action, parse
from agentgym.envs.web.miniwob.env import MiniWoBEnv, seed_of
from agentgym.envs.web.miniwob.page import browser_environ
from agentgym.registry import make

DEFAULT_TASKS = ("click-button", "click-checkboxes", "enter-text", "login-user", "click-tab")
GOAL_STEP_RATIO = 1.2
Episode = tuple[str, list[str]]


def _record(env: MiniWoBEnv, steps: int) -> list[Episode]:
    """Test-split episodes of the oracle (seeded random clicks without one): ``steps`` steps."""
    episodes: list[Episode] = []
    total, agent = 0, RandomAgent()
    for task_id in env.task_ids("test"):
        obs, info = env.reset(options={"task_id": task_id})
        agent.reset("", seed_of(task_id))
        actions = []
        while total < steps:
            action = env.oracle_action() if env.has_oracle else agent.act(obs, info)
            actions.append(action)
            total += 1
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        episodes.append((task_id, actions))
        if total >= steps:
            return episodes
    return episodes


def _miniwob_action(peer: Any, action: Action) -> dict[str, Any]:
    """The same action in miniwob's action space."""
    from miniwob.action import ActionTypes

    base = peer.unwrapped
    if action.kind == "click":
        return base.create_action(ActionTypes.CLICK_ELEMENT, ref=action.ref)
    if action.kind == "type":
        kind = ActionTypes.FOCUS_ELEMENT_AND_TYPE_TEXT
        return base.create_action(kind, ref=action.ref, text=action.arg)
    if action.kind == "press":
        key = base.action_space_config.allowed_keys.index(action.arg)
        return base.create_action(ActionTypes.PRESS_KEY, key=key)
    return base.create_action(ActionTypes.NONE)


def _ours(env: MiniWoBEnv, episodes: list[Episode]) -> Callable[[], Sample]:
    def play() -> Sample:
        watch = Stopwatch()
        for task_id, actions in episodes:
            env.reset(options={"task_id": task_id})
            for action in actions:
                with watch:
                    env.step(action)
        return watch.sample

    return play


def _peer(peer: Any, episodes: list[Episode], screenshots: bool) -> Callable[[], Sample]:
    plans = [
        (seed_of(t), [_miniwob_action(peer, _parsed(a)) for a in acts]) for t, acts in episodes
    ]

    def play() -> Sample:
        watch = Stopwatch()
        for seed, actions in plans:
            peer.reset(seed=seed, options={"record_screenshots": screenshots})
            for action in actions:
                with watch:
                    peer.step(action)
        return watch.sample

    return play


def _parsed(action: str) -> Action:
    parsed, error = parse(action)
    if parsed is None:
        raise ValueError(f"the recorded action {action!r} does not parse: {error}")
    return parsed


def _resets(env: MiniWoBEnv, peer: Any, episodes: list[Episode], repeats: int) -> Any:
    def ours() -> None:
        for task_id, _ in episodes:
            env.reset(options={"task_id": task_id})

    def theirs() -> None:
        for task_id, _ in episodes:
            peer.reset(seed=seed_of(task_id), options={"record_screenshots": False})

    return alternate({"agentgym": ours, "miniwob": theirs}, repeats=repeats, warmup=1)


def success(task: str, agent: str, seeds: int) -> float:
    """The mean of ``won`` over the first ``seeds`` test-split tasks (``oracle`` or ``random``)."""
    env: Any = make(env_id(task), split="test")
    base: MiniWoBEnv = env.unwrapped
    wins, rng_agent = 0, RandomAgent()
    for task_id in base.task_ids("test")[:seeds]:
        obs, info = env.reset(options={"task_id": task_id})
        rng_agent.reset(env_id(task), seed_of(task_id))
        while True:
            action = base.oracle_action() if agent == "oracle" else rng_agent.act(obs, info)
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                wins += bool(info["won"])
                break
    env.close()
    return wins / seeds


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables for the ``with`` block, then restore them."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def task_row(task: str, steps: int, seeds: int, repeats: int) -> dict[str, Any]:
    """One task's row: step and reset latency of both sides, oracle and random success."""
    import gymnasium as gym

    browser_environ()
    import miniwob

    gym.register_envs(miniwob)
    env: Any = make(env_id(task), split="test")
    base: MiniWoBEnv = env.unwrapped
    episodes = _record(base, steps)
    home = tempfile.mkdtemp(prefix="agentgym-miniwob-peer-")
    with _environ(XDG_CONFIG_HOME=f"{home}/config", XDG_CACHE_HOME=f"{home}/cache"):
        # miniwob's driver inherits these: its Chromium keeps crash reports out of $HOME
        peer = gym.make(f"miniwob/{task}-v1")
    try:
        timed = alternate(
            {
                "agentgym": _ours(base, episodes),
                "miniwob": _peer(peer, episodes, screenshots=True),
                "miniwob_noshot": _peer(peer, episodes, screenshots=False),
            },
            repeats=repeats,
            warmup=1,
        )
        resets = _resets(base, peer, episodes, repeats)
    finally:
        peer.close()
        env.close()
        shutil.rmtree(home, ignore_errors=True)
    n = sum(len(a) for _, a in episodes)
    return {
        "task": task,
        "env": env_id(task),
        "episodes": len(episodes),
        "steps": n,
        "repeats": repeats,
        "step_ms": {side: row["wall_ms"] for side, row in timed.summary(n, "ms").items()},
        "step_ratio_vs_miniwob_noshot": round(timed.ratio("agentgym", "miniwob_noshot"), 4),
        "step_ratio_vs_miniwob": round(timed.ratio("agentgym", "miniwob"), 4),
        "step_ratio_range_vs_miniwob_noshot": [
            round(x, 4) for x in timed.ratio_range("agentgym", "miniwob_noshot")
        ],
        "reset_ms": {
            side: row["wall_ms"] for side, row in resets.summary(len(episodes), "ms").items()
        },
        "oracle_success": success(task, "oracle", seeds) if base.has_oracle else None,
        "random_success": success(task, "random", seeds),
        "seeds": seeds,
        "timing_ms_per_step": timed.summary(n, "ms"),
    }


def bench_miniwob(
    tasks: Sequence[str] = DEFAULT_TASKS, steps: int = 40, *, seeds: int = 20, repeats: int = 3
) -> dict[str, Any]:
    """Rows per task and the overall step ratio against miniwob's own env (JSON-able).

    Args:
        tasks: miniwob task names (``click-button``); each must have an id.
        steps: oracle steps recorded per task (whole episodes; the last one may be cut).
        seeds: test-split tasks per id for the oracle's and the random agent's success.
        repeats: timed rounds per side (after one warm-up round), alternating.

    Returns:
        ``{"rows": [...], "ratios": {...}, "goal": {...}}``: ``ratios`` holds the median over
        tasks of agentgym's step time divided by miniwob's, without and with screenshots.
    """
    rows = [task_row(task, steps, seeds, repeats) for task in tasks]
    noshot = [r["step_ratio_vs_miniwob_noshot"] for r in rows]
    shot = [r["step_ratio_vs_miniwob"] for r in rows]
    ratios = {
        "miniwob_step_vs_miniwob_noshot": float(np.median(noshot)) if rows else float("nan"),
        "miniwob_step_vs_miniwob": float(np.median(shot)) if rows else float("nan"),
    }
    return {
        "rows": rows,
        "ratios": ratios,
        "goal": {
            "step_ratio_at_most": GOAL_STEP_RATIO,
            "met": bool(rows) and ratios["miniwob_step_vs_miniwob_noshot"] <= GOAL_STEP_RATIO,
        },
    }
