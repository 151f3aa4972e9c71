"""Transcripts: the byte form of an episode that determinism checks compare."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentgym.agents.builtin import RandomAgent
from agentgym.core.canonical import canonical as canonical  # re-exported for the checks
from agentgym.core.canonical import jsonable as jsonable
from agentgym.registry import make

# Actions no environment may raise on; each must come back with action_valid False.
ADVERSARIAL_ACTIONS: tuple[tuple[str, Any], ...] = (
    ("empty", ""),
    ("whitespace", " \t\n  "),
    ("one megabyte", "x" * (1 << 20)),
    ("control characters", "\x00\x01\x1b[31m\x7f\r"),
    ("mixed scripts", "답변 ответ 答え جواب ✓ \u202e"),
    ("unbalanced tags", "<answer><search>query</answer"),
    ("json garbage", '{"name": [1, 2, {"x": }'),
    ("out of range", 10**9),
    ("negative", -1),
    ("float", 1.5),
    ("none", None),
)


def continue_canonical(env: Any, actions: Sequence[Any]) -> list[bytes]:
    """Step ``actions`` on a started ``env`` until the episode ends.

    Returns:
        The canonical bytes of each step's ``(obs, reward, terminated, truncated, info)``
        (to compare two envs' futures).
    """
    out = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append(canonical([obs, reward, terminated, truncated, info]))
        if terminated or truncated:
            break
    return out


def transcript(
    env_id: str, seed: int, steps: int = 40, env_kwargs: dict[str, Any] | None = None
) -> bytes:
    """Play ``steps`` turns of seeded random actions and return the exchange as canonical JSON.

    Some actions come from the action space and may be invalid; an episode that ends is
    followed by a reset with the next seed. The whole exchange is returned as canonical JSON
    lines.
    """
    env = make(env_id, **(env_kwargs or {}))
    agent, rng = RandomAgent(), np.random.default_rng(seed)
    env.action_space.seed(seed)
    lines = []
    obs, info = env.reset(seed=seed)
    agent.reset(env_id, seed)
    lines.append(canonical(["reset", seed, obs, info]))
    episode = 0
    for _ in range(steps):
        use_space = rng.random() < 0.25
        action = env.action_space.sample() if use_space else agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        lines.append(canonical(["step", action, obs, reward, terminated, truncated, info]))
        if terminated or truncated:
            episode += 1
            obs, info = env.reset(seed=seed + episode)
            lines.append(canonical(["reset", seed + episode, obs, info]))
    env.close()
    return b"\n".join(lines)


def transcript_digest(
    env_id: str, seed: int, steps: int = 40, env_kwargs: dict[str, Any] | None = None
) -> str:
    """sha256 of :func:`transcript` (printed by the cross-process check's child)."""
    return hashlib.sha256(transcript(env_id, seed, steps, env_kwargs)).hexdigest()
