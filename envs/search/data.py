"""The data behind a search env: a world, its questions, splits and retrievers.

A preset's world is generated from the preset's own seed, so its data hash is fixed per id;
it is built once per process and shared by every env of that preset. Official datasets load
from a path into the same structures. Retriever indexes of large corpora are cached under
``AGENTGYM_HOME``.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.core.errors import BadInput
from agentgym.core.paths import cache_dir
from agentgym.envs.search.questions import Question, generate_questions
from agentgym.envs.search.retrieval import Retriever
from agentgym.envs.search.world import World, generate_world
from agentgym.terminal import Progress

RETRIEVERS = ("bm25", "bm25-reference", "dense")
CORPORA = ("titles", "pages")
# Indexes of corpora at least this large are cached on disk.
CACHE_MIN_DOCS = 20_000


@dataclass(frozen=True)
class Preset:
    """Size and seeds of one registered world."""

    name: str
    n_pages: int
    n_questions: int
    world_seed: int
    question_seed: int
    stratified: bool = False  # splits drawn per task type (else contiguous, in order)


PRESETS = {
    "small": Preset("small", n_pages=50, n_questions=300, world_seed=1001, question_seed=2001),
    # Small's world with every question it yields (1,505; Small's 300 are their first 300):
    # enough distinct train questions that a policy must learn to read rather than memorise.
    # Its splits are stratified by task type: the generator's tail is all comparisons.
    "small-full": Preset("small-full", 50, 1_000_000, 1001, 2001, stratified=True),
    "medium": Preset("medium", 5000, 3000, world_seed=1002, question_seed=2002),
    "large": Preset("large", 100_000, 10_000, world_seed=1003, question_seed=2003),
}

# Fractions of the question list given to train, val and test, in this order.
SPLIT_FRACTIONS = (0.7, 0.1, 0.2)


def split_ranges(n: int) -> dict[str, range]:
    """Disjoint, contiguous index ranges of the train, val and test splits of ``n`` tasks."""
    floor = 1 if n >= 3 else 0  # tiny datasets (fixtures) still get every split
    n_val = max(int(n * SPLIT_FRACTIONS[1]), floor)
    n_test = max(int(n * SPLIT_FRACTIONS[2]), floor)
    n_train = n - n_val - n_test
    return {
        "train": range(0, n_train),
        "val": range(n_train, n_train + n_val),
        "test": range(n_train + n_val, n),
    }


@dataclass(eq=False)
class SearchData:
    """Everything the envs of one world read; shared, never mutated after loading."""

    name: str
    world: World
    questions: tuple[Question, ...]
    splits: dict[str, tuple[str, ...]]
    by_id: dict[str, Question]
    _retrievers: dict[tuple[str, str], Retriever] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls, name: str, world: World, questions: tuple[Question, ...], stratify_seed: int = -1
    ) -> SearchData:
        """Wrap a world and its questions; splits follow :data:`SPLIT_FRACTIONS`.

        The splits are contiguous ranges of ``questions`` in order, or, with a
        ``stratify_seed`` >= 0, the same ranges of each task type's questions shuffled by it
        (so every split holds the task types in the same proportions).
        """
        groups: list[tuple[str, ...]] = [tuple(q.id for q in questions)]
        if stratify_seed >= 0:
            rng = np.random.default_rng(stratify_seed)
            by_type = [
                [q.id for q in questions if q.task_type == t]
                for t in sorted({q.task_type for q in questions})
            ]
            groups = [tuple(ids[i] for i in rng.permutation(len(ids))) for ids in by_type]
        splits: dict[str, tuple[str, ...]] = {}
        for group in groups:
            for s, r in split_ranges(len(group)).items():
                splits[s] = splits.get(s, ()) + group[r.start : r.stop]
        return cls(name, world, questions, splits, {q.id: q for q in questions})

    @functools.cached_property
    def data_hash(self) -> str:
        """Hash of the world's pages and of the questions' ids and answers."""
        digest = hashlib.sha256(self.world.data_hash().encode())
        for q in self.questions:
            digest.update(f"{q.id}\t{q.text}\t{q.answer}\n".encode())
        return digest.hexdigest()

    def doc_text(self, corpus: str, eid: int, hidden: frozenset[str] = frozenset()) -> str | None:
        """Page ``eid`` as a document of ``corpus``; None when all its sentences are hidden."""
        return document(self.world, eid, corpus, hidden)

    def retriever(self, kind: str, corpus: str) -> Retriever:
        """The retriever ``kind`` over ``corpus`` (page titles or whole pages), built once."""
        if kind not in RETRIEVERS:
            raise BadInput(f"unknown retriever {kind!r}: choose one of {', '.join(RETRIEVERS)}")
        key = (kind, corpus)
        if key not in self._retrievers:
            texts = [self.doc_text(corpus, e) or "" for e in range(len(self.world.entities))]
            self._retrievers[key] = _build_retriever(kind, texts, f"{self.data_hash}-{corpus}")
        return self._retrievers[key]


def document(
    world: World, eid: int, corpus: str = "pages", hidden: frozenset[str] = frozenset()
) -> str | None:
    """Page ``eid`` as a retrieval document, or None when an ablation hides all its sentences.

    The document is its title (corpus "titles"), or its title and visible sentences
    (corpus "pages").
    """
    sids = [s for s in world.pages[eid] if s not in hidden]
    if hidden and not sids:
        return None
    if corpus == "titles":
        return world.entities[eid].title
    body = " ".join(world.sentences[s].text for s in sids)
    return f"{world.entities[eid].title}\n{body}"


def _build_retriever(kind: str, texts: list[str], corpus_hash: str) -> Retriever:
    if kind == "dense":
        from agentgym.envs.search.retrieval.dense import DenseRetriever

        label, slow = f"embedding {len(texts):,} documents", len(texts) > 2_000
        with _progress(label, enabled=slow, total=len(texts)) as bar:
            return DenseRetriever(texts, corpus_hash=corpus_hash, progress=bar)
    from agentgym.envs.search.retrieval.bm25 import BM25Retriever

    impl = "reference" if kind == "bm25-reference" else "fast"
    cache = None
    if impl == "fast" and len(texts) >= CACHE_MIN_DOCS:
        cache = cache_dir("bm25") / f"{corpus_hash}.npz"
    with _progress(f"indexing {len(texts):,} documents for BM25", enabled=len(texts) > 10_000):
        return BM25Retriever(texts, impl=impl, cache_path=cache)


@contextmanager
def _progress(
    label: str, enabled: bool = True, total: int | None = None
) -> Iterator[Callable[[int, int], None] | None]:
    """Progress on stderr (a bar on a terminal, lines elsewhere) for slow first-time builds.

    Yields ``update(done, total)`` for work that counts its units, or None when disabled.
    """
    if not enabled:
        yield None
        return
    with Progress(label, total, unit="documents" if total else "steps") as progress:

        def update(done: int, total: int) -> None:
            progress.total = total
            progress.advance(done - progress.done)

        yield update


@functools.cache
def load(preset_name: str) -> SearchData:
    """Build (once per process) the data of a preset; Large takes a minute the first time."""
    try:
        preset = PRESETS[preset_name]
    except KeyError:
        raise BadInput(f"unknown search preset {preset_name!r}: {sorted(PRESETS)}") from None
    slow = preset.n_pages > 10_000
    with _progress(f"generating a {preset.n_pages:,}-page world", enabled=slow):
        world = generate_world(preset.n_pages, preset.world_seed)
        questions = generate_questions(world, preset.n_questions, preset.question_seed)
    stratify_seed = preset.question_seed if preset.stratified else -1
    return SearchData.build(preset.name, world, questions, stratify_seed)


@functools.lru_cache(maxsize=8)
def load_official(path: str, fmt: str | None = None) -> SearchData:
    """Load an official dataset (HotpotQA, 2WikiMultiHopQA) from a local path."""
    from agentgym.envs.search.loaders import load_official as read

    if not path:
        raise BadInput("this id reads an official dataset: pass path=DIR_OR_FILE")
    world, questions, *_ = read(os.fspath(path), fmt=fmt)
    if len(questions) < 3:
        raise BadInput(f"{path}: need at least 3 usable questions, found {len(questions)}")
    name = f"official:{fmt or 'auto'}:{Path(path).name}"
    return SearchData.build(name, world, questions)


def describe(data: SearchData) -> dict[str, Any]:
    """Sizes of a dataset, for reports."""
    return {
        "name": data.name,
        "pages": len(data.world.entities),
        "sentences": len(data.world.sentences),
        "questions": len(data.questions),
        **{f"{s}_tasks": len(ids) for s, ids in data.splits.items()},
    }
