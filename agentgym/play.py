"""``agentgym play``: a person plays an episode in the terminal."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from agentgym.registry import make


def play_episode(
    env_id: str,
    *,
    seed: int = 0,
    split: str = "train",
    env_kwargs: dict[str, Any] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> float:
    """Show each observation, read one action per line, until the episode ends or input does.

    A line of digits chooses that menu item; anything else is sent as the action's text.
    Returns the episode's return.
    """
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    env = make(env_id, split=split, render_mode="ansi", **(env_kwargs or {}))
    obs, info = env.reset(seed=seed)
    total = 0.0
    stdout.write(f"{env_id}, seed {seed}, task {info['task_id']} ({info['task_type']})\n")
    while True:
        stdout.write(f"\n{obs}\n> ")
        stdout.flush()
        line = stdin.readline()
        if not line:
            stdout.write("\n(input ended)\n")
            break
        obs, reward, terminated, truncated, info = env.step(line.rstrip("\n"))
        total += float(reward)
        if not info["action_valid"]:
            stdout.write("(that action was not valid)\n")
        if terminated or truncated:
            why = "turn limit reached" if truncated else ("you won" if info["won"] else "you lost")
            stdout.write(f"\n{obs}\n\nEpisode over: {why}. Return {total:g}.\n")
            break
    env.close()
    return total
