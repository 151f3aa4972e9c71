"""TextWorld games generated from seeds and cached under ``AGENTGYM_HOME``.

A game is fixed by :class:`GameSpec` (world size, number of objects, quest length, seed). It
is generated with textworld's own generator the first time it is asked for, compiled to a
``.z8`` story with the Inform7 compiler bundled in textworld, and kept as
``cache_dir("textworld")/<params-hash>/<seed>.{json,z8}``, where the hash covers the
parameters other than the seed and the textworld version; another process or a later session
reuses the files.

Inform7 keeps a user folder (by default ``$HOME/Inform``); here it is
``cache_dir("textworld")/inform7``, and the compilers run with ``HOME`` pointing there too.
Nothing else is written but temporary folders under the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import textworld
from textworld.generator import make_game
from textworld.generator.inform7 import generate_inform7_source
from textworld.generator.inform7.world2inform7 import (
    I7_DEFAULT_PATH,
)

from agentgym.core.paths import cache_dir

#: Bump when the way games are generated changes: old caches are then ignored.
GENERATOR_FORMAT = 1


@dataclass(frozen=True)
class GameSpec:
    """Everything textworld's generator needs to make one game."""

    world_size: int
    nb_objects: int
    quest_length: int
    seed: int

    def params(self) -> dict[str, Any]:
        """The generation parameters other than the seed (the cache key's contents)."""
        params = asdict(self)
        del params["seed"]
        params["textworld"] = textworld.__version__
        params["format"] = GENERATOR_FORMAT
        return params

    @property
    def key(self) -> str:
        """A short hash of :meth:`params`: the name of the cache folder."""
        blob = json.dumps(self.params(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def path(self) -> Path:
        """Where the compiled game lives (its ``.json`` metadata lies beside it)."""
        return cache_dir("textworld") / self.key / f"{self.seed}.z8"


def ensure_game(spec: GameSpec) -> Path:
    """The path of ``spec``'s compiled game, generating it on first use (about a second)."""
    path = spec.path
    if not path.is_file():
        _generate(spec, path)
    return path


def _generate(spec: GameSpec, path: Path) -> None:
    """Generate and compile in a private folder, then move the files into place atomically.

    The ``.z8`` moves last, so that a reader that sees it finds the ``.json`` too.
    """
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    sys.stderr.write(
        f"agentgym: generating TextWorld game {spec.seed} ({spec.world_size} rooms, "
        f"{spec.nb_objects} objects, quest length {spec.quest_length}) into {folder}\n"
    )
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{spec.seed}-", dir=folder))
    try:
        options = textworld.GameOptions()
        options.seeds = spec.seed
        options.nb_rooms = spec.world_size
        options.nb_objects = spec.nb_objects
        options.quest_length = spec.quest_length
        game = make_game(options)
        game.save(str(work / path.with_suffix(".json").name))
        _compile(generate_inform7_source(game), work / path.name, work / "project")
        (work / "params.json").write_text(json.dumps(spec.params(), sort_keys=True, indent=1))
        for name in ("params.json", path.with_suffix(".json").name, path.name):
            os.replace(work / name, folder / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compile(source: str, z8: Path, project: Path) -> None:
    """Compile Inform7 ``source`` to ``z8`` with the compilers bundled in textworld.

    This is what textworld's ``compile_game`` does, except that Inform7 skips its HTML index
    (a quarter of the time) and keeps its user folder, by default ``$HOME/Inform``, under the
    cache.
    """
    inform = Path(os.environ.get("INFORM_HOME", I7_DEFAULT_PATH)) / "share" / "inform7"
    external = cache_dir("textworld") / "inform7"
    external.mkdir(exist_ok=True)
    (project / "Source").mkdir(parents=True)
    (project / "Source" / "story.ni").write_text(source)
    (project / "uuid.txt").touch()
    env = {**os.environ, "HOME": str(external)}
    ni = [inform / "Compilers" / "ni", "--internal", inform / "Internal", "--format=.z8"]
    ni += ["--project", project, "-noindex", "-noprogress", "-external", external]
    _run(ni, env)
    _run([inform / "Compilers" / "inform6", "-E2wSv8F0", project / "Build" / "auto.inf", z8], env)


def _run(command: list[Any], env: dict[str, str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{Path(command[0]).name} failed ({done.returncode}) compiling a TextWorld game:\n"
            + (done.stdout + done.stderr)[-2000:]
        )
