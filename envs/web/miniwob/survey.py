"""Check every task miniwob ships, once: does it run headless here, and is it deterministic?

``python -m agentgym.envs.web.miniwob.survey [--json out.json] [task ...]`` plays each task
(excluded ones included) on a few seeds with seeded random actions (clicks on listed
elements, typing into inputs, Enter, waits) in two browsers; the second pauses a random
real-time while between actions, so anything that depends on the host's clock or speed
shows as a difference between the two transcripts. It prints one JSON row per task. The
:data:`~agentgym.envs.web.miniwob.tasks.EXCLUDED` table was made from its output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentgym.envs.web.miniwob.env import MiniWoBEnv
from agentgym.envs.web.miniwob.page import Page
from agentgym.envs.web.miniwob.tasks import TASKS

SEEDS = (0, 1, 2)
STEPS = 8


def _random_action(rng: np.random.Generator, env: MiniWoBEnv) -> str:
    view = env._current()
    inputs = [el.ref for el in view.listed() if el.tag.startswith(("input_text", "textarea"))]
    u = rng.random()
    if inputs and u < 0.25:
        return f'type({inputs[int(rng.integers(len(inputs)))]}, "ab1")'
    if u < 0.3:
        return 'press("Enter")'
    if u < 0.35 or not view.refs:
        return "wait()"
    return f"click({view.refs[int(rng.integers(len(view.refs)))]})"


def _play(env: MiniWoBEnv, seed: int, pause: np.random.Generator | None) -> list[Any]:
    """One episode of seeded random actions; the transcript as plain data."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    out: list[Any] = [obs, info["state_key"]]
    for _ in range(STEPS):
        if pause is not None:
            time.sleep(float(pause.uniform(0.0, 0.3)))
        obs, reward, term, trunc, info = env.step(_random_action(rng, env))
        out.append([obs, reward, term, info["won"]])
        if term or trunc:
            break
    return out


class _AnyTask(MiniWoBEnv):
    _any_task = True


def survey_task(task: str, pages: Sequence[Page]) -> dict[str, Any]:
    """Play ``task`` in two browsers; its row: ok, deterministic, wins, elements, seconds."""
    start = time.perf_counter()
    row: dict[str, Any] = {"task": task}
    try:
        runs = []
        for k, page in enumerate(pages):
            env = _AnyTask(task)
            env._page = page  # the survey's two browsers serve every task
            pause = np.random.default_rng(99) if k else None
            runs.append([_play(env, seed, pause) for seed in SEEDS])
        row["ok"] = True
        row["deterministic"] = runs[0] == runs[1]
        row["random_wins"] = sum(bool(ep[-1][3]) for ep in runs[0] if len(ep) > 2)
        row["elements"] = max(ep[0].count("\n[") for ep in runs[0])
    except Exception as e:  # the survey records what fails, task by task
        row["ok"] = False
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        traceback.print_exc(file=sys.stderr)
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    """Survey the named tasks (all of miniwob's by default); print one JSON row each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", help="task names (default: all)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    tasks = args.tasks or [t for t in TASKS if not t.startswith("flight.")]
    pages = [Page(), Page()]
    rows = []
    try:
        for task in tasks:
            row = survey_task(task, pages)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        for page in pages:
            page.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
