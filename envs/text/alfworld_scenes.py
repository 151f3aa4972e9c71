"""Drawing an ALFRED scene and task for a generated ALFWorld game.

A :class:`SceneSampler` picks, from a preset's parameters and a seeded generator, a floor plan
of a room that allows the task type, the task's object, target receptacle, appliance or lamp,
the receptacles kept (the whole floor plan, or a few around the ones the task needs), where
every object starts and where the agent stands. Slicing and movable-receptacle tasks are left
out, as ALFWorld's text environment leaves them out. A draw that cannot host the task raises
:class:`Redraw`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from agentgym.envs.text.alfworld_data import (
    LAMPS,
    AlfworldData,
    FloorPlan,
    location_id,
    receptacle_type,
)
from agentgym.envs.text.alfworld_presets import GenParams

# The appliance and the object property each state-changing task needs (the domain wires
# CleanObject, HeatObject and CoolObject to these receptacle types).
_APPLIANCE = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}


# Surfaces a lamp stands on (lamps are not pickupable; the domain toggles an object that is
# in a receptacle at the agent's location).
_LAMP_SURFACES = (
    "Desk",
    "SideTable",
    "Dresser",
    "CoffeeTable",
    "DiningTable",
    "TVStand",
    "Shelf",
    "CounterTop",
)


class Redraw(Exception):
    """The drawn scene cannot host the task: draw again."""


@dataclass
class Scene:
    """A drawn scene and task, before it is written as PDDL."""

    task_type: str
    floor_plan: int
    room: str
    object_target: str
    parent_target: str
    toggle_target: str
    receptacles: dict[str, str]  # id -> location id
    objects: dict[str, str]  # id -> receptacle id
    agent_location: str
    task_text: str


class _Targets(NamedTuple):
    """The object and receptacle types a task is about."""

    otype: str  # the object type to act on
    parent: str  # the target receptacle type ("" for look-at-in-light)
    appliance: str  # SinkBasin, Microwave or Fridge for clean, heat, cool tasks, else ""
    toggle: str  # the lamp type for look-at-in-light, else ""
    sources: list[str]  # receptacle types that can hold the object, the target type excluded


def _choose(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    if not items:
        raise Redraw
    return items[int(rng.integers(len(items)))]


def _object_id(rng: np.random.Generator, otype: str, rid: str, taken: set[str]) -> str:
    """An ALFRED-style id for an instance of ``otype`` near receptacle ``rid``."""
    coords = [float(v) for v in rid.split("|")[1:4]]
    while True:
        jitter = rng.uniform(-0.3, 0.3, size=3).round(2)
        xyz = [c + j for c, j in zip(coords, jitter, strict=True)]
        oid = f"{otype}|" + "|".join(f"{v:+06.2f}" for v in xyz)
        if oid not in taken:
            taken.add(oid)
            return oid


class SceneSampler:
    """Draws one scene and task for a preset (all randomness from the given generator)."""

    def __init__(self, params: GenParams, data: AlfworldData):
        """Sample for the preset ``params`` from the alfworld tables ``data``."""
        self.params = params
        self.data = data

    def _placeable(self, fp: FloorPlan, receptacle_types: set[str]) -> list[str]:
        """Object types of the floor plan that some receptacle present can hold."""
        d = self.data
        out = []
        for t in fp.object_types:
            if t in d.static_receptacles or t in LAMPS:
                continue
            if any(t in d.can_contain.get(r, ()) for r in receptacle_types):
                out.append(t)
        return out

    def sample(self, rng: np.random.Generator, split: str, task_type: str) -> Scene:
        """One scene for ``task_type`` from the floor plans of ``split``.

        Raises:
            Redraw: If the drawn floor plan cannot host the task.
        """
        d = self.data
        rooms = d.constants.GOALS_VALID[task_type]
        scene = _choose(rng, [s for s in d.scenes(split) if d.room_of(s) in rooms])
        fp = d.floor_plan(scene)
        by_type: dict[str, list[str]] = {}
        for rid in fp.receptacles:
            by_type.setdefault(receptacle_type(rid), []).append(rid)
        targets = self._targets(rng, fp, by_type, task_type)

        # Receptacles: the whole floor plan, or a few around the ones the task needs.
        chosen = self._receptacles(rng, fp, by_type, targets)
        if not chosen:
            raise Redraw
        objects = self._objects(rng, fp, chosen, task_type, targets)

        locations = {r: location_id(*fp.receptacles[r]) for r in chosen}
        agent = self._agent_location(rng, fp, set(locations.values()))
        template = _choose(rng, list(d.goals[task_type]["templates"]))
        otype, parent, toggle = targets.otype, targets.parent, targets.toggle
        text = template.format(obj=otype.lower(), recep=parent.lower(), toggle=toggle.lower())
        return Scene(
            task_type=task_type,
            floor_plan=scene,
            room=fp.room,
            object_target=otype,
            parent_target=parent,
            toggle_target=toggle,
            receptacles=locations,
            objects=objects,
            agent_location=agent,
            task_text=text,
        )

    def _targets(
        self,
        rng: np.random.Generator,
        fp: FloorPlan,
        by_type: dict[str, list[str]],
        task_type: str,
    ) -> _Targets:
        """The task's object, target receptacle, appliance and lamp types in floor plan ``fp``."""
        d = self.data
        placeable = self._placeable(fp, set(by_type))
        appliance, prop = _APPLIANCE.get(task_type, ("", ""))
        toggle = ""
        if appliance and appliance not in by_type:
            raise Redraw
        if task_type == "look_at_obj_in_light":
            toggle = _choose(rng, [t for t in LAMPS if t in fp.object_types])
            if not any(t in by_type for t in _LAMP_SURFACES):
                raise Redraw
            candidates = placeable
        elif prop:
            candidates = [t for t in placeable if t in d.action_objects[prop]]
        else:
            candidates = placeable
        otype = _choose(rng, candidates)
        sources = sorted(r for r in by_type if otype in d.can_contain.get(r, ()))
        parent = ""
        if task_type != "look_at_obj_in_light":
            targets = [r for r in sources if r != appliance]
            parent = _choose(rng, targets)
            sources = [r for r in sources if r != parent]
        if not sources:
            raise Redraw
        return _Targets(otype, parent, appliance, toggle, sources)

    def _objects(
        self,
        rng: np.random.Generator,
        fp: FloorPlan,
        chosen: list[str],
        task_type: str,
        targets: _Targets,
    ) -> dict[str, str]:
        """Place the task's objects, its lamp and the distractors in the ``chosen`` receptacles.

        The task's objects start anywhere but in a receptacle of the target type (else the
        goal could hold from the start); other object types go wherever they fit.
        """
        d, p = self.data, self.params
        objects: dict[str, str] = {}
        taken: set[str] = set()

        def place(t: str, n: int, forbid: str = "") -> None:
            homes = [r for r in chosen if t in d.can_contain.get(receptacle_type(r), ())]
            homes = [r for r in homes if receptacle_type(r) != forbid]
            for _ in range(n):
                rid = _choose(rng, homes)
                objects[_object_id(rng, t, rid, taken)] = rid

        otype = targets.otype
        low = 2 if task_type == "pick_two_obj_and_place" else 1
        place(otype, int(rng.integers(low, low + 2)), forbid=targets.parent)
        if targets.toggle:
            surfaces = [r for r in chosen if receptacle_type(r) in _LAMP_SURFACES]
            rid = _choose(rng, surfaces)
            objects[_object_id(rng, targets.toggle, rid, taken)] = rid
        chosen_types = {receptacle_type(r) for r in chosen}
        others = [t for t in self._placeable(fp, chosen_types) if t != otype]
        if p.distractor_types is not None:
            lo, hi = p.distractor_types
            k = min(len(others), int(rng.integers(lo, hi + 1)))
            others = sorted(rng.choice(others, size=k, replace=False).tolist()) if k else []
        for t in others:
            place(t, int(rng.integers(1, p.max_instances + 1)))
        return objects

    def _receptacles(
        self,
        rng: np.random.Generator,
        fp: FloorPlan,
        by_type: dict[str, list[str]],
        targets: _Targets,
    ) -> list[str]:
        """The receptacles kept: all, or the task's and others at distinct locations, sorted."""
        limit = self.params.max_receptacles
        if limit is None:
            return list(fp.receptacles)
        required = [targets.parent, targets.appliance]
        needed = [_choose(rng, by_type[t]) for t in required if t]
        needed.append(_choose(rng, [r for t in targets.sources for r in by_type[t]]))
        if targets.toggle and not any(receptacle_type(r) in _LAMP_SURFACES for r in needed):
            surfaces = [r for t in _LAMP_SURFACES for r in by_type.get(t, [])]
            if surfaces:
                needed.append(_choose(rng, surfaces))
        chosen = list(dict.fromkeys(needed))
        used = {location_id(*fp.receptacles[r]) for r in chosen}
        if len(used) < len(chosen):
            raise Redraw
        rest = [r for r in fp.receptacles if r not in chosen]
        order = rng.permutation(len(rest))
        target = int(rng.integers(max(len(chosen), limit - 2), limit + 1))
        for i in order:
            if len(chosen) >= target:
                break
            loc = location_id(*fp.receptacles[rest[i]])
            if loc not in used:
                used.add(loc)
                chosen.append(rest[i])
        return sorted(chosen)

    @staticmethod
    def _agent_location(rng: np.random.Generator, fp: FloorPlan, taken: set[str]) -> str:
        for _ in range(100):
            x, z = fp.floor[int(rng.integers(len(fp.floor)))]
            loc = location_id(float(x), float(z), 90 * int(rng.integers(4)), 30)
            if loc not in taken:
                return loc
        raise Redraw
