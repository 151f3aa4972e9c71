"""Rollout envs in Ray actors (``agentgym train --backend ray``): generation stays here.

:class:`RayEnvPool` is an :class:`~agentgym.baselines.rollout.EnvPool` whose envs live in
``actors`` Ray actors (one CPU each, env ``i`` in actor ``i % actors``). The rollout engine
is unchanged: it generates every active rollout's action in one batch on the driver, then
:meth:`RayEnvPool.step_many` sends each actor the steps of its envs in one call, all actors
at once. Everything else an env does (reset, snapshot, restore, set_rng, check_answer, ...)
goes through :class:`ActorEnv`, a stand-in with the env's interface.

Same seed, same batch as the local pool: the envs are deterministic and the policy never
leaves the driver. An actor that dies is restarted by Ray (``max_restarts=-1``), and each of
its envs is brought back to where it was by replaying, from its last reset (or restore),
the calls that changed it (reset with its seed, set_rng, restore, each step's action): the
episodes are re-collected from their seeds, so the batch is still the local one. The
step's metrics count the restarts and the replayed steps.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agentgym.baselines.envpool import EnvPool
from agentgym.core.errors import BadInput
from agentgym.harness.env_actor import EnvActor
from agentgym.harness.runner import ray_session

__all__ = ["ActorEnv", "RayEnvPool"]

_CHANGES = frozenset({"reset", "restore", "set_rng", "step"})
"""The calls that change an env's state (replayed after a restart); the others only read."""


Item = tuple["ActorEnv", str, tuple[Any, ...]]
"""One call to run: the env, the call's name, its arguments."""


class ActorEnv:
    """An env living in a Ray actor, with the interface the rollout engine and the variants use.

    ``unwrapped`` is the stand-in itself; unknown attributes are read from the env.
    """

    def __init__(self, pool: RayEnvPool, actor: int, index: int, spaces: tuple[Any, Any]):
        """The stand-in of env ``index`` of actor ``actor``."""
        self._pool, self._actor, self._index = pool, actor, index
        self.observation_space, self.action_space = spaces
        self.log: list[tuple[str, tuple[Any, ...]]] = []
        """The calls that changed the env since its last reset or restore (the replay)."""
        self.incarnation: str | None = None
        """The actor incarnation that holds this env's state (None: fresh)."""

    @property
    def unwrapped(self) -> ActorEnv:
        """The stand-in itself (the env's own methods are forwarded)."""
        return self

    def call(self, call: str, *args: Any) -> Any:
        """``call`` on the env in its actor."""
        return self._pool.run([(self, call, args)])[0]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """``env.reset`` in the actor."""
        return self.call("reset", seed, options)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """``env.step`` in the actor."""
        return self.call("step", action)

    def snapshot(self) -> bytes:
        """``env.unwrapped.snapshot()`` in the actor."""
        return self.call("snapshot")

    def restore(self, snapshot: bytes) -> None:
        """``env.unwrapped.restore()`` in the actor."""
        self.call("restore", snapshot)

    def set_rng(self, key: int | None) -> None:
        """``env.unwrapped.set_rng()`` in the actor."""
        self.call("set_rng", key)

    def close(self) -> None:
        """Nothing to do: the actor's envs close with the pool."""

    def __getattr__(self, name: str) -> Any:
        """Attributes and methods of the env itself (``split``, ``task_ids``, ...)."""
        if name.startswith("_"):
            raise AttributeError(name)
        kind, value = self.call("getattr", name)
        if kind == "value":
            return value
        return lambda *args: self.call(name, *args)


class RayEnvPool(EnvPool):
    """An env pool whose envs live in Ray actors (see the module docstring).

    Attributes:
        restarts: actor restarts seen so far.
        replayed_steps: env steps replayed to bring envs back after restarts.
    """

    def __init__(
        self,
        env_id: str,
        n: int,
        *,
        actors: int = 2,
        address: str | None = None,
        env_url: str | None = None,
        wrapper: str | None = None,
        restart_timeout_s: float = 120.0,
        start_timeout_s: float = 300.0,
        **env_kwargs: Any,
    ):
        """Start ``actors`` actors and ``n`` envs spread over them.

        The actors run on a local Ray of ``actors`` CPUs, or on the cluster at ``address``.
        ``wrapper`` (``"module:callable"``) wraps each env in its actor (a gymnasium wrapper,
        e.g. the rollout benchmark's step delay).
        """
        if actors < 1:
            raise BadInput(f"--env-actors must be at least 1, got {actors}")
        self.env_id, self.env_url = env_id, env_url or None
        self.env_kwargs = dict(env_kwargs)
        self.restart_timeout_s, self.start_timeout_s = restart_timeout_s, start_timeout_s
        self.restarts = self.replayed_steps = 0
        self._reported = (0, 0)
        self._stack = contextlib.ExitStack()
        ray = self._ray = self._stack.enter_context(ray_session(actors, address))
        remote = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(EnvActor)
        self.actors = [
            remote.remote(env_id, self.env_url, self.env_kwargs, wrapper) for _ in range(actors)
        ]
        self._incarnations: list[str | None] = self._started(actors)
        probe = self.make_env()  # here, for the spaces and abilities the stand-ins report
        self._spaces = (probe.observation_space, probe.action_space)
        self.supports_snapshot = bool(getattr(probe.unwrapped, "supports_snapshot", False))
        probe.close()
        self.envs: list[Any] = []
        self.grow(n)

    def _started(self, actors: int) -> list[str | None]:
        """Each actor's incarnation once all are up; BadInput where Ray cannot place them."""
        try:
            return list(
                self._ray.get([a.ping.remote() for a in self.actors], timeout=self.start_timeout_s)
            )
        except self._ray.exceptions.GetTimeoutError:
            self.close()
            raise BadInput(
                f"{actors} env actors of one CPU each did not start within "
                f"{self.start_timeout_s:g} s: the Ray cluster has fewer free CPUs "
                "(--env-actors fewer, or a larger cluster)"
            ) from None

    def grow(self, n: int) -> None:
        """Make sure the pool holds at least ``n`` envs (env ``i`` in actor ``i % actors``)."""
        while len(self.envs) < n:
            i = len(self.envs)
            self.envs.append(ActorEnv(self, i % len(self.actors), i, self._spaces))

    def step_many(
        self, envs: Sequence[Any], actions: Sequence[Any], snapshots: bool
    ) -> list[tuple[bytes | None, Any]]:
        """Each env's step, one call per actor, all actors at once."""
        call = "snapshot_step" if snapshots else "step"
        pairs = zip(envs, actions, strict=True)
        results = self.run([(env, call, (action,)) for env, action in pairs])
        return [tuple(r) if snapshots else (None, r) for r in results]

    def run(self, items: list[Item]) -> list[Any]:
        """Run ``(env, call, args)`` items, grouped by actor, and return their results in order.

        Raises:
            Exception: what an env raised (the first, in item order).
        """
        results: list[Any] = [None] * len(items)
        todo = list(range(len(items)))
        while todo:
            todo = self._round(items, todo, results)
        for outcome in results:
            if outcome[0] == "error":
                raise outcome[1]
        return [value for _, value in results]

    def _round(self, items: list[Item], todo: list[int], results: list[Any]) -> list[int]:
        """Send the items of ``todo``; the ones to send again (their actor restarted)."""
        by_actor: dict[int, list[int]] = defaultdict(list)
        for i in todo:
            by_actor[items[i][0]._actor].append(i)
        sent = {}
        for a, indices in by_actor.items():
            batch = []
            for i in indices:
                env, call, args = items[i]
                stale = env.incarnation not in (None, self._incarnations[a])
                batch.append((env._index, call, args, env.log if stale else None))
            sent[a] = self.actors[a].run.remote(batch)
        again: list[int] = []
        for a, ref in sent.items():
            try:
                incarnation, outcomes = self._ray.get(ref)
            except self._ray.exceptions.RayActorError:
                self._await_restart(a)
                again += by_actor[a]
                continue
            if incarnation != self._incarnations[a]:  # restarted between our calls
                self._incarnations[a] = incarnation
                self.restarts += 1
                again += by_actor[a]
                continue
            for i, outcome in zip(by_actor[a], outcomes, strict=True):
                env, call, args = items[i]
                if env.incarnation not in (None, incarnation):
                    self.replayed_steps += sum(1 for c, _ in env.log if c == "step")
                env.incarnation = incarnation
                results[i] = outcome
                if outcome[0] == "ok":
                    _note(env, call, args)
        return sorted(again)

    def _await_restart(self, a: int) -> None:
        """Wait for Ray to restart actor ``a``; record its new incarnation."""
        deadline = time.monotonic() + self.restart_timeout_s
        while True:
            try:
                incarnation = self._ray.get(self.actors[a].ping.remote(), timeout=10)
                break
            except Exception as e:  # still restarting (or gone for good)
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"env actor {a} died and did not come back within "
                        f"{self.restart_timeout_s:g} s: {e}"
                    ) from None
                time.sleep(0.2)
        self._incarnations[a] = incarnation
        self.restarts += 1

    def step_metrics(self) -> dict[str, float]:
        """Actor restarts and replayed env steps since the last call (the trainer logs them)."""
        restarts, replayed = self._reported
        self._reported = (self.restarts, self.replayed_steps)
        return {
            "env_restarts": float(self.restarts - restarts),
            "replayed_steps": float(self.replayed_steps - replayed),
        }

    def close(self) -> None:
        """Stop the actors and the Ray this pool started."""
        for actor in getattr(self, "actors", []):
            with contextlib.suppress(Exception):
                self._ray.kill(actor)
        self.actors = []
        self._stack.close()


def _note(env: ActorEnv, call: str, args: tuple[Any, ...]) -> None:
    """Keep a changing call in the env's replay log (a reset or restore starts it afresh)."""
    if call in ("reset", "restore"):
        env.log = [(call, args)]
    elif call == "snapshot_step":
        env.log.append(("step", args))
    elif call in _CHANGES:
        env.log.append((call, args))
