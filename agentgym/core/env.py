"""``AgentEnv``: the base class of every agentgym environment.

The base class owns the episode mechanics shared by all families (task choice from a split,
the turn limit, step ordering, privileged keys, snapshots, pickling, per-turn randomness);
a family implements the problem through a handful of ``_``-prefixed hooks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

import gymnasium as gym
import numpy as np

from agentgym.core.canonical import canonical
from agentgym.core.errors import BadInput, ResetNeeded, SnapshotMismatch

SPLITS = ("train", "val", "test")
SNAPSHOT_FORMAT = 1

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")


class Transition(NamedTuple):
    """What a family's ``_apply`` returns; the base class adds truncation and common keys."""

    observation: Any
    reward: float
    terminated: bool
    info: dict[str, Any]


class AgentEnv(gym.Env[ObsT, ActT], Generic[ObsT, ActT]):
    """A multi-turn agent environment.

    Contract (on top of ``gymnasium.Env``):

    * ``reset(seed=s)`` picks a task of the env's split with the env's generator seeded by ``s``;
      ``reset(options={"task_id": t})`` picks task ``t`` directly (any split).
    * ``step`` never raises on a bad action: the action costs a turn, the observation says what
      was wrong and ``info["action_valid"]`` is False. ``step`` before ``reset`` or after the
      episode ended raises :class:`ResetNeeded`.
    * The turn limit is enforced here (``truncated=True``), so a snapshot carries it.
    * ``info`` holds the standard keys of :mod:`agentgym.core.info`; privileged keys only when
      made with ``privileged=True``.
    * ``snapshot()`` / ``restore()`` and pickling reproduce the continuation exactly, in any
      process, on any fresh instance of the same id.

    Subclasses implement ``task_ids``, ``task_type_of``, ``_start``, ``_apply``,
    ``_get_state``, ``_set_state``, ``_config``, ``oracle_action`` and, where a gold answer
    exists, ``check_answer`` and ``_privileged_info``.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012
    family: ClassVar[str] = ""
    domain: ClassVar[str] = ""
    supports_snapshot: ClassVar[bool] = True
    default_max_turns: ClassVar[int] = 20
    has_oracle: bool = True
    """Whether ``oracle_action`` exists; an env that wraps tasks without a scripted solver
    sets it False (``oracle_action`` then raises NotImplementedError, and the checker skips
    its oracle check)."""
    forwards_kwargs: ClassVar[bool] = False
    """Whether the constructor passes unknown keyword arguments on to another env (a remote
    one, which checks them itself); :func:`agentgym.registry.make` then leaves them alone."""

    def __new__(cls, *args: Any, **kwargs: Any) -> AgentEnv[Any, Any]:
        """Create the instance and keep its constructor arguments (pickling rebuilds it)."""
        # Remember the constructor's arguments so that pickling can rebuild the instance.
        obj = super().__new__(cls)
        obj._init_args = (args, dict(kwargs))
        return obj

    def __init__(
        self,
        *,
        split: str = "train",
        privileged: bool = False,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ):
        """Set the options every family shares.

        Args:
            split: which task range ``reset(seed=...)`` draws from: train, val or test.
            privileged: add the privileged keys (gold answer, evidence, hints) to ``info``;
                for teachers and probes only, never for evaluation.
            max_turns: turn limit (``truncated=True`` when reached); the family default if None.
            render_mode: None or "ansi" (``render()`` returns the last observation).
        """
        if split not in SPLITS:
            raise BadInput(f"unknown split {split!r}: choose one of {', '.join(SPLITS)}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise BadInput(f"unsupported render_mode {render_mode!r}: use None or 'ansi'")
        if max_turns is not None and max_turns < 1:
            raise BadInput(f"max_turns must be at least 1, got {max_turns}")
        self.split = split
        self.privileged = bool(privileged)
        self.max_turns = int(max_turns or self.default_max_turns)
        self.render_mode = render_mode
        self._task_id: str | None = None
        self._reset_seed: int | None = None
        self._turn = 0
        self._done = False
        self._turn_key: int | None = None
        self._last_obs: Any = None

    # ------------------------------------------------------------------ hooks for families
    def task_ids(self, split: str | None = None) -> Sequence[str]:
        """The task ids of ``split`` (the env's own split if None), in a fixed order."""
        raise NotImplementedError

    def task_type_of(self, task_id: str) -> str:
        """The task type of ``task_id``."""
        raise NotImplementedError

    def _start(self, task_id: str) -> tuple[Any, dict[str, Any]]:
        """Set up ``task_id``; return the first observation and the family's info keys."""
        raise NotImplementedError

    def _apply(self, action: Any) -> Transition:
        """Apply one action (never raising on a bad one)."""
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        """The family's episode state as JSON-able data."""
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``_get_state`` returned."""
        raise NotImplementedError

    def _config(self) -> dict[str, Any]:
        """JSON-able configuration that fixes the world; snapshots restore only into equal ones."""
        return {}

    @property
    def data_hash(self) -> str:
        """sha256 of the data that fixes this id's world (its configuration by default)."""
        blob = json.dumps(self._identity(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()

    def _privileged_info(self) -> dict[str, Any]:
        """The privileged keys for the current task (added only under ``privileged=True``)."""
        return {}

    def oracle_action(self) -> ActT:
        """The scripted expert's next action from the current state (a public action)."""
        raise NotImplementedError

    def check_answer(self, text: str) -> float:
        """Score a (possibly partial) answer against the gold answer, in [0, 1]."""
        raise NotImplementedError(f"{type(self).__name__} has no gold answer")

    @classmethod
    def registry_note(cls, **kwargs: Any) -> str:
        """The line ``agentgym envs`` shows beside the id made with ``kwargs``; "" for none.

        For example, how many entries of an official set were excluded and why.
        """
        return ""

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsT, dict[str, Any]]:
        """Start an episode; see the class docstring for how the task is chosen."""
        super().reset(seed=seed)
        options = dict(options or {})
        task_id = options.pop("task_id", None)
        if options:
            raise BadInput(f"unknown reset options {sorted(options)}: only 'task_id' is accepted")
        if task_id is None:
            tasks = self.task_ids()
            task_id = tasks[int(self.np_random.integers(len(tasks)))]
        elif not self._has_task(task_id):
            raise BadInput(f"unknown task_id {task_id!r} for {type(self).__name__}")
        self._task_id = str(task_id)
        self._reset_seed = seed
        self._turn = 0
        self._done = False
        obs, info = self._start(self._task_id)
        self._last_obs = obs
        return obs, self._complete_info(info)

    def step(self, action: ActT) -> tuple[ObsT, float, bool, bool, dict[str, Any]]:
        """Apply ``action``; a bad action is an observation, never an exception."""
        if self._task_id is None or self._done:
            raise ResetNeeded("call reset() before step(): the episode has not started or is over")
        self._turn += 1
        obs, reward, terminated, info = self._apply(action)
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        self._last_obs = obs
        return obs, float(reward), bool(terminated), bool(truncated), self._complete_info(info)

    def render(self) -> Any:
        """The last observation (render_mode "ansi"), else None."""
        return self._last_obs if self.render_mode == "ansi" else None

    def _has_task(self, task_id: str) -> bool:
        return any(task_id in self.task_ids(s) for s in SPLITS)

    def _complete_info(self, info: dict[str, Any]) -> dict[str, Any]:
        assert self._task_id is not None
        info["task_id"] = self._task_id
        info["task_type"] = self.task_type_of(self._task_id)
        info["domain"] = self.domain
        if self.privileged:
            info.update(self._privileged_info())
        return info

    # ------------------------------------------------------------------ episode properties
    @property
    def task_id(self) -> str | None:
        """The current task's id (None before the first reset)."""
        return self._task_id

    @property
    def turn(self) -> int:
        """Turns taken in the current episode."""
        return self._turn

    @property
    def done(self) -> bool:
        """Whether the current episode has terminated or been truncated."""
        return self._done

    # ------------------------------------------------------------------ env-side randomness
    def set_rng(self, key: int | None) -> None:
        """Key the env-side randomness drawn per turn (twin rollouts share a key).

        After ``set_rng(k)``, the generator of turn ``t`` is seeded by ``(k, t)`` alone, so two
        envs with the same key draw the same noise at the same turn whatever happened before.
        ``None`` returns to the generator seeded by ``reset``.
        """
        self._turn_key = None if key is None else int(key)

    def turn_rng(self) -> np.random.Generator:
        """The generator a family uses for randomness drawn during the current turn."""
        if self._turn_key is None:
            return self.np_random
        return np.random.default_rng([self._turn_key, self._turn])

    # ------------------------------------------------------------------ snapshots
    def _identity(self) -> dict[str, Any]:
        cls = type(self)
        return {"class": f"{cls.__module__}:{cls.__qualname__}", "config": self._config()}

    def snapshot(self) -> bytes:
        """The whole episode state as bytes; ``restore`` it on any fresh instance of this id."""
        if not self.supports_snapshot:
            raise NotImplementedError(f"{type(self).__name__} does not support snapshots")
        if self._task_id is None:
            raise ResetNeeded("snapshot() needs a started episode: call reset() first")
        state = {
            "format": SNAPSHOT_FORMAT,
            "env": self._identity(),
            "task_id": self._task_id,
            "reset_seed": self._reset_seed,
            "turn": self._turn,
            "done": self._done,
            "max_turns": self.max_turns,
            "turn_key": self._turn_key,
            "rng": self.np_random.bit_generator.state,
            "last_obs": self._last_obs,
            "state": self._get_state(),
        }
        return canonical(state)

    def restore(self, snapshot: bytes) -> None:
        """Continue from ``snapshot`` (made by ``snapshot()`` on an env of the same id)."""
        try:
            state = json.loads(snapshot)
        except (ValueError, TypeError) as e:
            raise SnapshotMismatch(f"not an agentgym snapshot: {e}") from e
        if not isinstance(state, dict) or state.get("format") != SNAPSHOT_FORMAT:
            raise SnapshotMismatch("not an agentgym snapshot of a known format")
        if state["env"] != self._identity():
            raise SnapshotMismatch(
                f"snapshot of {state['env']} cannot restore into {self._identity()}"
            )
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = state["rng"]
        self._np_random = rng
        self._task_id = state["task_id"]
        self._reset_seed = state["reset_seed"]
        self._turn = state["turn"]
        self._done = state["done"]
        self.max_turns = state["max_turns"]
        self._turn_key = state["turn_key"]
        self._last_obs = state["last_obs"]
        self._set_state(state["state"])

    def __getstate__(self) -> dict[str, Any]:
        """The pickled form: constructor arguments and, once started, the snapshot."""
        started = self._task_id is not None
        return {
            "init": self._init_args,
            "spec": self.spec,
            "snapshot": self.snapshot() if started else None,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild from :meth:`__getstate__`'s form (restoring the snapshot, if any)."""
        args, kwargs = state["init"]
        self._init_args = (args, kwargs)
        # rebuilding by re-running the constructor is the point; mypy forbids calling __init__
        self.__init__(*args, **kwargs)  # type: ignore[misc]
        self.spec = state["spec"]
        if state["snapshot"] is not None:
            self.restore(state["snapshot"])
