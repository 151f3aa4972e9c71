"""ALFRED-style PDDL problems for ALFWorld's own domain and grammar, generated from seeds.

A game is what ALFWorld ships in its dataset: a ``game.tw-pddl`` JSON file (``pddl_domain``,
``grammar`` with the task sentence in place of ``UNKNOWN GOAL``, ``pddl_problem``, ``solvable``,
``walkthrough``) beside a ``traj_data.json`` (``task_type``, ``pddl_params``, ``scene``,
``turk_annotations``), in the same folder layout (``<split>/<task folder>/<trial>/``).

Everything comes from the installed ``alfworld`` wheel: the domain (``alfworld/data/alfred.pddl``),
the text grammar (``alfworld/data/alfred.twl2``), the floor plans (``alfworld/gen/layouts``: the
receptacles with their interaction poses, the object types of each room, the reachable floor
points), ALFRED's tables (``alfworld.gen.constants``: which receptacle holds which object, which
objects can be cleaned, heated, cooled or toggled, which rooms allow which task) and the goals
and task sentences (``alfworld.gen.goal_library``). Problems follow the layout of ALFWorld's
own games: sections objects, init, goal; ALFRED's mangled ids (``Fridge|+00.20|...`` written
``Fridge_bar__plus_00_dot_20...``); ``canContain`` facts for every receptacle and object type
present (putting needs them); cleaning, heating and cooling wired to ``SinkBasinType``,
``MicrowaveType`` and ``FridgeType`` by the domain. Slicing and movable-receptacle tasks are
left out, as ALFWorld's text environment leaves them out.

Every game is checked solvable before use: the planner that ships with TextWorld's PDDL
support (Fast Downward) plans from the initial state (on the part of it the goal can involve,
:func:`relevant_problem`: on a whole floor plan its search can take over a minute), and the plan is
executed operator by operator in the whole game until the goal holds. A scene that fails, or
whose plan is longer than the preset allows, is redrawn (a bounded number of attempts,
deterministic in the seed).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from agentgym.core.paths import cache_dir

GENERATOR_VERSION = 1

# ALFWorld's numbering of the six task types (alfworld.agents.environment.alfred_tw_env).
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

# The appliance and the object property each state-changing task needs (the domain wires
# CleanObject, HeatObject and CoolObject to these receptacle types).
_APPLIANCE = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}
_PROPERTY_FACTS = {
    "Cleanable": "cleanable",
    "Heatable": "heatable",
    "Coolable": "coolable",
    "Toggleable": "toggleable",
}
_LAMPS = ("DeskLamp", "FloorLamp")
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
MAX_ATTEMPTS = 40
_SPLIT_CODES = {"train": 0, "val": 1, "test": 2}


@dataclass(frozen=True)
class GenParams:
    """What a preset fixes about its games (part of the cache key).

    Attributes:
        name: preset name.
        max_receptacles: receptacles kept from the floor plan (None: all of them).
        distractor_types: (low, high) number of other object types placed (None: every object
            type the floor plan lists).
        max_instances: most instances of a distractor object type.
        max_plan: longest planner plan accepted (None: any).
        split_sizes: tasks per split (train, val, test), each a multiple of six.
    """

    name: str
    max_receptacles: int | None
    distractor_types: tuple[int, int] | None
    max_instances: int
    max_plan: int | None
    split_sizes: tuple[int, int, int]

    def key(self) -> str:
        """Short hash of the generator version and these parameters (the cache folder name)."""
        blob = json.dumps({"version": GENERATOR_VERSION, **asdict(self)}, sort_keys=True)
        return f"v{GENERATOR_VERSION}-{self.name}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


PRESETS: dict[str, GenParams] = {
    "small": GenParams(
        name="small",
        max_receptacles=7,
        distractor_types=(3, 6),
        max_instances=2,
        max_plan=10,
        split_sizes=(3000, 120, 120),
    ),
    "standard": GenParams(
        name="standard",
        max_receptacles=None,
        distractor_types=None,
        max_instances=3,
        max_plan=None,
        split_sizes=(3600, 144, 144),
    ),
}


# ---------------------------------------------------------------------- alfworld's data
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


@contextlib.contextmanager
def preserved_argv() -> Iterator[None]:
    """Keep ``sys.argv`` intact across Fast Downward's translator (which overwrites it)."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


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


# ---------------------------------------------------------------------- scenes
class _Retry(Exception):
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


def _choose(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    if not items:
        raise _Retry
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
            if t in d.static_receptacles or t in _LAMPS:
                continue
            if any(t in d.can_contain.get(r, ()) for r in receptacle_types):
                out.append(t)
        return out

    def sample(self, rng: np.random.Generator, split: str, task_type: str) -> Scene:
        """One scene for ``task_type`` from the floor plans of ``split``."""
        d, p = self.data, self.params
        rooms = d.constants.GOALS_VALID[task_type]
        scene = _choose(rng, [s for s in d.scenes(split) if d.room_of(s) in rooms])
        fp = d.floor_plan(scene)
        by_type: dict[str, list[str]] = {}
        for rid in fp.receptacles:
            by_type.setdefault(receptacle_type(rid), []).append(rid)
        placeable = self._placeable(fp, set(by_type))

        appliance, prop = _APPLIANCE.get(task_type, ("", ""))
        toggle = ""
        if appliance and appliance not in by_type:
            raise _Retry
        if task_type == "look_at_obj_in_light":
            toggle = _choose(rng, [t for t in _LAMPS if t in fp.object_types])
            if not any(t in by_type for t in _LAMP_SURFACES):
                raise _Retry
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
            raise _Retry

        # Receptacles: the whole floor plan, or a few around the ones the task needs.
        chosen = self._receptacles(rng, fp, by_type, [parent, appliance], sources, bool(toggle))
        if not chosen:
            raise _Retry
        chosen_types = {receptacle_type(r) for r in chosen}

        objects: dict[str, str] = {}
        taken: set[str] = set()

        def place(t: str, n: int, forbid: str = "") -> None:
            homes = [r for r in chosen if t in d.can_contain.get(receptacle_type(r), ())]
            homes = [r for r in homes if receptacle_type(r) != forbid]
            for _ in range(n):
                rid = _choose(rng, homes)
                objects[_object_id(rng, t, rid, taken)] = rid

        # The task's objects start anywhere but in a receptacle of the target type (else the
        # goal could hold from the start); other object types go wherever they fit.
        low = 2 if task_type == "pick_two_obj_and_place" else 1
        place(otype, int(rng.integers(low, low + 2)), forbid=parent)
        if toggle:
            surfaces = [r for r in chosen if receptacle_type(r) in _LAMP_SURFACES]
            rid = _choose(rng, surfaces)
            objects[_object_id(rng, toggle, rid, taken)] = rid
        others = [t for t in self._placeable(fp, chosen_types) if t != otype]
        if p.distractor_types is not None:
            lo, hi = p.distractor_types
            k = min(len(others), int(rng.integers(lo, hi + 1)))
            others = sorted(rng.choice(others, size=k, replace=False).tolist()) if k else []
        for t in others:
            place(t, int(rng.integers(1, p.max_instances + 1)))

        locations = {r: location_id(*fp.receptacles[r]) for r in chosen}
        agent = self._agent_location(rng, fp, set(locations.values()))
        template = _choose(rng, list(d.goals[task_type]["templates"]))
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

    def _receptacles(
        self,
        rng: np.random.Generator,
        fp: FloorPlan,
        by_type: dict[str, list[str]],
        required: list[str],
        sources: list[str],
        lamp: bool,
    ) -> list[str]:
        limit = self.params.max_receptacles
        if limit is None:
            return list(fp.receptacles)
        needed = [_choose(rng, by_type[t]) for t in required if t]
        needed.append(_choose(rng, [r for t in sources for r in by_type[t]]))
        if lamp and not any(receptacle_type(r) in _LAMP_SURFACES for r in needed):
            surfaces = [r for t in _LAMP_SURFACES for r in by_type.get(t, [])]
            if surfaces:
                needed.append(_choose(rng, surfaces))
        chosen = list(dict.fromkeys(needed))
        used = {location_id(*fp.receptacles[r]) for r in chosen}
        if len(used) < len(chosen):
            raise _Retry
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
        raise _Retry


# ---------------------------------------------------------------------- PDDL
def render_problem(scene: Scene, name: str, data: AlfworldData) -> str:
    """The PDDL problem of ``scene`` in the layout of ALFWorld's games."""
    d = data
    otypes_present = sorted({oid.split("|")[0] for oid in scene.objects})
    rtypes_present = sorted({receptacle_type(r) for r in scene.receptacles})
    locations = sorted({*scene.receptacles.values(), scene.agent_location})

    decl = ["agent1 - agent"]
    decl += [f"{t}Type - otype" for t in d.otypes]
    decl += [f"{t}Type - rtype" for t in d.rtypes]
    decl += [f"{mangle(o)} - object" for o in sorted(scene.objects)]
    decl += [f"{mangle(r)} - receptacle" for r in sorted(scene.receptacles)]
    decl += [f"{mangle(loc)} - location" for loc in locations]

    init = [f"(atLocation agent1 {mangle(scene.agent_location)})"]
    for rid in sorted(scene.receptacles):
        rtype = receptacle_type(rid)
        init.append(f"(receptacleType {mangle(rid)} {rtype}Type)")
        init.append(f"(receptacleAtLocation {mangle(rid)} {mangle(scene.receptacles[rid])})")
        if rtype in d.openable:
            init.append(f"(openable {mangle(rid)})")
    for rtype in rtypes_present:
        for otype in otypes_present:
            if otype in d.can_contain.get(rtype, ()):
                init.append(f"(canContain {rtype}Type {otype}Type)")
    for oid in sorted(scene.objects):
        otype, m = oid.split("|")[0], mangle(oid)
        rid = scene.objects[oid]
        init.append(f"(objectType {m} {otype}Type)")
        if otype not in _LAMPS:
            init.append(f"(pickupable {m})")
        if otype in d.movable:
            init.append(f"(isReceptacleObject {m})")
        for prop, fact in _PROPERTY_FACTS.items():
            if otype in d.action_objects[prop]:
                init.append(f"({fact} {m})")
        init.append(f"(inReceptacle {m} {mangle(rid)})")
        init.append(f"(objectAtLocation {m} {mangle(scene.receptacles[rid])})")

    goal = d.goals[scene.task_type]["pddl"].replace("#", "-")
    goal = goal.format(
        obj=scene.object_target, recep=scene.parent_target, toggle=scene.toggle_target
    )
    pad = "\n        "
    return (
        f"\n(define (problem {name})\n(:domain alfred)\n(:objects{pad}"
        + pad.join(decl)
        + f"\n        )\n\n(:init{pad}"
        + pad.join(init)
        + "\n        )\n\n"
        + goal
    )


def task_grammar(grammar: str, task_text: str) -> str:
    """ALFWorld's grammar with the task sentence (``add_task_to_grammar``)."""
    return grammar.replace("UNKNOWN GOAL", task_text)


# ---------------------------------------------------------------------- planning
class LibPool:
    """Fast Downward libraries, reused across games.

    TextWorld's ``fast_downward.load_lib`` copies the 33 MB shared library and loads the copy
    (the planner's state is global to a copy), so each live game needs its own; a game that
    ends hands its library back here instead of loading a new copy every time.
    """

    def __init__(self) -> None:
        """Start with no library loaded."""
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def acquire(self) -> Any:
        """A library no live game uses."""
        with self._lock:
            if self._free:
                return self._free.pop()
        import fast_downward  # type: ignore[import-untyped]

        return fast_downward.load_lib()

    def release(self, lib: Any) -> None:
        """Hand ``lib`` back for the next game."""
        with self._lock:
            self._free.append(lib)


LIBS = LibPool()

# Receptacle types the domain wires to a goal predicate (CleanObject, HeatObject, CoolObject).
_WIRED = {
    "isclean": ("sinkbasintype", "sinktype"),
    "ishot": ("microwavetype",),
    "iscool": ("fridgetype",),
}
_GOAL_TYPE = re.compile(r"\b([a-z0-9]+type)\b")


def goal_section(problem: str) -> str:
    """The ``(:goal ...)`` section of a problem, with the closing parenthesis of ``define``."""
    i = problem.lower().rfind("(:goal")
    if i < 0:
        raise ValueError("the PDDL problem has no (:goal ...) section")
    return problem[i:]


def pairs(rows: Iterable[tuple[str, ...]]) -> dict[str, str]:
    """Binary facts' arguments as a mapping from the first to the second."""
    return {row[0]: row[1] for row in rows}


def relevant_problem(state: Any, goal: str) -> str:
    """A PDDL problem of the state's current facts restricted to what the goal can involve.

    Kept: the objects of the goal's types and whatever the agent holds; the receptacles of the
    goal's types, of the appliances the goal's predicates need, holding a kept object, or at the
    agent's location (plus one that can take a held object, if none of those can); their
    locations and the agent's. Every other receptacle and object only widens the search (each
    move costs 1 wherever it goes), so a plan here is a plan of the whole game, of the same
    length when the dropped parts would not shorten it.
    """
    facts: dict[str, list[tuple[str, ...]]] = {}
    for f in state.facts:
        # TextWorld records removed facts as "not_" facts; axioms are derived: neither is PDDL.
        if not f.name.startswith(("new-axiom", "not_")):
            facts.setdefault(f.name, []).append(tuple(v.name for v in f.arguments))
    types = set(_GOAL_TYPE.findall(goal.lower()))
    for pred, wired in _WIRED.items():
        if pred in goal.lower():
            types.update(wired)
    otype = pairs(facts.get("objecttype", []))
    rtype = pairs(facts.get("receptacletype", []))
    inside = facts.get("inreceptacle", [])
    r_loc = pairs(facts.get("receptacleatlocation", []))
    o_loc = pairs(facts.get("objectatlocation", []))
    agents = facts.get("atlocation", [])
    here = {loc for _, loc in agents}
    held = {o for _, o in facts.get("holds", [])}

    objects = {o for o, t in otype.items() if t in types} | held
    receptacles = {r for r, t in rtype.items() if t in types}
    receptacles |= {r for o, r in inside if o in objects}
    receptacles |= {r for r, loc in r_loc.items() if loc in here}
    can = set(facts.get("cancontain", []))
    for o in sorted(held - {o for o, t in otype.items() if t in types}):
        if not any((rtype[r], otype[o]) in can for r in receptacles):
            fits = sorted(r for r in rtype if (rtype[r], otype[o]) in can)
            receptacles.update(fits[:1])
    locations = here | {r_loc[r] for r in receptacles} | {o_loc[o] for o in objects if o in o_loc}
    kinds = {"agent", "otype", "rtype"}
    keep = {n for n, t in state.name2type.items() if t in kinds} | objects | receptacles | locations

    decl = sorted(f"{n} - {state.name2type[n]}" for n in keep)
    init = sorted(
        f"({name} {' '.join(args)})"
        for name, rows in facts.items()
        for args in rows
        if all(a in keep for a in args)
    )
    pad = "\n        "
    return (
        f"(define (problem relevant)\n(:domain alfred)\n(:objects{pad}"
        + pad.join(decl)
        + f"\n)\n(:init{pad}"
        + pad.join(init)
        + "\n)\n"
        + goal
    )


def plan(domain: str, state: Any, goal: str) -> list[str] | None:
    """Fast Downward's plan (operator names) from the state's current facts to the goal."""
    import fast_downward

    problem = relevant_problem(state, goal)
    lib = LIBS.acquire()
    try:
        with preserved_argv():
            _, sas = fast_downward.pddl2sas(domain, problem, optimize=True)
        if not lib.solve_sas(sas.encode("utf-8"), False):
            return None
        ops = (fast_downward.Operator * lib.get_last_plan_length())()
        lib.get_last_plan(ops)
        return [op.name for op in ops]
    finally:
        LIBS.release(lib)


@functools.lru_cache(maxsize=16)
def _parsed_logic(domain: str, grammar: str) -> Any:
    from textworld.envs.pddl import logic  # type: ignore[import-untyped]

    return logic.GameLogic(domain=domain, grammar=grammar)


_TASK_RULE = re.compile(r'"task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*"((?:[^"\\]|\\.)*)"\s*\}\s*\]')
_TASK_SLOT = "UNKNOWN GOAL"


@functools.lru_cache(maxsize=64)
def game_logic(domain: str, grammar: str) -> Any:
    """TextWorld's game logic (actions, grammar) of a game, parsed once per process.

    ALFWorld's games share one grammar but for the task sentence, so a grammar whose only
    ``"task"`` rule is a plain sentence is parsed once with the sentence as a slot, and each
    game gets a copy whose ``task`` rule is the sentence parsed as TextWorld parses it (the
    rest of the parsed grammar is shared, read-only).
    """
    match = _TASK_RULE.search(grammar)
    if match is None or grammar.count('"task"') != 1:
        return _parsed_logic(domain, grammar)
    template = grammar[: match.start(1)] + _TASK_SLOT + grammar[match.end(1) :]
    base = _parsed_logic(domain, template)
    textgen = importlib.import_module("textworld.envs.pddl.textgen")
    sentence = json.loads(f'"{match.group(1)}"')
    task = textgen.ProductionRule(
        lhs="task",
        rhs=textgen._parse_and_convert(sentence, rule_name="symbols"),
        weight=1,
        condition="",
    )
    grammar_copy = textgen.ContextSensitiveGrammar()
    grammar_copy._rules.update({k: list(v) for k, v in base.grammar._rules.items()})
    grammar_copy._rules["task"] = [task]
    logic = copy.copy(base)
    logic.grammar = grammar_copy
    return logic


@functools.lru_cache(maxsize=64)
def translate(domain: str, problem: str) -> tuple[Any, str, frozenset[str]]:
    """Fast Downward's translation of a game, done once per process.

    Returns its task, SAS text, and the predicates actions change.
    """
    import fast_downward

    with preserved_argv():
        task, sas = fast_downward.pddl2sas(domain, problem)
    dynamic = frozenset(e.literal.predicate for a in task.actions for e in a.effects)
    return task, sas, dynamic


def new_state(lib: Any, problem: str, logic: Any, translation: tuple[Any, str, Any]) -> Any:
    """TextWorld's ``PddlState`` of a game's initial state, on the library ``lib``.

    The body of ``PddlState.__init__`` with the translation reused (see :func:`translate`) and
    without the second, optimised translation it makes for its own replanner: plans come from
    :func:`plan` instead.
    """
    import fast_downward
    import textworld.logic as tw_logic  # type: ignore[import-untyped]
    from textworld.envs.pddl.logic import Atom, PddlState

    state = PddlState.__new__(PddlState)
    state._facts = defaultdict(set)
    state._vars_by_name = {}
    state._vars_by_type = defaultdict(set)
    state._var_counts = Counter()
    state._logic = logic
    state.downward_lib = lib
    state.pddl_problem = problem
    state.task, state.sas, _ = translation
    state._actions = {a.name: a for a in state.task.actions}
    for type_ in state.task.types:
        with contextlib.suppress(ValueError):
            logic.types.add(tw_logic.Type(type_.name, type_.supertype_names))
    lib.load_sas(state.sas.encode("utf-8"))
    name2type = {o.name: o.type_name for o in state.task.objects}
    state.name2type = name2type
    pddl = fast_downward.translate.pddl

    def proposition(atom: Any) -> Any:
        if isinstance(atom, pddl.conditions.Atom):
            if atom.predicate == "=":
                return None
            args = [tw_logic.Variable(a, name2type[a]) for a in atom.args]
            return tw_logic.Proposition(atom.predicate, args)
        if isinstance(atom, pddl.f_expression.Assign):
            if atom.fluent.symbol == "total-cost":
                return None
            name = f"{atom.expression.value}"
            if str.isdigit(name):
                return None
            args = [tw_logic.Variable(a, name2type[a]) for a in atom.fluent.args]
            return tw_logic.Proposition(name, args)
        return None

    state.add_facts([p for p in map(proposition, state.task.init) if p is not None])
    atoms = (Atom * lib.get_state_size())()
    lib.get_state(atoms)
    facts = [atom.get_fact(name2type) for atom in atoms]
    state.add_facts([f for f in facts if not f.is_negation])
    return state


def execute(state: Any, operator_names: Sequence[str]) -> bool:
    """Apply the operators by name from the current state; True when the goal then holds."""
    for name in operator_names:
        actions = state.all_applicable_actions()
        by_name = {state._operators[a.id].name: a for a in actions}
        if name not in by_name:
            return False
        state.apply(by_name[name])
    return bool(state.check_goal())


# ---------------------------------------------------------------------- games
@dataclass(frozen=True)
class GeneratedGame:
    """A generated game: the ``game.tw-pddl`` and ``traj_data.json`` contents."""

    game: dict[str, Any]
    traj_data: dict[str, Any]
    plan: list[str]


def task_seed(params: GenParams, split: str, index: int) -> list[int]:
    """The seed sequence of one task (stable across processes and machines)."""
    digest = hashlib.sha256(params.key().encode()).digest()
    return [int.from_bytes(digest[:4], "little"), _SPLIT_CODES[split], index]


def generate(params: GenParams, split: str, index: int) -> GeneratedGame:
    """Generate task ``index`` of ``split``: a solvable game whose type is ``index mod 6``."""
    data = alfworld_data()
    task_type = TASK_TYPES[index % len(TASK_TYPES)]
    rng = np.random.default_rng(task_seed(params, split, index))
    sampler = SceneSampler(params, data)
    name = f"plan_{params.name}_{split}_{index}"
    for _ in range(MAX_ATTEMPTS):
        try:
            scene = sampler.sample(rng, split, task_type)
        except _Retry:
            continue
        problem = render_problem(scene, name, data)
        grammar = task_grammar(data.grammar, scene.task_text)
        plan = check_solvable(data.domain, grammar, problem)
        if plan is None or (params.max_plan is not None and len(plan) > params.max_plan):
            continue
        game = {  # the key order of ALFWorld's game files
            "pddl_domain": data.domain,
            "grammar": grammar,
            "pddl_problem": problem,
            "walkthrough": plan,
            "solvable": True,
        }
        traj = {
            "task_id": f"{params.name}_{split}_{index:05d}",
            "task_type": task_type,
            "pddl_params": {
                "object_target": scene.object_target,
                "parent_target": scene.parent_target,
                "toggle_target": scene.toggle_target,
                "mrecep_target": "",
                "object_sliced": False,
            },
            "scene": {"floor_plan": f"FloorPlan{scene.floor_plan}", "scene_num": scene.floor_plan},
            "turk_annotations": {"anns": [{"task_desc": scene.task_text}]},
            "generator": {"version": GENERATOR_VERSION, "preset": params.key()},
        }
        return GeneratedGame(game, traj, plan)
    raise RuntimeError(
        f"no solvable {task_type} game for {params.name} {split} task {index} "
        f"after {MAX_ATTEMPTS} attempts"
    )


def check_solvable(domain: str, grammar: str, problem: str) -> list[str] | None:
    """The planner's plan as commands if executing it in the game reaches the goal, else None."""
    lib = LIBS.acquire()
    try:
        state = new_state(lib, problem, game_logic(domain, grammar), translate(domain, problem))
        if state.check_goal():
            return None  # already won: not a task
        operators = plan(domain, state, goal_section(problem))
        if not operators:
            return None
        commands = state.plan_to_templated_actions(operators, entity_infos(state))
        return list(commands) if execute(state, operators) else None
    finally:
        LIBS.release(lib)


def entity_infos(state: Any) -> dict[str, Any]:
    """TextWorld's entity infos of a state, named as ALFWorld names them (``AlfredDemangler``)."""
    from textworld.generator.game import EntityInfo  # type: ignore[import-untyped]

    misc = import_alfworld("alfworld.agents.utils.misc")
    infos = {}
    for fact in state.facts:
        for v in fact.arguments:
            if v.name not in infos:
                info = EntityInfo(v.name, v.type)
                info.name, info.definite, info.indefinite = v.name, "the", "a"
                infos[v.name] = info
    demangler = misc.Demangler(game_infos=infos, shuffle=False)
    for info in infos.values():
        info.name = demangler.demangle_alfred_name(info.id)
    return infos


def task_folder(traj: dict[str, Any]) -> str:
    """ALFRED's task folder name: ``<type>-<object>-<mrecep or None>-<parent>-<scene>``."""
    p = traj["pddl_params"]
    parent = p["parent_target"] or p["toggle_target"]
    return (
        f"{traj['task_type']}-{p['object_target']}-{p['mrecep_target'] or 'None'}-"
        f"{parent}-{traj['scene']['scene_num']}"
    )


def write_game(game: GeneratedGame, trial_dir: Path) -> None:
    """Write ``game.tw-pddl`` and ``traj_data.json`` into ``trial_dir`` atomically."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(trial_dir / "traj_data.json", json.dumps(game.traj_data, sort_keys=True))
    _atomic_write(trial_dir / "game.tw-pddl", json.dumps(game.game))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class GameCache:
    """Generated games of one preset, made on first use and kept on disk.

    They are kept under ``cache_dir("alfworld")/<generator version and parameters hash>/``.
    """

    def __init__(self, params: GenParams, root: Path | None = None):
        """Cache the games of ``params`` under ``root`` (default ``cache_dir("alfworld")``)."""
        self.params = params
        self.root = (root or cache_dir("alfworld")) / params.key()
        self._lock = threading.Lock()

    def path(self, split: str, index: int) -> Path:
        """The ``game.tw-pddl`` of task ``index`` of ``split``, generated if missing."""
        trial = self.root / split / f"{index:05d}"
        game = trial / "game.tw-pddl"
        if not game.exists():
            with self._lock:
                if not game.exists():
                    print(
                        f"agentgym: generating ALFWorld {self.params.name} {split} task {index}",
                        file=sys.stderr,
                    )
                    write_game(generate(self.params, split, index), trial)
        return game


# ALFWorld's split folders (alfworld/agents/config/base_config.yaml: data_path,
# eval_id_data_path, eval_ood_data_path) for our train, val and test.
OFFICIAL_FOLDERS = {"train": "train", "val": "valid_seen", "test": "valid_unseen"}


def export_official(params: GenParams, root: Path, counts: dict[str, int]) -> list[Path]:
    """Write the first ``counts[split]`` games of each split in ALFWorld's dataset layout.

    ``root/json_2.1.1/{train,valid_seen,valid_unseen}/<task folder>/<trial>/`` with
    ``traj_data.json`` and ``game.tw-pddl`` (what ``ALFWORLD_DATA`` holds); returns the trial
    folders.
    """
    out = []
    for split, n in counts.items():
        for index in range(n):
            game = generate(params, split, index)
            trial = f"trial_T{GENERATOR_VERSION:08d}_{_SPLIT_CODES[split]:06d}_{index:06d}"
            folder = root / "json_2.1.1" / OFFICIAL_FOLDERS[split] / task_folder(game.traj_data)
            write_game(game, folder / trial)
            out.append(folder / trial)
    return out
