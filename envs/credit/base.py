"""The credit family's base class: env mechanics around an MDP whose values are known exactly.

A family describes its task once as a finite MDP (:meth:`CreditEnv._actions`,
:meth:`CreditEnv._outcomes`) and separately implements the real dynamics
(:meth:`CreditEnv._transition`, which draws noise from ``turn_rng()``); the tests check that
the two agree. The base class provides the rest: task ids from seeded ranges, menu or
free-text actions, the standard info keys, snapshots, the oracle (an optimal action) and the
privileged keys: ``credit_values`` and ``privileged_context``, the task's one-line plan then
``Best action now: <the oracle's action>.`` (``The episode is over.`` once it is), e.g. "The
door is white: take the white key, pick apple 1 (the highest mean) in the orchard, then open
the door. Best action now: take the white key."
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Discrete

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.errors import BadInput, ResetNeeded
from agentgym.core.info import Segment
from agentgym.core.menu import Menu, shorten
from agentgym.core.spaces import String
from agentgym.envs.credit.values import Outcome, Values

SPLIT_SEEDS = {
    "train": range(0, 10_000),
    "val": range(10_000, 11_000),
    "test": range(11_000, 12_000),
}
"""Task seeds per split: task ``<prefix>-<seed>`` is generated from its seed alone."""

State = tuple[Any, ...]


@dataclass(frozen=True)
class Step:
    """What a family's real transition returns."""

    state: State
    reward: float
    done: bool
    won: bool
    message: str
    produced: tuple[str, ...] = ()
    consumed: tuple[str, ...] = ()
    visited: str | None = None


@functools.cache
def _task_ids(prefix: str, split: str) -> tuple[str, ...]:
    return tuple(f"{prefix}-{seed:05d}" for seed in SPLIT_SEEDS[split])


def int_option(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]``, else :class:`BadInput` naming the option."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or not low <= int(value) <= high:
        raise BadInput(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return int(value)


def float_option(name: str, value: Any, low: float, high: float) -> float:
    """``value`` as a float in ``[low, high]``, else :class:`BadInput` naming the option."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not low <= float(value) <= high:
        raise BadInput(f"{name} must be a number from {low} to {high}, got {value!r}")
    return float(value)


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


class CreditEnv(AgentEnv[str, Any]):
    """Base of the credit envs (see the module docstring); subclasses fill the hooks below."""

    family = "credit"
    domain = "credit"
    free_text: ClassVar[bool] = False
    task_prefix: ClassVar[str] = ""
    task_type: ClassVar[str] = ""
    salt: ClassVar[int] = 0

    def __init__(self, *, max_turns: int | None = None, **kwargs: Any):
        """Set up spaces; subclasses set their options first. Keywords as :class:`AgentEnv`."""
        default = self._episode_length() + self._slack_turns()
        super().__init__(max_turns=max_turns or default, **kwargs)
        self.max_menu = self._max_menu()
        self.observation_space = String()
        self.action_space = String() if self.free_text else Discrete(self.max_menu)
        self._task: Any = None
        self._s: State = ()
        self._visited: list[str] = []
        self._values = Values(self._actions, self._outcomes, self.max_turns)

    # ------------------------------------------------------------------ family hooks
    def _episode_length(self) -> int:
        """Turns of an episode without invalid actions."""
        raise NotImplementedError

    def _slack_turns(self) -> int:
        """Turns beyond the shortest episode before truncation (room for invalid actions)."""
        return 4

    def _max_menu(self) -> int:
        """The largest number of actions any state offers."""
        raise NotImplementedError

    def _options(self) -> dict[str, Any]:
        """The constructor options that fix the tasks (JSON-able)."""
        raise NotImplementedError

    def _generate(self, rng: np.random.Generator) -> Any:
        """The task drawn from its seed's generator."""
        raise NotImplementedError

    def _initial(self) -> State:
        """The first state of the task."""
        raise NotImplementedError

    def _actions(self, s: State) -> tuple[str, ...]:
        """The admissible action texts of ``s`` (empty when the episode is over)."""
        raise NotImplementedError

    def _outcomes(self, s: State, a: str) -> list[Outcome]:
        """The model: ``(probability, next state, expected reward, done)`` of ``a`` in ``s``."""
        raise NotImplementedError

    def _transition(self, s: State, a: str, rng: np.random.Generator) -> Step:
        """The real dynamics of a valid action (noise drawn from ``rng``)."""
        raise NotImplementedError

    def _observe(self, s: State, message: str) -> str:
        """The observation of ``s`` after ``message`` (the choices via :meth:`_choices`)."""
        raise NotImplementedError

    def _state_text(self, s: State) -> str:
        """``s`` as a short canonical string (part of ``state_key``)."""
        raise NotImplementedError

    def _progress(self, s: State) -> float:
        """How far the episode is, in [0, 1]."""
        raise NotImplementedError

    def _plan(self) -> str:
        """The privileged one-line plan of the current task."""
        raise NotImplementedError

    def _tie_break(self, s: State, best: list[str]) -> str:
        """Which of several optimal actions the oracle takes (the first by default)."""
        return best[0]

    # ------------------------------------------------------------------ tasks
    def task_ids(self, split: str | None = None) -> tuple[str, ...]:
        """``<prefix>-<seed>`` for every seed of ``split``'s range (the env's split if None)."""
        return _task_ids(self.task_prefix, split or self.split)

    def _has_task(self, task_id: str) -> bool:
        prefix, _, seed = str(task_id).rpartition("-")
        if prefix != self.task_prefix or not (seed.isascii() and seed.isdigit()):
            return False
        return any(int(seed) in r and len(seed) == 5 for r in SPLIT_SEEDS.values())

    def task_type_of(self, task_id: str) -> str:
        """Every task of an env has the env's one task type."""
        return self.task_type

    def _config(self) -> dict[str, Any]:
        return {"options": self._options(), "free_text": self.free_text}

    def _load(self, task_id: str) -> None:
        seed = int(task_id.rpartition("-")[2])
        self._task = self._generate(np.random.default_rng([self.salt, seed]))
        self._values = Values(self._actions, self._outcomes, self.max_turns)

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._load(task_id)
        self._s = self._initial()
        self._visited = []
        obs = self._observe(self._s, "")
        return obs, self._info(valid=True, step=None)

    def _apply(self, action: Any) -> Transition:
        text, error = self._resolve(action)
        if text is None:
            obs = f"Invalid action: {error}\n" + self._observe(self._s, "")
            return Transition(obs, 0.0, False, self._info(valid=False, step=None))
        step = self._transition(self._s, text, self.turn_rng())
        self._s = step.state
        if step.visited is not None and step.visited not in self._visited:
            self._visited.append(step.visited)
        info = self._info(valid=True, step=step)
        info["segments"] = _segments(action, text)
        return Transition(self._observe(self._s, step.message), step.reward, step.done, info)

    def _resolve(self, action: Any) -> tuple[str | None, str | None]:
        """The admissible text ``action`` names, or ``(None, why not)``."""
        acts = self._actions(self._s)
        if not self.free_text:
            index, error = Menu(acts, self.max_menu).resolve(action)
            return (None, error) if index is None else (acts[index], None)
        options = "; ".join(acts)
        if not isinstance(action, str):
            return None, f"expected text, got {type(action).__name__}: type one of: {options}"
        if not action.strip():
            return None, f"empty action: type one of: {options}"
        found = {_normal(a): a for a in acts}.get(_normal(action))
        if found is None:
            return None, f"{shorten(action.strip())} is not an option: type one of: {options}"
        return found, None

    def _choices(self, s: State) -> str:
        """The actions of ``s``: a numbered menu, or one option per line for free text."""
        acts = self._actions(s)
        if self.free_text:
            return "\n".join(f"- {a}" for a in acts)
        return Menu(acts, self.max_menu).render()

    # ------------------------------------------------------------------ info
    def _info(self, *, valid: bool, step: Step | None) -> dict[str, Any]:
        acts = self._actions(self._s)
        info: dict[str, Any] = {
            "action_valid": valid,
            "won": bool(step is not None and step.won),
            "admissible_actions": list(acts),
            "state_key": f"{self.task_id}|t={self.turn}|{self._state_text(self._s)}",
            "segments": [],
            "progress": float(self._progress(self._s)),
            "provenance": {
                "visited": list(self._visited),
                "cited": [],
                "produced": list(step.produced) if step else [],
                "consumed": list(step.consumed) if step else [],
            },
        }
        if not self.free_text:
            info["action_mask"] = Menu(acts, self.max_menu).mask()
        return info

    def credit_values(self) -> dict[str, dict[str, Any]]:
        """The exact values of the current state (see ``info["credit_values"]``)."""
        if self.task_id is None:
            raise ResetNeeded("credit_values() needs a started episode: call reset() first")
        return self._values.table(self._s, self.turn)

    def _privileged_info(self) -> dict[str, Any]:
        """The plan and the optimal action now (``privileged_context``), ``credit_values``."""
        if self.done:
            return {"privileged_context": "The episode is over."}
        best = self._best()
        return {
            "privileged_context": f"{self._plan()} Best action now: {best}.",
            "credit_values": self.credit_values(),
        }

    # ------------------------------------------------------------------ oracle and state
    def _best(self) -> str:
        return self._tie_break(self._s, self._values.best(self._s, self.turn))

    def oracle_action(self) -> str:
        """An optimal action of the current state (maximal ``Q*``; ties by the family)."""
        if self.done or self.task_id is None:
            raise ResetNeeded("the episode is over or not started: call reset() first")
        return self._best()

    def _get_state(self) -> dict[str, Any]:
        return {"s": list(self._s), "visited": list(self._visited)}

    def _set_state(self, state: dict[str, Any]) -> None:
        assert self.task_id is not None
        self._load(self.task_id)
        self._s = tuple(state["s"])
        self._visited = list(state["visited"])


def _segments(action: Any, text: str) -> list[Segment]:
    """One ``answer`` span: the action as written (stripped), or the item's text for an index."""
    if isinstance(action, str) and action.strip():
        start = len(action) - len(action.lstrip())
        return [{"tag": "answer", "start": start, "end": len(action.rstrip())}]
    return [{"tag": "answer", "start": 0, "end": len(text)}]
