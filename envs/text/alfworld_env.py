"""ALFWorld household tasks as a gymnasium env (:class:`ALFWorldEnv`).

Tasks are games generated for ALFWorld's own PDDL domain (:mod:`agentgym.envs.text.alfworld_gen`)
or ALFWorld's official games, played on :class:`~agentgym.envs.text.alfworld_game.AlfredGame`
(TextWorld's PDDL engine with the text derived fast); this module adds the task lists, the
goal progress, the skill hints, the oracle and snapshots.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from agentgym.core.env import SPLITS, AgentEnv, Transition
from agentgym.core.errors import BadInput, ResetNeeded, SnapshotMismatch
from agentgym.core.spaces import String
from agentgym.envs.text import alfworld_gen as gen
from agentgym.envs.text.alfworld_game import AlfredGame
from agentgym.envs.text.alfworld_grammar import FastGrammar
from agentgym.envs.text.alfworld_memory import PlaceMemory

__all__ = [
    "NOTHING_HAPPENS",
    "SKILL_HINTS",
    "ALFWorldEnv",
    "AlfredGame",
    "FastGrammar",
    "official_root",
]

NOTHING_HAPPENS = "Nothing happens."
PLAN_SHOWN = 8
"""How many of the planner's next commands ``privileged_context`` shows."""

SKILL_HINTS = {
    "pick_and_place_simple": (
        "Find the object (open closed receptacles to look inside), take it, go to the target "
        "receptacle, open it if it is closed, then move the object to it."
    ),
    "look_at_obj_in_light": (
        "Find the object and take it, then go to the receptacle where the lamp stands and use "
        "the lamp while holding the object."
    ),
    "pick_clean_then_place_in_recep": (
        "Find the object, take it, go to the sinkbasin, clean it with the sinkbasin, then go to "
        "the target receptacle and move the object to it."
    ),
    "pick_heat_then_place_in_recep": (
        "Find the object, take it, go to the microwave, heat it with the microwave, then go to "
        "the target receptacle and move the object to it."
    ),
    "pick_cool_then_place_in_recep": (
        "Find the object, take it, go to the fridge, cool it with the fridge, then go to the "
        "target receptacle and move the object to it."
    ),
    "pick_two_obj_and_place": (
        "Find one object, take it, move it to the target receptacle; then find a second object "
        "of the same kind, take it and move it to the same receptacle."
    ),
}


# ---------------------------------------------------------------------- progress
class _Goal:
    """The task's goal conditions, counted on the engine's facts for ``info["progress"]``."""

    def __init__(self, task_type: str, params: dict[str, Any]):
        self.task_type = task_type
        self.obj = f"{params.get('object_target', '')}type".lower()
        self.recep = f"{params.get('parent_target', '')}type".lower()
        self.toggle = f"{params.get('toggle_target', '')}type".lower()

    def progress(self, state: Any) -> float:
        """Fraction of the goal conditions met (1.0 exactly when the goal holds)."""
        facts: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for sig, found in state._facts.items():
            if sig.name in _PROGRESS_PREDICATES:
                facts[sig.name].extend(tuple(v.name for v in f.arguments) for f in found)
        otype = gen.pairs(facts["objecttype"])
        rtype = gen.pairs(facts["receptacletype"])
        objs = {o for o, t in otype.items() if t == self.obj}
        placed = [
            (o, r) for o, r in facts["inreceptacle"] if o in objs and rtype.get(r) == self.recep
        ]
        t = self.task_type
        if t == "pick_and_place_simple":
            return 1.0 if placed else 0.0
        if t == "pick_two_obj_and_place":
            per = Counter(r for _, r in placed)
            return min(max(per.values(), default=0), 2) / 2
        if t == "look_at_obj_in_light":
            held = any(o in objs for _, o in facts["holds"])
            here = {loc for _, loc in facts["atlocation"]}
            r_loc = gen.pairs(facts["receptacleatlocation"])
            lit = {o for (o,) in facts["istoggled"] if otype.get(o) == self.toggle}
            on = any(o in lit and r_loc.get(r) in here for o, r in facts["inreceptacle"])
            return (held + on) / 2
        prop = {"clean": "isclean", "heat": "ishot", "cool": "iscool"}[t.split("_")[1]]
        done = {o for (o,) in facts[prop] if o in objs}
        if not done:
            return 0.0
        return 1.0 if any(o in done for o, _ in placed) else 0.5


_PROGRESS_PREDICATES = frozenset(
    {
        "objecttype",
        "receptacletype",
        "inreceptacle",
        "holds",
        "atlocation",
        "receptacleatlocation",
        "istoggled",
        "isclean",
        "ishot",
        "iscool",
    }
)


# ---------------------------------------------------------------------- tasks
@functools.lru_cache(maxsize=8)
def _official_tasks(root: str) -> dict[str, tuple[str, ...]]:
    """Task ids (trial folders relative to ``root``) per split, filtered as ALFWorld does.

    The filter is that of ALFWorld's ``AlfredTWEnv.collect_game_files``: the six task types,
    no movable or sliced trials, a game file marked solvable.
    """
    out: dict[str, tuple[str, ...]] = {}
    for split, folder in gen.OFFICIAL_FOLDERS.items():
        found = []
        base = Path(root) / folder
        for traj in sorted(base.glob("*/*/traj_data.json")):
            rel = traj.parent.relative_to(root).as_posix()
            if "movable" in rel or "Sliced" in rel:
                continue
            if _official_type(traj) in gen.TASK_TYPES and _solvable(traj.parent / "game.tw-pddl"):
                found.append(rel)
        out[split] = tuple(found)
    return out


def _official_type(traj: Path) -> str:
    prefix = traj.parent.parent.name.split("-", 1)[0]
    if prefix in gen.TASK_TYPES:
        return prefix
    return str(json.loads(traj.read_text())["task_type"])


def _solvable(game: Path) -> bool:
    if not game.exists():
        return False
    with game.open("rb") as f:
        f.seek(max(0, game.stat().st_size - 200))
        tail = f.read().decode("utf-8", "replace")
    m = re.search(r'"solvable":\s*(true|false)', tail)
    if m:
        return m.group(1) == "true"
    return bool(json.loads(game.read_text()).get("solvable"))


def official_root(path: str | os.PathLike[str] | None) -> Path:
    """The ``json_2.1.1`` folder of ALFWorld's data at ``path`` or ``$ALFWORLD_DATA``."""
    where = path if path is not None else os.environ.get("ALFWORLD_DATA")
    hint = (
        "pass path=DIR or set ALFWORLD_DATA to a folder holding "
        "json_2.1.1/{train,valid_seen,valid_unseen}"
    )
    if not where:
        raise BadInput(f"ALFWorld-Official needs ALFWorld's data: {hint}")
    root = Path(where).expanduser()
    if (root / "json_2.1.1").is_dir():
        root = root / "json_2.1.1"
    if not all((root / f).is_dir() for f in gen.OFFICIAL_FOLDERS.values()):
        raise BadInput(f"no ALFWorld data at {str(root)!r}: {hint}")
    return root.resolve()


# ---------------------------------------------------------------------- the env
class ALFWorldEnv(AgentEnv[str, str]):
    """Household tasks of ALFWorld, as text, on TextWorld's PDDL engine.

    ## Description
    An ALFRED room (kitchen, living room, bedroom or bathroom) with receptacles and objects,
    and one of ALFWorld's six task types: pick and place, look at an object under a lamp,
    clean / heat / cool an object then place it, place two objects. Games are generated for
    ALFWorld's own PDDL domain and grammar from the floor plans shipped in the alfworld wheel
    (presets ``small`` and ``standard``; see :mod:`agentgym.envs.text.alfworld_gen`), or read
    from ALFWorld's official data (preset ``official``: ``path`` or ``$ALFWORLD_DATA``, the
    ``json_2.1.1`` layout; train, valid_seen and valid_unseen are our train, val and test).

    ## Tasks
    Generated presets: task ids ``<split>-<index>`` (small: 3000 / 120 / 120 for train / val /
    test; standard: 3600 / 144 / 144); the task type is ``TASK_TYPES[index % 6]``, so the six
    types come in equal shares. Train and val draw rooms from ALFRED's training scenes, test
    from its held-out scenes (ALFWorld's seen / unseen split). Small keeps at most 7
    receptacles of the room and a few other objects (plans of at most 10 steps); standard keeps
    the whole floor plan. Official: the trial folders ALFWorld's ``AlfredTWEnv`` would load.

    ## Observation
    Text, byte for byte what ALFWorld's ``AlfredTWEnv`` shows: the intro ("-= Welcome to
    TextWorld, ALFRED! =-", the room, "Your task is to: ...") on reset, then the feedback of
    each command ("Nothing happens." for one that is not admissible). With ``memory=True``
    (the ``-v1`` ids) every observation after the intro ends with one more line, the memory
    of what the agent has been shown (:mod:`~agentgym.envs.text.alfworld_memory`): ``Seen:
    countertop 1 (apple 1), cabinet 1 (closed). Unseen: drawer 1. Holding: nothing.``

    ## Action
    Text (:class:`~agentgym.core.spaces.String`): one of ``info["admissible_actions"]``
    (TextWorld's admissible commands, sorted as TextWorld sorts them), surrounding whitespace
    ignored. Anything else costs a turn and changes nothing (``action_valid`` False).

    ## Rewards
    1.0 on the turn the goal holds, else 0. ``info["reward_components"]``: success.
    ``info["progress"]``: the fraction of the goal conditions met (object placed; object
    cleaned / heated / cooled and placed; object held and lamp on at the agent's location;
    two objects placed).

    ## Termination
    Terminates when the goal holds; truncates after ``max_turns`` (30 on small, 50 otherwise).

    ## Snapshots
    The engine's state is native (a Fast Downward library) and cannot be serialised, so a
    snapshot holds the operators applied so far; ``restore`` replays them on a fresh game and
    checks the hash of the last feedback (:class:`~agentgym.core.errors.SnapshotMismatch`).
    Pickling goes through the same route.

    ## Privileged
    ``privileged_context``: the task type's skill hint (:data:`SKILL_HINTS`) and the
    planner's next commands from the current state (the ones ``oracle_action`` would play,
    at most :data:`PLAN_SHOWN`), on two lines: ``Skill: Find the object, ...`` and ``Plan: go
    to countertop 1 > take apple 1 from countertop 1 > ...``; ``Plan: done.`` once won.

    ## Registered ids
    ``agentgym/ALFWorld-Small-v0`` (preset small), ``agentgym/ALFWorld-Standard-v0`` (preset
    standard), ``agentgym/ALFWorld-Official-v0`` (preset official, ``path``); the ``-v1`` ids
    of Small and Standard add the memory line.

    ## Version history
    v0: first version.
    v1: the memory line (a policy that sees a window of turns knows what it has searched).
    """

    family = "text"
    domain = "alfworld"
    supports_snapshot = True
    default_max_turns = 50
    skill_hints: ClassVar[dict[str, str]] = SKILL_HINTS
    """The skill hint of each task type (what teachers' skill libraries reuse)."""

    def __init__(
        self, preset: str = "small", path: str | None = None, memory: bool = False, **kwargs: Any
    ):
        """Create the env.

        Args:
            preset: "small" or "standard" (generated games), or "official" (ALFWorld's data).
            path: for "official", the data folder (``$ALFWORLD_DATA`` if None); its
                ``json_2.1.1`` folder or the folder holding it.
            memory: end every observation after the intro with the memory line of what the
                agent has been shown (:class:`~agentgym.envs.text.alfworld_memory.PlaceMemory`).
            **kwargs: split, privileged, max_turns, render_mode (see :class:`AgentEnv`).
        """
        if preset not in (*gen.PRESETS, "official"):
            raise BadInput(f"unknown ALFWorld preset {preset!r}: use small, standard or official")
        if preset == "small":
            kwargs.setdefault("max_turns", 30)
        super().__init__(**kwargs)
        self.preset = preset
        self.memory = bool(memory)
        self._memory = PlaceMemory()
        self.observation_space = String()
        self.action_space = String()
        self._root: Path | None = None
        self._cache: gen.GameCache | None = None
        if preset == "official":
            self._root = official_root(path)
            self._tasks = _official_tasks(str(self._root))
        else:
            params = gen.PRESETS[preset]
            self._cache = gen.GameCache(params)
            self._tasks = {
                split: tuple(f"{split}-{i:05d}" for i in range(n))
                for split, n in zip(SPLITS, params.split_sizes, strict=True)
            }
        self._task_sets = {s: frozenset(ids) for s, ids in self._tasks.items()}
        self._game: AlfredGame | None = None
        self._game_task: str | None = None
        self._traj: dict[str, Any] = {}
        self._goal: _Goal | None = None
        self._history: list[str] = []
        self._plan: list[str] = []
        self._plan_key = ""

    # ------------------------------------------------------------------ tasks
    def task_ids(self, split: str | None = None) -> Sequence[str]:
        """The task ids of ``split`` (the env's own split if None)."""
        return self._tasks[split or self.split]

    def _has_task(self, task_id: str) -> bool:
        return any(task_id in ids for ids in self._task_sets.values())

    def task_type_of(self, task_id: str) -> str:
        """One of ALFWorld's six task type names."""
        if self._root is not None:
            return _official_type(self._root / task_id / "traj_data.json")
        return gen.TASK_TYPES[int(task_id.rsplit("-", 1)[1]) % len(gen.TASK_TYPES)]

    def game_path(self, task_id: str) -> Path:
        """The ``game.tw-pddl`` of ``task_id`` (generated on first use for generated presets)."""
        if self._root is not None:
            return self._root / task_id / "game.tw-pddl"
        assert self._cache is not None
        split, index = task_id.rsplit("-", 1)
        return self._cache.path(split, int(index))

    def _config(self) -> dict[str, Any]:
        memory = {"memory": True} if self.memory else {}
        if self._cache is not None:
            return {"preset": self.preset, "games": self._cache.params.key(), **memory}
        ids = json.dumps(self._tasks, sort_keys=True).encode()
        return {"preset": self.preset, "tasks": hashlib.sha256(ids).hexdigest(), **memory}

    # ------------------------------------------------------------------ episodes
    def _load(self, task_id: str) -> AlfredGame:
        if self._game is None or self._game_task != task_id:
            path = self.game_path(task_id)
            if self._game is not None:
                self._game.close()
            self._game = AlfredGame(json.loads(path.read_text()))
            self._game_task = task_id
            self._traj = json.loads((path.parent / "traj_data.json").read_text())
            self._goal = _Goal(self.task_type_of(task_id), self._traj.get("pddl_params", {}))
        return self._game

    def _start(self, task_id: str) -> tuple[str, dict[str, Any]]:
        game = self._load(task_id)
        obs = game.reset()
        self._memory = PlaceMemory.from_intro(obs)
        self._history = []
        self._plan, self._plan_key = [], ""
        return obs, self._info(valid=True)

    def _apply(self, action: Any) -> Transition:
        game = self._game
        assert game is not None
        command = action.strip() if isinstance(action, str) else None
        valid = command is not None and command in game._by_command
        if valid:
            assert command is not None
            operator = game.operator_of(command)
            game.step(command)
            self._history.append(operator)
        info = self._info(valid=valid)
        if valid and self._plan and self._plan[0] == command:
            self._plan.pop(0)  # on plan: the rest of the plan holds from the new state
            self._plan_key = info["state_key"]
        reward = 1.0 if info["won"] else 0.0
        obs = game.feedback if valid else NOTHING_HAPPENS
        if self.memory:
            if valid:
                self._memory.observe(obs)
            obs = f"{obs}\n{self._memory.line()}"
        return Transition(obs, reward, info["won"], info)

    def _info(self, *, valid: bool) -> dict[str, Any]:
        game = self._game
        assert game is not None and self._goal is not None
        won = game.won
        return {
            "action_valid": bool(valid),
            "won": won,
            "admissible_actions": list(game.admissible),
            "state_key": game.state_key(),
            "reward_components": {"success": 1.0 if won else 0.0},
            "progress": 1.0 if won else float(self._goal.progress(game.state)),
            "segments": [],
            "provenance": {"visited": [], "cited": [], "produced": [], "consumed": []},
        }

    def _privileged_info(self) -> dict[str, Any]:
        """``privileged_context``: the task type's skill hint, then the planner's next commands.

        Two lines, ``Skill: <hint>`` and ``Plan: <cmd> > <cmd> > …`` with at most
        :data:`PLAN_SHOWN` commands (then ``" > ..."``); ``Plan: done.`` once the goal holds.
        """
        assert self._task_id is not None and self._game is not None
        hint = SKILL_HINTS[self.task_type_of(self._task_id)]
        if self._game.won:
            return {"privileged_context": f"Skill: {hint}\nPlan: done."}
        plan = self._current_plan()
        shown = " > ".join(plan[:PLAN_SHOWN]) + (" > ..." if len(plan) > PLAN_SHOWN else "")
        return {"privileged_context": f"Skill: {hint}\nPlan: {shown}"}

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str:
        """The next command of the planner's plan from the current state.

        The plan is made again when the state is not the one the plan expects.
        """
        if self._game is None:
            raise ResetNeeded("oracle_action() needs a started episode: call reset() first")
        return self._current_plan()[0]

    def _current_plan(self) -> list[str]:
        """The planner's commands from the current state (kept while the agent follows them).

        Planning reads the engine's state and changes nothing, so the privileged plan and the
        oracle see the same plan.
        """
        game = self._game
        assert game is not None
        key = game.state_key()
        if not self._plan or self._plan_key != key:
            self._plan = game.plan() or ["look"]
            self._plan_key = key
        return self._plan

    # ------------------------------------------------------------------ snapshots
    def _get_state(self) -> dict[str, Any]:
        game = self._game
        assert game is not None
        state: dict[str, Any] = {
            "operators": list(self._history),
            "feedback_sha256": hashlib.sha256(game.feedback.encode()).hexdigest(),
        }
        if self.memory:  # v0's snapshots stay as they were
            state["memory"] = self._memory.to_json()
        return state

    def _set_state(self, state: dict[str, Any]) -> None:
        assert self._task_id is not None
        game = self._load(self._task_id)
        game.reset()
        feedback = game.replay(state["operators"])
        if hashlib.sha256(feedback.encode()).hexdigest() != state["feedback_sha256"]:
            raise SnapshotMismatch(
                f"replaying the snapshot of task {self._task_id} gave another observation"
            )
        self._history = list(state["operators"])
        memory = state.get("memory")  # only an env with the memory line keeps it
        self._memory = PlaceMemory() if memory is None else PlaceMemory.from_json(memory)
        self._plan, self._plan_key = [], ""

    def close(self) -> None:
        """Release the game's planner library."""
        if self._game is not None:
            self._game.close()
            self._game = None
            self._game_task = None
