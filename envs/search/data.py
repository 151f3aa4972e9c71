"""Presets of the search family: the world, its questions, splits and title index per id.

A preset's world is generated from the preset's own seed, so its data hash is fixed per id;
it is built once per process and shared by every env of that preset.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from agentgym.envs.search.questions import Question, generate_questions
from agentgym.envs.search.retrieval import TitleIndex
from agentgym.envs.search.world import World, generate_world


@dataclass(frozen=True)
class Preset:
    """Size and seeds of one registered world."""

    name: str
    n_pages: int
    n_questions: int
    world_seed: int
    question_seed: int
    max_turns: int = 20
    max_menu: int = 256


PRESETS = {
    "small": Preset("small", n_pages=50, n_questions=300, world_seed=1001, question_seed=2001),
    "medium": Preset("medium", n_pages=5000, n_questions=3000, world_seed=1002, question_seed=2002),
}

# Fractions of the question list given to train, val and test, in this order.
SPLIT_FRACTIONS = (0.7, 0.1, 0.2)


@dataclass(frozen=True)
class SearchData:
    """Everything an env of one preset reads; immutable and shared."""

    preset: Preset
    world: World
    questions: tuple[Question, ...]
    by_id: dict[str, Question]
    splits: dict[str, tuple[str, ...]]
    titles: TitleIndex

    @property
    def data_hash(self) -> str:
        """Hash of the world's pages (questions derive from it and a fixed seed)."""
        return self.world.data_hash()


def split_ranges(n: int) -> dict[str, range]:
    """Disjoint, contiguous index ranges of the train, val and test splits of ``n`` tasks."""
    n_train = int(n * SPLIT_FRACTIONS[0])
    n_val = int(n * SPLIT_FRACTIONS[1])
    return {
        "train": range(0, n_train),
        "val": range(n_train, n_train + n_val),
        "test": range(n_train + n_val, n),
    }


@functools.cache
def load(preset_name: str) -> SearchData:
    """Build (once per process) the data of a preset."""
    try:
        preset = PRESETS[preset_name]
    except KeyError:
        raise ValueError(f"unknown search preset {preset_name!r}: {sorted(PRESETS)}") from None
    world = generate_world(preset.n_pages, preset.world_seed)
    questions = generate_questions(world, preset.n_questions, preset.question_seed)
    ids = tuple(q.id for q in questions)
    splits = {name: ids[r.start : r.stop] for name, r in split_ranges(len(ids)).items()}
    titles = TitleIndex([e.title for e in world.entities])
    return SearchData(preset, world, questions, {q.id: q for q in questions}, splits, titles)
