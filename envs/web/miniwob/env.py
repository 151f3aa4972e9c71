"""MiniWoB++ tasks (the ``miniwob`` package's pages) as agentgym text environments."""

from __future__ import annotations

import functools
import hashlib
from typing import Any, ClassVar

import numpy as np
from gymnasium.spaces import Discrete

from agentgym.core.env import AgentEnv, Transition
from agentgym.core.errors import BadInput, ResetNeeded, SnapshotMismatch
from agentgym.core.info import Segment
from agentgym.core.menu import Menu
from agentgym.core.spaces import String
from agentgym.envs.web.browser import BrowserError, BrowserMissing
from agentgym.envs.web.miniwob import oracle
from agentgym.envs.web.miniwob.actions import ACTION_HELP, Action, parse
from agentgym.envs.web.miniwob.page import STEP_MS, Page, PageState
from agentgym.envs.web.miniwob.tasks import EXCLUDED, TASKS
from agentgym.envs.web.miniwob.view import View

SPLIT_SEEDS = {
    "train": range(0, 10_000),
    "val": range(10_000, 11_000),
    "test": range(11_000, 12_000),
}
"""miniwob seeds per split: task ``<task>-<seed>`` is miniwob's episode of that seed."""
MAX_MENU = 256


@functools.cache
def _task_ids(task: str, split: str) -> tuple[str, ...]:
    return tuple(f"{task}-{seed:05d}" for seed in SPLIT_SEEDS[split])


def seed_of(task_id: str) -> int:
    """The miniwob seed of a task id (``click-button-00042`` -> 42)."""
    return int(task_id.rpartition("-")[2])


def data_mode(seed: int) -> str:
    """The miniwob data mode of a seed: ``train`` on the train split, ``test`` elsewhere."""
    return "train" if seed in SPLIT_SEEDS["train"] else "test"


class MiniWoBEnv(AgentEnv[str, Any]):
    """Complete a MiniWoB++ task in a headless browser, acting on the page's elements by ref.

    ## Description
    One task of the MiniWoB++ benchmark (Shi et al. 2017; Liu et al. 2018), run from the task
    pages and with the episode logic, DOM extraction and reward of the ``miniwob`` package
    (1.1.0) in headless Chromium. Each task id names a miniwob seed; the page generates the
    episode from it (``Math.seedrandom``), as ``miniwob``'s own ``reset(seed=...)`` does. Time
    on the page is virtual: every action is followed by one second of it, so animations and
    delayed content play out identically on any host; miniwob's 10-second episode timer is
    off (the turn limit ends episodes instead), and dates are fixed.

    ## Observation
    Text: ``Task:`` and the task's utterance, then the page: one line per visible element
    (``[ref] tag #id .class "text" value="..." (checked, focused)``, indented by depth; text
    between elements on lines of its own), then the action syntax. An invalid action's
    observation starts with the reason. With ``menu=True`` the clicks follow as a numbered
    menu.

    ## Action
    Text: ``click(ref)``, ``type(ref, "text")`` (clicks the element, then types key by key, as
    miniwob's FOCUS_ELEMENT_AND_TYPE_TEXT), ``press("key")`` (``Enter``, ``Tab``, ``C-a``,
    letters...) and ``wait()`` (let a second pass). ``info["admissible_actions"]`` lists
    ``click(ref)`` for every listed element. ``menu=True``: ``Discrete(256)`` over those clicks
    with ``info["action_mask"]``; text actions are accepted too. A malformed action or an
    unknown ref costs a turn, changes nothing and returns ``action_valid=False``.

    ## Rewards
    miniwob's raw reward (``miniwob.reward.get_raw_reward``: the task's reward without the
    time discount, in [-1, 1], some tasks giving partial credit) when the task ends; 0 before.
    ``won``: raw reward 1 (miniwob's binary success). ``reward_components``: ``raw_reward``.

    ## Termination
    Terminates when the task ends (miniwob's ``done``); truncates after ``max_turns`` turns
    (20 by default). When the browser crashes or hangs, the step truncates with reward 0,
    ``info["error"]`` says what happened and the observation says so; the browser is torn
    down and the next reset starts another.

    ## Other info
    ``state_key``: sha1 of the utterance and the page text. Privileged: the fields miniwob's
    field extractor finds in the utterance, and the oracle's next action where there is one.
    ``oracle_action()``: a scripted solver for the tasks in :data:`oracle.SOLVERS`; other tasks
    have none (``has_oracle`` is False, ``oracle_action`` raises NotImplementedError).
    Snapshots hold the episode's actions and are restored by replaying them on a fresh page,
    checked by the observation's hash; pickling goes the same way.

    ## Registered ids
    ``agentgym/MiniWoB-<Task>-v0`` for every task miniwob ships except those in
    :data:`tasks.EXCLUDED` (with the reason for each), ``<Task>`` the task name in CamelCase
    (``click-button`` -> ``ClickButton``). Task ids ``<task>-<seed>``: train seeds 0-9999
    (miniwob data mode ``train``), val 10000-10999 and test 11000-11999 (data mode ``test``).

    ## Version history
    v0: first version.
    """

    family = "web"
    domain = "miniwob"
    default_max_turns = 20
    _any_task: ClassVar[bool] = False  # the survey plays excluded tasks too

    def __init__(
        self,
        task: str = "click-button",
        *,
        menu: bool = False,
        split: str = "train",
        privileged: bool = False,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ):
        """Set up the env; the browser starts on the first reset.

        Args:
            task: the miniwob task name (``click-button``).
            menu: ``Discrete(256)`` actions over the page's clicks (text actions accepted too).
            split: the task range ``reset(seed=...)`` draws from (train, val or test).
            privileged: add the task's fields and the oracle's next action to ``info``.
            max_turns: the turn limit (20 by default).
            render_mode: None or "ansi".
        """
        if task not in TASKS:
            raise BadInput(f"unknown MiniWoB++ task {task!r}: see agentgym.envs.web.miniwob.tasks")
        if task in EXCLUDED and not self._any_task:
            raise BadInput(f"MiniWoB++ task {task!r} is not supported: {EXCLUDED[task]}")
        super().__init__(
            split=split, privileged=privileged, max_turns=max_turns, render_mode=render_mode
        )
        self.task = task
        self.menu = bool(menu)
        self.observation_space = String()
        self.action_space = Discrete(MAX_MENU) if self.menu else String()
        self.has_oracle = task in oracle.SOLVERS
        self._page = Page()
        self._view: View | None = None
        self._state: PageState | None = None
        self._history: list[str] = []

    @classmethod
    def registry_note(cls, **kwargs: Any) -> str:
        """Whether the task has a scripted oracle."""
        task = kwargs.get("task", "click-button")
        return "oracle: scripted solver" if task in oracle.SOLVERS else "no oracle"

    # ------------------------------------------------------------------ tasks
    def task_ids(self, split: str | None = None) -> tuple[str, ...]:
        """``<task>-<seed>`` for every seed of ``split`` (the env's split if None)."""
        return _task_ids(self.task, split or self.split)

    def _has_task(self, task_id: str) -> bool:
        prefix, _, seed = str(task_id).rpartition("-")
        if prefix != self.task or not (seed.isascii() and seed.isdigit() and len(seed) == 5):
            return False
        return any(int(seed) in r for r in SPLIT_SEEDS.values())

    def task_type_of(self, task_id: str) -> str:
        """The task name: every task id of an env has the same type."""
        return self.task

    def _config(self) -> dict[str, Any]:
        import miniwob

        # the pages (and so every episode) are miniwob's, played under this virtual clock
        return {
            "task": self.task,
            "menu": self.menu,
            "miniwob": miniwob.__version__,
            "step_ms": STEP_MS,
        }

    # ------------------------------------------------------------------ episode
    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        seed = seed_of(task_id)
        self._history = []
        for attempt in (1, 2):  # a browser that died between episodes is replaced once
            try:
                self._read(self._page.load(self.task, seed, data_mode(seed)))
                break
            except BrowserMissing:
                raise
            except BrowserError:
                if attempt == 2:
                    raise
        return self._observe(), self._info(valid=True, action=None)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """As :meth:`AgentEnv.step`; a browser failure truncates the episode (see Termination)."""
        obs, reward, terminated, truncated, info = super().step(action)
        if "error" in info:
            self._done, truncated = True, True
        return obs, reward, terminated, truncated, info

    def _apply(self, action: Any) -> Transition:
        parsed, error = self._resolve(action)
        if parsed is None:
            obs = f"Invalid action: {error}\n{self._observe()}"
            return Transition(obs, 0.0, False, self._info(valid=False, action=None))
        try:
            state = self._perform(parsed)
        except BrowserError as e:
            info = self._info(valid=False, action=parsed)
            info["error"] = str(e)
            obs = f"Browser error: {e}. The episode ends here; reset() starts a new browser."
            return Transition(obs, 0.0, False, info)
        self._history.append(parsed.text)
        info = self._info(valid=state.error is None, action=parsed)
        info["segments"] = _segments(action, parsed)
        obs = self._observe()
        if state.error is not None:
            obs = f"The action failed: {state.error}\n{obs}"
        reward = state.raw_reward if state.done else 0.0
        return Transition(obs, reward, state.done, info)

    def _resolve(self, action: Any) -> tuple[Action | None, str | None]:
        """The action ``action`` names (an index of the menu, or text), or why none."""
        view = self._current()
        if self.menu and (isinstance(action, (int, np.integer)) or _is_digits(action)):
            index, error = Menu(view.clicks()[:MAX_MENU], MAX_MENU).resolve(action)
            if index is None:
                return None, error
            return Action("click", view.refs[index]), None
        parsed, error = parse(action)
        if parsed is None or parsed.ref is None or parsed.ref in view.elements:
            return parsed, error
        return None, f"no element [{parsed.ref}] on the page: use a ref shown in brackets"

    def _perform(self, action: Action) -> PageState:
        page = self._page
        if action.kind == "click":
            assert action.ref is not None
            state = page.click(action.ref)
        elif action.kind == "type":
            assert action.ref is not None and action.arg is not None
            state = page.type(action.ref, action.arg)
        elif action.kind == "press":
            assert action.arg is not None
            state = page.press(action.arg)
        else:
            state = page.observe()
        self._read(state)
        return state

    def _read(self, state: PageState) -> None:
        self._state = state
        self._view = View.read(state.utterance, state.dom, state.selects)

    def _current(self) -> View:
        if self._view is None:
            raise ResetNeeded("call reset() first: no page is loaded")
        return self._view

    # ------------------------------------------------------------------ observation and info
    def _observe(self) -> str:
        view, state = self._current(), self._state
        assert state is not None
        if state.done:
            outcome = "success" if _won(state) else "failure"
            return (
                f"Task: {view.utterance}\n"
                f"The episode is over: reward {state.raw_reward:.2f} ({outcome})."
            )
        parts = [f"Task: {view.utterance}", "Page:", view.text, f"Actions: {ACTION_HELP}"]
        if self.menu:
            parts += ["Menu:", Menu(view.clicks()[:MAX_MENU], MAX_MENU).render()]
        return "\n".join(parts)

    def _info(self, *, valid: bool, action: Action | None) -> dict[str, Any]:
        view, state = self._current(), self._state
        assert state is not None
        clicks = [] if state.done else view.clicks()[:MAX_MENU]
        info: dict[str, Any] = {
            "action_valid": valid,
            "won": _won(state),
            "admissible_actions": clicks,
            "state_key": view.key if not state.done else f"done:{state.raw_reward}:{view.key}",
            "progress": 1.0 if _won(state) else 0.0,
            "reward_components": {"raw_reward": state.raw_reward if state.done else 0.0},
            "segments": [],
            "tool_calls": [action.tool_call] if action is not None else [],
        }
        if self.menu:
            info["action_mask"] = Menu(clicks, MAX_MENU).mask()
        return info

    def _privileged_info(self) -> dict[str, Any]:
        view = self._current()
        fields = oracle.fields_of(self.task, view.utterance)
        text = "Task fields: " + (", ".join(f"{k}={v!r}" for k, v in fields) or "none")
        if self.has_oracle and not self.done:
            try:
                text += f". Expert's next action: {self.oracle_action()}"
            except RuntimeError as e:  # a page the solver cannot read after a detour
                text += f". The expert is stuck: {e}"
        return {"privileged_context": text}

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str:
        """The scripted solver's next action (tasks in :data:`oracle.SOLVERS` only).

        Raises:
            NotImplementedError: the task has no solver (``has_oracle`` is False).
        """
        if not self.has_oracle:
            raise NotImplementedError(f"MiniWoB++ task {self.task!r} has no oracle")
        if self.task_id is None or self.done:
            raise ResetNeeded("the episode is over or not started: call reset() first")
        return oracle.next_action(self.task, self._current(), self._history)

    # ------------------------------------------------------------------ snapshots
    def _get_state(self) -> dict[str, Any]:
        return {"actions": list(self._history), "page_sha1": _sha1(self._observe())}

    def _set_state(self, state: dict[str, Any]) -> None:
        assert self._task_id is not None
        seed = seed_of(self._task_id)
        self._history = []
        self._read(self._page.load(self.task, seed, data_mode(seed)))
        for text in state["actions"]:
            parsed, error = self._resolve(text)
            if parsed is None:
                raise SnapshotMismatch(
                    f"snapshot action {text!r} does not apply on replay: {error}"
                )
            self._perform(parsed)
            self._history.append(parsed.text)
        if _sha1(self._observe()) != state["page_sha1"]:
            raise SnapshotMismatch(
                f"replaying the snapshot's {len(self._history)} actions on task "
                f"{self._task_id} gave another page"
            )

    def close(self) -> None:
        """Quit the browser; the episode ends with it (a reset starts a browser again)."""
        self._page.close()
        self._view = self._state = None
        self._task_id = None


def _won(state: PageState) -> bool:
    return state.done and state.raw_reward == 1.0


def _is_digits(action: Any) -> bool:
    return isinstance(action, str) and action.strip().isascii() and action.strip().isdigit()


def _segments(action: Any, parsed: Action) -> list[Segment]:
    """The whole action as one ``tool_call`` span (the item's text for a menu index)."""
    if isinstance(action, str) and action.strip() and not _is_digits(action):
        start = len(action) - len(action.lstrip())
        return [{"tag": "tool_call", "start": start, "end": len(action.rstrip())}]
    return [{"tag": "tool_call", "start": 0, "end": len(parsed.text)}]


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()
