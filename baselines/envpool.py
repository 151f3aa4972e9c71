"""The rollout envs: a pool of one id's instances, made here, on an env service or in Ray.

:class:`EnvPool` holds ``n`` envs the rollout engine steps in lockstep; :func:`rollout_pool`
builds the one a training run asks for (``--backend local|ray``, ``--env-url``), and
:func:`make_env` any other env of the run (warm-start demonstrations, probes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from agentgym.baselines.config import TrainConfig
from agentgym.core.errors import BadInput
from agentgym.harness.worker import make_env as make_here_or_remote

__all__ = ["EnvPool", "env_kwargs", "make_env", "rollout_pool", "step_each"]


class EnvPool:
    """``n`` instances of one env id, reused across training steps.

    With ``env_url`` the instances are agentgym/Remote-v0 envs playing ``env_id`` on that
    env service (``agentgym serve``); their episodes are the local ones.
    """

    def __init__(self, env_id: str, n: int, *, env_url: str | None = None, **env_kwargs: Any):
        """Make the instances (they share the id's world)."""
        self.env_id = env_id
        self.env_url = env_url or None
        self.env_kwargs = dict(env_kwargs)
        self.envs = [self.make_env() for _ in range(n)]
        self.supports_snapshot = bool(getattr(self.envs[0].unwrapped, "supports_snapshot", False))

    def make_env(self, **overrides: Any) -> Any:
        """One more env made like the pool's (``overrides`` replacing its kwargs), not kept."""
        return make_here_or_remote(self.env_id, self.env_url, **{**self.env_kwargs, **overrides})

    def __len__(self) -> int:
        """The number of instances."""
        return len(self.envs)

    def grow(self, n: int) -> None:
        """Make sure the pool holds at least ``n`` instances (made like the first ones)."""
        first: Any = self.envs[0].unwrapped
        while len(self.envs) < n:
            self.envs.append(self.make_env(split=first.split))

    def step_many(
        self, envs: Sequence[Any], actions: Sequence[Any], snapshots: bool
    ) -> list[tuple[bytes | None, Any]]:
        """Step each env with its action (:func:`step_each`).

        A pool whose envs live elsewhere overrides it to send the steps in batches.
        """
        return step_each(envs, actions, snapshots)

    def close(self) -> None:
        """Close every instance."""
        for env in self.envs:
            env.close()


def step_each(
    envs: Sequence[Any], actions: Sequence[Any], snapshots: bool
) -> list[tuple[bytes | None, Any]]:
    """Step each env with its action.

    Returns:
        Per env, the snapshot of the state it acted from (when ``snapshots``, else None) and
        the step's ``(obs, reward, terminated, truncated, info)``.
    """
    out = []
    for env, action in zip(envs, actions, strict=True):
        snap = env.unwrapped.snapshot() if snapshots else None
        out.append((snap, env.step(action)))
    return out


def make_env(cfg: TrainConfig, **kwargs: Any) -> gym.Env[Any, Any]:
    """An env of ``cfg.env`` made with ``kwargs``: here, or on ``cfg.env_url``'s service."""
    return make_here_or_remote(cfg.env, cfg.env_url or None, **kwargs)


def check_pool_options(cfg: TrainConfig) -> None:
    """Refuse (BadInput) a ``--backend`` or ``--env-actors`` the rollout pool cannot use."""
    if cfg.backend not in ("local", "ray"):
        raise BadInput(f"--backend must be local or ray, got {cfg.backend!r}")
    if cfg.env_actors < 1:
        raise BadInput(f"--env-actors must be at least 1, got {cfg.env_actors}")


def rollout_pool(cfg: TrainConfig, size: int, **kwargs: Any) -> EnvPool:
    """The rollout envs: an :class:`EnvPool` here, or in Ray actors with ``--backend ray``."""
    check_pool_options(cfg)
    if cfg.backend == "ray":
        from agentgym.baselines.ray_pool import RayEnvPool

        return RayEnvPool(
            cfg.env,
            size,
            actors=cfg.env_actors,
            address=cfg.address or None,
            env_url=cfg.env_url or None,
            **kwargs,
        )
    return EnvPool(cfg.env, size, env_url=cfg.env_url or None, **kwargs)


def env_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """``cfg.env_kwargs`` parsed: the env's constructor arguments."""
    if not cfg.env_kwargs.strip():
        return {}
    try:
        kwargs = json.loads(cfg.env_kwargs)
    except json.JSONDecodeError as e:
        raise BadInput(f"--env-kwargs is not valid JSON: {e}") from None
    if not isinstance(kwargs, dict):
        raise BadInput("--env-kwargs must be a JSON object, e.g. '{\"menu\": true}'")
    if "split" in kwargs:
        raise BadInput("--env-kwargs may not set split: training uses train, evaluation val")
    return kwargs
