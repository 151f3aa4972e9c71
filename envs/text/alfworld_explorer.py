"""An explorer without privileged knowledge for ALFWorld: the classic hand-coded agent.

:class:`ExplorerAgent` parses the task sentence the reset observation ends with ("Your task is
to: heat some bread and put it in fridge.") into the object, the step the task asks for
(clean, heat or cool it, look at it under a lamp, or place a second one) and the receptacle
type it goes to. It then searches: it goes to the receptacles in the order the admissible
"go to" commands list them, opens the closed ones, and remembers what each one holds from the
arrival and opening texts. Once it holds the object it goes to the sinkbasin, microwave or
fridge and cleans, heats or cools it there; or to where it saw the lamp, and uses it; then to
a receptacle of the target type, opens it if it is closed, and moves the object to it. For
two objects it takes the second one from where it saw it, and puts it with the first.

It sees only the observation and ``info["admissible_actions"]``, never the env's state nor
the skill hint: unlike the oracle it does not know where the object lies, and pays two turns
(go, open) for every receptacle it searches in vain. Every command it plays is admissible,
and it is deterministic (no randomness; the same episode gives the same commands).

    agentgym eval --agent agentgym.envs.text.alfworld_explorer:ExplorerAgent \
        --env agentgym/ALFWorld-Small-v0 --split test --seeds 100
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

GOALS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile("^" + pattern + r"\.?$"))
    for kind, pattern in (
        ("clean", r"put a clean (?P<obj>\w+) in (?P<recep>\w+)"),
        ("clean", r"clean some (?P<obj>\w+) and put it in (?P<recep>\w+)"),
        ("heat", r"put a hot (?P<obj>\w+) in (?P<recep>\w+)"),
        ("heat", r"heat some (?P<obj>\w+) and put it in (?P<recep>\w+)"),
        ("cool", r"put a cool (?P<obj>\w+) in (?P<recep>\w+)"),
        ("cool", r"cool some (?P<obj>\w+) and put it in (?P<recep>\w+)"),
        ("two", r"put two (?P<obj>\w+) in (?P<recep>\w+)"),
        ("two", r"find two (?P<obj>\w+) and put them in (?P<recep>\w+)"),
        ("light", r"look at (?P<obj>\w+) under the (?P<toggle>\w+)"),
        ("light", r"examine the (?P<obj>\w+) with the (?P<toggle>\w+)"),
        ("place", r"put a (?P<obj>\w+) in (?P<recep>\w+)"),
        ("place", r"put some (?P<obj>\w+) on (?P<recep>\w+)"),
    )
)
"""The task sentences of ALFWorld's six task types (its ``goal templates``), most specific
first: ``clean`` ... ``place`` name the kind of task."""

APPLIANCES = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}
"""The receptacle type each treatment is done with."""

_TASK = re.compile(r"Your task is to: (.+?)\s*$", re.DOTALL)
_ROOM = re.compile(r"Looking quickly around you, you see (.*?)\.\s*$", re.MULTILINE)
_NAME = re.compile(r"\b([a-z]+ \d+)\b")
_ARRIVE = re.compile(r"You arrive at (?:the )?([a-z]+ \d+)\.")
_OPEN = re.compile(r"You open the ([a-z]+ \d+)\.")
_SEE = re.compile(r"you see (.*?)\.(?:\s|$)")
_TAKEN = re.compile(r"You pick up the ([a-z]+ \d+) from the ([a-z]+ \d+)\.")
_PLACED = re.compile(r"You (?:move|put) the ([a-z]+ \d+) (?:to|in|on|in/on) the ([a-z]+ \d+)\.")
_TREATED = re.compile(r"You (?:clean|heat|cool) the ([a-z]+ \d+) using")
_TAKE = re.compile(r"^take ([a-z]+ \d+) from ([a-z]+ \d+)$")
_PUT = re.compile(r"^(?:move|put) ([a-z]+ \d+) (?:to|in|on|in/on) ([a-z]+ \d+)$")


@dataclass(frozen=True)
class Goal:
    """The task sentence, parsed.

    Attributes:
        kind: place, clean, heat, cool, two (two objects) or light (look under a lamp).
        obj: the object type, as the game names it ("soapbar").
        recep: the target receptacle type ("cart"; empty for light).
        toggle: the lamp type for light ("desklamp"; else empty).
    """

    kind: str
    obj: str
    recep: str = ""
    toggle: str = ""


def parse_goal(task: str) -> Goal | None:
    """The goal of a task sentence (``"put a clean soapbar in cart."``), None if unknown."""
    for kind, pattern in GOALS:
        found = pattern.match(task.strip())
        if found:
            parts = found.groupdict()
            return Goal(kind, parts["obj"], parts.get("recep") or "", parts.get("toggle") or "")
    return None


def kind_of(name: str) -> str:
    """The type of a named thing: ``"cabinet 3"`` -> ``"cabinet"``."""
    return name.rsplit(" ", 1)[0]


def names_in(text: str) -> list[str]:
    """The things a "you see ..." list names, in order (``"a apple 1, and a bread 1"``)."""
    return _NAME.findall(text)


@dataclass
class _State:
    """What the explorer knows: the goal, the room, where it stands, what it holds."""

    goal: Goal | None = None
    order: list[str] = field(default_factory=list)
    contents: dict[str, list[str]] = field(default_factory=dict)
    at: str | None = None
    visited: set[str] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    holding: str | None = None
    treated: bool = False
    placed: set[str] = field(default_factory=set)
    anchor: str | None = None
    sweeps: int = 0


class ExplorerAgent:
    """Searches receptacle by receptacle, then treats and places; see the module docstring."""

    name = "explorer"

    def __init__(self) -> None:
        """Start knowing nothing."""
        self._s = _State()

    def reset(self, env_id: str, seed: int) -> None:
        """Forget the last episode (the agent has no randomness: ``seed`` is unused)."""
        self._s = _State()

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next command: one of ``info["admissible_actions"]``."""
        actions: list[str] = list(info.get("admissible_actions") or [])
        s = self._s
        if s.goal is None:
            self._start(observation, actions)
        self._observe(observation)
        choice = self._decide(actions)
        if choice in actions:
            return choice
        return "look" if "look" in actions else (actions or ["look"])[0]

    # -- reading -----------------------------------------------------------------------------

    def _start(self, observation: str, actions: list[str]) -> None:
        """Parse the task sentence and list the room's receptacles."""
        s = self._s
        task = _TASK.search(observation)
        s.goal = parse_goal(task.group(1)) if task else None
        order = [a[6:] for a in actions if a.startswith("go to ")]
        room = _ROOM.search(observation)
        for name in names_in(room.group(1)) if room else []:
            if name not in order:
                order.append(name)
        s.order = order

    def _observe(self, observation: str) -> None:
        """Update where it stands, what it holds, and what the receptacles hold."""
        s = self._s
        arrived = _ARRIVE.search(observation) or _OPEN.search(observation)
        if arrived:
            s.at = arrived.group(1)
            s.visited.add(s.at)
            seen = _SEE.search(observation)
            if seen:
                self._saw(s.at, names_in(seen.group(1)))
        taken = _TAKEN.search(observation)
        if taken:
            s.holding = taken.group(1)
            s.at = taken.group(2)
            things = s.contents.get(s.at, [])
            if s.holding in things:
                things.remove(s.holding)
        if _TREATED.search(observation):
            s.treated = True
        placed = _PLACED.search(observation)
        if placed:
            obj, recep = placed.groups()
            s.holding = None
            s.placed.add(obj)
            s.contents.setdefault(recep, []).append(obj)
            if self._goal.kind == "two":
                s.anchor = recep

    def _saw(self, recep: str, things: list[str]) -> None:
        """Remember what ``recep`` holds; for two objects, keep one already in place."""
        s = self._s
        s.contents[recep] = things
        goal = self._goal
        if goal.kind != "two" or s.anchor is not None or kind_of(recep) != goal.recep:
            return
        if any(kind_of(t) == goal.obj and t != s.holding for t in things):
            s.anchor = recep

    @property
    def _goal(self) -> Goal:
        return self._s.goal or Goal("place", "")

    # -- deciding ----------------------------------------------------------------------------

    def _decide(self, actions: list[str]) -> str:
        """The command of the current phase: find, treat, light or place."""
        s = self._s
        goal = self._goal
        if s.holding is None:
            return self._find(actions)
        if goal.kind in APPLIANCES and not s.treated:
            return self._treat(actions)
        if goal.kind == "light":
            return self._light(actions)
        return self._place(actions)

    def _wanted(self, thing: str, recep: str) -> bool:
        """Whether to take ``thing`` from ``recep``: the goal's object, not already placed."""
        s = self._s
        return kind_of(thing) == self._goal.obj and thing not in s.placed and recep != s.anchor

    def _find(self, actions: list[str]) -> str:
        """Take the object if it is here, go where it was seen, or search on."""
        s = self._s
        for action in actions:
            found = _TAKE.match(action)
            if found and self._wanted(*found.groups()):
                return action
        for recep in s.order:
            things = s.contents.get(recep, [])
            if recep != s.at and any(self._wanted(t, recep) for t in things):
                return f"go to {recep}"
        return self._explore(actions, open_closed=True)

    def _treat(self, actions: list[str]) -> str:
        """Clean, heat or cool the held object with the appliance the task needs."""
        s = self._s
        verb = self._goal.kind
        for action in actions:
            if action.startswith(f"{verb} {s.holding} with "):
                return action
        return self._go_to_type(actions, APPLIANCES[verb])

    def _light(self, actions: list[str]) -> str:
        """Use the lamp while holding the object: go where the lamp was seen, or search."""
        s = self._s
        toggle = self._goal.toggle
        for action in actions:
            if action.startswith(f"use {toggle} "):
                return action
        for recep in s.order:
            if recep != s.at and any(kind_of(t) == toggle for t in s.contents.get(recep, [])):
                return f"go to {recep}"
        return self._explore(actions, open_closed=False)

    def _place(self, actions: list[str]) -> str:
        """Move the held object to a receptacle of the target type (for two: the first's)."""
        s = self._s
        for action in actions:
            found = _PUT.match(action)
            if found and found.group(1) == s.holding and self._is_target(found.group(2)):
                return action
        if s.at is not None and self._is_target(s.at):
            if f"open {s.at}" in actions:
                return f"open {s.at}"
            s.refused.add(s.at)
        if s.anchor is not None and s.anchor in s.refused:
            s.anchor = None
        return self._go_to_type(actions, self._goal.recep, target=True)

    def _is_target(self, recep: str) -> bool:
        s = self._s
        if s.anchor is not None:
            return recep == s.anchor
        return kind_of(recep) == self._goal.recep and recep not in s.refused

    def _go_to_type(self, actions: list[str], kind: str, *, target: bool = False) -> str:
        """Go to the first receptacle of ``kind`` (a target one when ``target``); else search.

        Where it stands, it opens the receptacle if it can (a closed fridge or microwave).
        """
        s = self._s
        if s.at is not None and kind_of(s.at) == kind:
            opening = self._open_here(actions)  # once; if that does not help, try another
            if opening is not None:
                return opening
        for recep in s.order:
            fits = self._is_target(recep) if target else kind_of(recep) == kind
            if fits and recep != s.at and f"go to {recep}" in actions:
                return f"go to {recep}"
        return self._explore(actions, open_closed=False)

    def _explore(self, actions: list[str], *, open_closed: bool) -> str:
        """Open the receptacle here if it is closed, else go to the next unvisited one.

        When every receptacle has been visited, it starts a new sweep (at most three).
        """
        s = self._s
        opening = self._open_here(actions) if open_closed else None
        if opening is not None:
            return opening
        for recep in s.order:
            if recep not in s.visited and f"go to {recep}" in actions:
                return f"go to {recep}"
        if s.sweeps < 3 and len(s.order) > 1:
            s.sweeps += 1
            s.visited = {s.at} if s.at else set()
            return self._explore(actions, open_closed=open_closed)
        return "look"

    def _open_here(self, actions: list[str]) -> str | None:
        """Open the receptacle here if it is closed and was never opened (None otherwise)."""
        s = self._s
        if s.at is None or s.at in s.opened or f"open {s.at}" not in actions:
            return None
        s.opened.add(s.at)
        return f"open {s.at}"
