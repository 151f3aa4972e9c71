"""What an agent has been shown of an ALFWorld room, kept as one line of text.

A policy that reads the intro and its last few turns cannot tell which receptacles it has
already searched: the warm start of the tiny policy fails mostly by going back and forth
between receptacles it has seen. :class:`PlaceMemory` reads the texts the agent is shown, the
way :class:`~agentgym.envs.text.alfworld_explorer.ExplorerAgent` reads them, and
:meth:`PlaceMemory.line` writes what they told, in the room's own order::

    Seen: countertop 1 (apple 1, bread 1), cabinet 1 (closed), drawer 1 (nothing). Unseen:
    cabinet 2, fridge 1. Holding: apple 1, hot.

(one line). "closed" marks a receptacle the agent stood at without opening it. The memory
holds nothing the texts did not say: it is built from the intro and each command's feedback
only, never from the game's state, so an agent that kept every observation could write the
same line itself. The env's ``memory=True`` (the ``-v1`` ids) ends every observation after
the intro with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentgym.envs.text.alfworld_explorer import (
    _ARRIVE,
    _OPEN,
    _PLACED,
    _ROOM,
    _SEE,
    _TAKEN,
    names_in,
)

_TREATED = re.compile(r"You (clean|heat|cool) the ([a-z]+ \d+) using")
TREATED_WORDS = {"clean": "clean", "heat": "hot", "cool": "cool"}
"""The word the memory writes for an object that was cleaned, heated or cooled."""


@dataclass
class PlaceMemory:
    """The receptacles seen and what they held, what the agent holds; see the module docstring.

    Attributes:
        order: the receptacles in the order the intro lists them (then any met later).
        contents: per receptacle stood at, what it was last shown to hold (None: it was
            closed and never opened, so its contents are unknown).
        holding: the object in hand (None: nothing).
        treated: the objects cleaned, heated or cooled, with the word for each.
    """

    order: list[str] = field(default_factory=list)
    contents: dict[str, list[str] | None] = field(default_factory=dict)
    holding: str | None = None
    treated: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_intro(cls, intro: str) -> PlaceMemory:
        """A memory that knows the room's receptacles, as the intro lists them."""
        room = _ROOM.search(intro)
        return cls(order=names_in(room.group(1)) if room else [])

    def observe(self, feedback: str) -> None:
        """Read one command's feedback (the text the agent was shown)."""
        arrived = _ARRIVE.search(feedback) or _OPEN.search(feedback)
        if arrived:
            here = arrived.group(1)
            if here not in self.order:
                self.order.append(here)
            seen = _SEE.search(feedback)
            if seen:
                self.contents[here] = names_in(seen.group(1))
            else:
                self.contents.setdefault(here, None)
        taken = _TAKEN.search(feedback)
        if taken:
            obj, recep = taken.groups()
            self.holding = obj
            things = self.contents.get(recep)
            if things and obj in things:
                things.remove(obj)
        treated = _TREATED.search(feedback)
        if treated:
            self.treated[treated.group(2)] = TREATED_WORDS[treated.group(1)]
        placed = _PLACED.search(feedback)
        if placed:
            obj, recep = placed.groups()
            self.holding = None
            things = self.contents.get(recep)
            if things is not None and obj not in things:
                things.append(obj)

    def line(self) -> str:
        """The memory as one line: ``Seen: ... Unseen: ... Holding: ...``."""
        seen = [r for r in self.order if r in self.contents]
        unseen = [r for r in self.order if r not in self.contents]
        parts = []
        if seen:
            parts.append("Seen: " + ", ".join(f"{r} ({self._held(r)})" for r in seen) + ".")
        if unseen:
            parts.append("Unseen: " + ", ".join(unseen) + ".")
        held = self.holding or "nothing"
        if self.holding in self.treated:
            held += f", {self.treated[self.holding]}"
        parts.append(f"Holding: {held}.")
        return " ".join(parts)

    def _held(self, recep: str) -> str:
        things = self.contents[recep]
        if things is None:
            return "closed"
        return ", ".join(things) if things else "nothing"

    def to_json(self) -> dict[str, Any]:
        """The memory as JSON (what an env snapshot keeps)."""
        return {
            "order": list(self.order),
            "contents": {r: None if t is None else list(t) for r, t in self.contents.items()},
            "holding": self.holding,
            "treated": dict(self.treated),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PlaceMemory:
        """Inverse of :meth:`to_json`."""
        return cls(
            order=list(doc["order"]),
            contents={r: None if t is None else list(t) for r, t in doc["contents"].items()},
            holding=doc["holding"],
            treated=dict(doc["treated"]),
        )
