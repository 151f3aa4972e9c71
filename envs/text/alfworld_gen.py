"""ALFRED-style PDDL problems for ALFWorld's own domain and grammar, generated from seeds.

A game is what ALFWorld ships in its dataset: a ``game.tw-pddl`` JSON file (``pddl_domain``,
``grammar`` with the task sentence in place of ``UNKNOWN GOAL``, ``pddl_problem``, ``solvable``,
``walkthrough``) beside a ``traj_data.json`` (``task_type``, ``pddl_params``, ``scene``,
``turk_annotations``), in the same folder layout (``<split>/<task folder>/<trial>/``).

The generator is made of:

- :mod:`~agentgym.envs.text.alfworld_presets`: the generator version, task types and presets
  (:class:`GenParams`, whose key names the cache folder and seeds every task);
- :mod:`~agentgym.envs.text.alfworld_data`: the installed ``alfworld`` wheel's domain, grammar,
  floor plans and ALFRED tables, and ALFRED's spelling of ids;
- :mod:`~agentgym.envs.text.alfworld_scenes`: drawing a scene and task (:class:`SceneSampler`);
- :mod:`~agentgym.envs.text.alfworld_pddl`: writing the scene as a PDDL problem;
- :mod:`~agentgym.envs.text.alfworld_planning`: Fast Downward and TextWorld's PDDL engine;
- this module: :func:`generate` (seed to checked game), the on-disk :class:`GameCache` and
  :func:`export_official`. It re-exports the names of the others.

Every game is checked solvable before use: the planner that ships with TextWorld's PDDL
support (Fast Downward) plans from the initial state (on the part of it the goal can involve,
:func:`relevant_problem`: on a whole floor plan its search can take over a minute), and the plan is
executed operator by operator in the whole game until the goal holds. A scene that fails, or
whose plan is longer than the preset allows, is redrawn (a bounded number of attempts,
deterministic in the seed).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.core.paths import cache_dir
from agentgym.envs.text.alfworld_data import (
    AlfworldData,
    FloorPlan,
    alfworld_data,
    import_alfworld,
    location_id,
    mangle,
    receptacle_type,
)
from agentgym.envs.text.alfworld_pddl import (
    goal_section,
    pairs,
    relevant_problem,
    render_problem,
    task_grammar,
)
from agentgym.envs.text.alfworld_planning import (
    LIBS,
    LibPool,
    check_solvable,
    entity_infos,
    execute,
    game_logic,
    new_state,
    plan,
    preserved_argv,
    translate,
)
from agentgym.envs.text.alfworld_presets import GENERATOR_VERSION, PRESETS, TASK_TYPES, GenParams
from agentgym.envs.text.alfworld_scenes import Redraw, Scene, SceneSampler
from agentgym.terminal import Progress

__all__ = [
    "GENERATOR_VERSION",
    "LIBS",
    "MAX_ATTEMPTS",
    "OFFICIAL_FOLDERS",
    "PRESETS",
    "TASK_TYPES",
    "AlfworldData",
    "FloorPlan",
    "GameCache",
    "GenParams",
    "GeneratedGame",
    "LibPool",
    "Scene",
    "SceneSampler",
    "alfworld_data",
    "check_solvable",
    "entity_infos",
    "execute",
    "export_official",
    "game_logic",
    "generate",
    "goal_section",
    "import_alfworld",
    "location_id",
    "mangle",
    "new_state",
    "pairs",
    "plan",
    "preserved_argv",
    "receptacle_type",
    "relevant_problem",
    "render_problem",
    "task_folder",
    "task_grammar",
    "task_seed",
    "translate",
    "write_game",
]

MAX_ATTEMPTS = 40
_SPLIT_CODES = {"train": 0, "val": 1, "test": 2}


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
        except Redraw:
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


_GENERATING: dict[Path, Progress] = {}
_GENERATING_LOCK = threading.Lock()


def _generation_progress(name: str, root: Path) -> Progress:
    """One progress per cache folder, shared by every env of the process that fills it.

    Games are made on demand, so the phase has no known end: its lines say how far it got.
    """
    with _GENERATING_LOCK:
        if root not in _GENERATING:
            label = f"generating ALFWorld {name} games on first use (kept in {root})"
            _GENERATING[root] = Progress(label, unit="games")
        return _GENERATING[root]


class GameCache:
    """Generated games of one preset, made on first use and kept on disk.

    They are kept under ``cache_dir("alfworld")/<generator version and parameters hash>/``.
    """

    def __init__(self, params: GenParams, root: Path | None = None):
        """Cache the games of ``params`` under ``root`` (default ``cache_dir("alfworld")``)."""
        self.params = params
        self.root = (root or cache_dir("alfworld")) / params.key()
        self._lock = threading.Lock()
        self._progress = _generation_progress(params.name, self.root)

    def path(self, split: str, index: int) -> Path:
        """The ``game.tw-pddl`` of task ``index`` of ``split``, generated if missing."""
        trial = self.root / split / f"{index:05d}"
        game = trial / "game.tw-pddl"
        if not game.exists():
            with self._lock:
                if not game.exists():
                    self._progress.start()
                    write_game(generate(self.params, split, index), trial)
                    self._progress.advance()
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
