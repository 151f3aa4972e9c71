"""The envs of one Ray actor (``agentgym train --backend ray``), driven by calls in batches.

Kept apart from the trainer so that an actor process imports agentgym's envs only, not torch:
the driver (:mod:`agentgym.baselines.ray_pool`) holds the policy.
"""

from __future__ import annotations

import importlib
import secrets
from collections.abc import Callable
from typing import Any

from agentgym.harness.worker import make_env

__all__ = ["EnvActor", "apply_call"]


class EnvActor:
    """The envs of one actor (run as a Ray actor; plain Python here so it can be tested)."""

    def __init__(
        self,
        env_id: str,
        env_url: str | None,
        kwargs: dict[str, Any],
        wrapper: str | None = None,
    ):
        """No env yet; they are made on first use, like the pool's.

        ``wrapper``: ``"module:callable"`` applied to each env made (a gymnasium wrapper).
        """
        self.env_id, self.env_url, self.kwargs = env_id, env_url, dict(kwargs)
        self.wrapper = _import(wrapper) if wrapper else None
        self.incarnation = secrets.token_hex(8)  # a restarted actor has another
        self.envs: dict[int, Any] = {}

    def ping(self) -> str:
        """This actor's incarnation."""
        return self.incarnation

    def _env(self, index: int) -> Any:
        env = self.envs.get(index)
        if env is None:
            env = make_env(self.env_id, self.env_url, **self.kwargs)
            self.envs[index] = env = self.wrapper(env) if self.wrapper else env
        return env

    def run(self, items: list[tuple[int, str, tuple[Any, ...], list[Any] | None]]) -> Any:
        """Run ``(env index, call, args, replay)`` items in order.

        ``replay``, when given, is the env's log of changing calls to play first (on a fresh
        env: the actor restarted). Returns this actor's incarnation and, per item,
        ``("ok", result)`` or ``("error", exception)``.
        """
        out: list[tuple[str, Any]] = []
        for index, call, args, replay in items:
            try:
                env = self._env(index)
                for old_call, old_args in replay or ():
                    apply_call(env, old_call, old_args)
                out.append(("ok", apply_call(env, call, args)))
            except Exception as e:  # the driver raises it where the env was called
                out.append(("error", e))
        return self.incarnation, out

    def close(self) -> None:
        """Close every env."""
        for env in self.envs.values():
            env.close()
        self.envs.clear()


def apply_call(env: Any, call: str, args: tuple[Any, ...]) -> Any:
    """One call on an env: the gymnasium API, the env's own methods, or an attribute."""
    base = env.unwrapped
    if call == "reset":
        seed, options = args
        return env.reset(seed=seed, options=options)
    if call == "step":
        return env.step(args[0])
    if call == "snapshot_step":  # the state the step acts from, then the step
        return base.snapshot(), env.step(args[0])
    if call == "getattr":
        value = getattr(base, args[0])
        return ("method", None) if callable(value) else ("value", value)
    return getattr(base, call)(*args)


def _import(path: str) -> Callable[[Any], Any]:
    """The callable ``"module:name"`` names."""
    module, _, name = path.partition(":")
    fn: Callable[[Any], Any] = getattr(importlib.import_module(module), name)
    return fn
