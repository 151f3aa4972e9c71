"""What a harness worker runs: units of episodes, on envs it keeps between units.

A unit is one run (its M episodes) of one env. Every backend plays units with
:func:`iter_unit`, and an episode's record depends only on (env, agent, seed), so the
backends give identical records except ``seconds``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentgym.agents import load_agent
from agentgym.core.env import AgentEnv
from agentgym.harness.episode import run_episode
from agentgym.harness.results import EpisodeRecord
from agentgym.registry import make


@dataclass(frozen=True)
class Unit:
    """One run of one env: the episodes (index, seed) still to play."""

    env_id: str
    run: int
    episodes: tuple[tuple[int, int], ...]
    agent_spec: str
    split: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    transcripts: bool = False
    env_url: str | None = None
    """An env service (``agentgym serve``) to play the env on, through agentgym/Remote-v0."""
    agent_options: dict[str, Any] = field(default_factory=dict)
    """Settings for the agent (:func:`agentgym.agents.load_agent`)."""


Outcome = tuple[EpisodeRecord, list[Any] | None]
"""What a worker returns per episode: its record and, if asked, its transcript."""


class EnvCache:
    """The envs a worker has built, one per (id, split, kwargs), kept until :meth:`close`.

    Only an :class:`~agentgym.core.env.AgentEnv` is kept: its ``reset(seed=...)`` restarts
    from the seed alone (the env contract), so a reused one plays the same episode as a fresh
    one. Any other env is built for one unit and closed after it, as without a cache.
    """

    def __init__(self) -> None:
        """An empty cache."""
        self._envs: dict[tuple[str, str, str], gym.Env[Any, Any]] = {}

    def __len__(self) -> int:
        """How many envs are kept."""
        return len(self._envs)

    @contextlib.contextmanager
    def lease(
        self, env_id: str, split: str, kwargs: dict[str, Any], env_url: str | None = None
    ) -> Iterator[gym.Env[Any, Any]]:
        """The env for a unit: the kept one, or a new one (kept if it is an AgentEnv).

        Yields:
            The env, its per-turn key cleared as in a fresh env.
        """
        key = (env_id, split, json.dumps([kwargs, env_url], sort_keys=True, default=repr))
        env = self._envs.get(key)
        if env is not None:
            env.unwrapped.set_rng(None)  # type: ignore[attr-defined]  # an agent may have keyed it
            yield env
            return
        env = make_env(env_id, env_url, split=split, **kwargs)
        if isinstance(env.unwrapped, AgentEnv):
            self._envs[key] = env
            yield env
            return
        try:
            yield env
        finally:
            env.close()

    def close(self) -> None:
        """Close every kept env."""
        envs, self._envs = list(self._envs.values()), {}
        for env in envs:
            env.close()


def make_env(env_id: str, env_url: str | None = None, **kwargs: Any) -> gym.Env[Any, Any]:
    """``env_id`` made here, or played on the env service at ``env_url`` (Remote-v0)."""
    if env_url:
        return make("agentgym/Remote-v0", url=env_url, env_id=env_id, **kwargs)
    return make(env_id, **kwargs)


def run_unit(unit: Unit) -> list[Outcome]:
    """Play a unit's episodes with a fresh env and agent (the function a Ray task runs)."""
    return list(iter_unit(unit))


def iter_unit(unit: Unit, envs: EnvCache | None = None) -> Iterator[Outcome]:
    """Play a unit's episodes one by one, yielding each as it ends.

    Args:
        unit: the episodes to play.
        envs: where the env comes from and stays; None: a fresh env, closed after the unit.

    Yields:
        One outcome per episode, in the unit's order. The agent is always built fresh.
    """
    cache = envs if envs is not None else EnvCache()
    try:
        with cache.lease(unit.env_id, unit.split, unit.env_kwargs, unit.env_url) as env:
            agent = load_agent(unit.agent_spec, unit.agent_options)
            for episode, seed in unit.episodes:
                steps: list[Any] | None = [] if unit.transcripts else None
                record = run_episode(
                    env,
                    agent,
                    env_id=unit.env_id,
                    run=unit.run,
                    episode=episode,
                    seed=seed,
                    transcript=steps,
                )
                yield record, steps
    finally:
        if envs is None:
            cache.close()
