"""The installed alfworld wheel's files and tables, and ALFRED's spelling of ids.

Everything comes from the installed ``alfworld`` wheel: the domain (``alfworld/data/alfred.pddl``),
the text grammar (``alfworld/data/alfred.twl2``), the floor plans (``alfworld/gen/layouts``: the
receptacles with their interaction poses, the object types of each room, the reachable floor
points), ALFRED's tables (``alfworld.gen.constants``: which receptacle holds which object, which
objects can be cleaned, heated, cooled or toggled, which rooms allow which task) and the goals
and task sentences (``alfworld.gen.goal_library``). ``import alfworld`` writes under ``$HOME``
unless imported through :func:`import_alfworld`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from agentgym.core.paths import cache_dir

# ALFRED's lamp types (not pickupable; a look-at-in-light task toggles one).
LAMPS = ("DeskLamp", "FloorLamp")


def _alfworld_dir() -> Path:
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the ALFWorld envs need the alfworld package: pip install alfworld")
    return Path(next(iter(spec.submodule_search_locations)))


_IMPORT_LOCK = threading.Lock()


def import_alfworld(module: str) -> ModuleType:
    """Import an ``alfworld`` module without it writing under ``$HOME``.

    ``import alfworld`` creates ``$ALFWORLD_DATA`` (default ``~/.cache/alfworld``) and sets the
    variable process-wide. During the first import the variable points at an existing folder
    (the user's ``ALFWORLD_DATA`` if it exists, else agentgym's cache), then it is restored.
    """
    with _IMPORT_LOCK:
        if "alfworld" not in sys.modules:
            saved = os.environ.get("ALFWORLD_DATA")
            target = saved if saved and os.path.isdir(saved) else str(cache_dir("alfworld"))
            os.environ["ALFWORLD_DATA"] = target
            try:
                importlib.import_module("alfworld")
            finally:
                if saved is None:
                    os.environ.pop("ALFWORLD_DATA", None)
                else:
                    os.environ["ALFWORLD_DATA"] = saved
    return importlib.import_module(module)


@dataclass(frozen=True)
class FloorPlan:
    """One ALFRED floor plan: receptacle ids with their poses, object types, floor points."""

    number: int
    room: str
    receptacles: dict[str, tuple[float, float, int, int]]
    object_types: tuple[str, ...]
    floor: np.ndarray = field(repr=False)


class AlfworldData:
    """The files and tables of the installed alfworld wheel, loaded once."""

    def __init__(self) -> None:
        """Read the domain, grammar and tables from the installed alfworld package."""
        root = _alfworld_dir()
        self.domain = (root / "data" / "alfred.pddl").read_text()
        self.grammar = (root / "data" / "alfred.twl2").read_text()
        self.constants = import_alfworld("alfworld.gen.constants")
        self.goals: dict[str, Any] = import_alfworld("alfworld.gen.goal_library").gdict
        self._layouts = root / "gen" / "layouts"
        self._plans: dict[int, FloorPlan] = {}
        c = self.constants
        self.can_contain: dict[str, frozenset[str]] = {
            r: frozenset(objs) for r, objs in c.VAL_RECEPTACLE_OBJECTS.items()
        }
        self.static_receptacles = frozenset(c.RECEPTACLES) - frozenset(c.MOVABLE_RECEPTACLES)
        self.openable = frozenset(c.OPENABLE_CLASS_LIST)
        self.movable = frozenset(c.MOVABLE_RECEPTACLES)
        self.action_objects: dict[str, frozenset[str]] = {
            k: frozenset(v) for k, v in c.VAL_ACTION_OBJECTS.items()
        }
        self.otypes = sorted(
            (set(c.OBJECTS) | set(c.MOVABLE_RECEPTACLES)) - self.static_receptacles
        )
        self.rtypes = sorted(self.static_receptacles)

    def room_of(self, scene: int) -> str:
        """Kitchen, LivingRoom, Bedroom or Bathroom."""
        for room, numbers in self.constants.SCENE_TYPE.items():
            if scene in numbers:
                return str(room)
        raise ValueError(f"scene {scene} has no room type")

    def scenes(self, split: str) -> list[int]:
        """ALFRED's seen rooms for train and val, its unseen rooms for test."""
        c = self.constants
        return sorted(c.TEST_SCENE_NUMBERS if split == "test" else c.TRAIN_SCENE_NUMBERS)

    def floor_plan(self, scene: int) -> FloorPlan:
        """The floor plan of ALFRED scene ``scene``."""
        if scene not in self._plans:
            self._plans[scene] = self._read_floor_plan(scene)
        return self._plans[scene]

    def _read_floor_plan(self, scene: int) -> FloorPlan:
        stem = self._layouts / f"FloorPlan{scene}"
        poses = json.loads(Path(f"{stem}-openable.json").read_text())
        receptacles = {}
        for rid in sorted(poses):
            if receptacle_type(rid) in self.static_receptacles:
                x, z, rot, hor = poses[rid]
                receptacles[rid] = (float(x), float(z), int(rot), int(hor))
        objects = tuple(sorted(set(json.loads(Path(f"{stem}-objects.json").read_text()))))
        floor = np.load(f"{stem}-layout.npy")
        return FloorPlan(scene, self.room_of(scene), receptacles, objects, floor)


@functools.lru_cache(maxsize=1)
def alfworld_data() -> AlfworldData:
    """The process-wide :class:`AlfworldData`."""
    return AlfworldData()


def receptacle_type(rid: str) -> str:
    """ALFRED's object type of a receptacle id (``Sink|...|SinkBasin`` is a SinkBasin)."""
    parts = rid.split("|")
    return parts[-1] if len(parts) == 5 else parts[0]


def mangle(name: str) -> str:
    """ALFWorld's PDDL spelling of an ALFRED id (``PlannedGameState.fix_pddl_str_chars``)."""
    table = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}
    return "".join(table.get(ch, ch) for ch in name)


def location_id(x: float, z: float, rotation: int, horizon: int) -> str:
    """ALFRED's location id of an agent pose (grid steps of 0.25 m, rotation in quarter turns)."""
    return f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{rotation // 90 % 4}|{horizon}"
