"""BM25 speed: the fast exact index against rank-bm25 on synthetic search worlds.

Documents are the pages of ``generate_world(size, seed)`` (title and sentences joined);
queries are question-like strings built from random entity names and relation words. Both
implementations are timed through :class:`BM25Retriever` (tokenising and top-10 included),
query by query, alternating which goes first, on wall and CPU clocks; medians (p50) compare.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agentgym.core.timing import timed
from agentgym.envs.search.data import document
from agentgym.envs.search.retrieval.bm25 import BM25Retriever
from agentgym.envs.search.world import World, generate_world

TOP_K = 10
# Reference queries at one size: at most this many documents scored in all (200 at 2k, 50 at
# 100k documents), so the slow reference stays bounded in time.
REFERENCE_DOC_QUERIES = 5_000_000
_TEMPLATES = (
    "Who directed {}?",
    "Where was {} born?",
    "Which company does {} work for?",
    "Where is {} headquartered?",
    "Who founded {}?",
    "When was {} founded?",
    "What is the population of {}?",
    "Which university did {} graduate from?",
    "When was {} released?",
    "Which awards did {} win?",
)


def page_texts(world: World) -> list[str]:
    """Each page as one document, as the free-form search envs index it."""
    return [document(world, e.id) or "" for e in world.entities]


def make_queries(world: World, n: int, seed: int) -> list[str]:
    """``n`` question-like queries: a random template filled with a random entity's name."""
    rng = np.random.default_rng(seed)
    entities = rng.integers(0, len(world.entities), size=n)
    templates = rng.integers(0, len(_TEMPLATES), size=n)
    return [
        _TEMPLATES[t].format(world.entities[e].name)
        for e, t in zip(entities.tolist(), templates.tolist(), strict=True)
    ]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _latencies_ms(
    sides: dict[str, BM25Retriever], queries: Sequence[str], paired: int
) -> tuple[dict[str, list[list[int]]], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Top-10 of every query per side, with its wall and CPU latency in milliseconds.

    The first ``paired`` queries go to every side, alternating which side goes first from
    query to query; the rest to the first side only (the fast one: the slow reference is
    bounded). Each side answers one warm-up query first.
    """
    names = list(sides)
    hits: dict[str, list[list[int]]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for retriever in sides.values():
        retriever.search(queries[0], TOP_K)
    for i, query in enumerate(queries):
        order = names if i % 2 == 0 else names[::-1]
        for name in order if i < paired else names[:1]:
            result, sample = timed(functools.partial(sides[name].search, query, TOP_K))
            hits[name].append(result)
            wall[name].append(sample.wall_s * 1e3)
            cpu[name].append(sample.cpu_s * 1e3)
    return (
        hits,
        {n: np.asarray(v) for n, v in wall.items()},
        {n: np.asarray(v) for n, v in cpu.items()},
    )


def _row(size: int, queries: int, seed: int) -> dict[str, Any]:
    world = generate_world(size, seed)
    texts = page_texts(world)
    query_texts = make_queries(world, queries, seed)
    n_reference = max(1, min(queries, REFERENCE_DOC_QUERIES // size))
    fast, fast_build_s = _timed(lambda: BM25Retriever(texts))
    reference, reference_build_s = _timed(lambda: BM25Retriever(texts, impl="reference"))
    hits, wall, cpu = _latencies_ms(
        {"fast": fast, "reference": reference}, query_texts, n_reference
    )
    agree = [a == b for a, b in zip(hits["fast"], hits["reference"], strict=False)]
    fast_p50, reference_p50 = (
        float(np.percentile(wall["fast"], 50)),
        float(np.percentile(wall["reference"], 50)),
    )
    return {
        "size": size,
        "queries": queries,
        "reference_queries": n_reference,
        "fast_build_s": fast_build_s,
        "reference_build_s": reference_build_s,
        "fast_p50_ms": fast_p50,
        "fast_p95_ms": float(np.percentile(wall["fast"], 95)),
        "reference_p50_ms": reference_p50,
        "reference_p95_ms": float(np.percentile(wall["reference"], 95)),
        "speedup_p50": reference_p50 / fast_p50,
        "fast_cpu_p50_ms": float(np.percentile(cpu["fast"], 50)),
        "reference_cpu_p50_ms": float(np.percentile(cpu["reference"], 50)),
        "speedup_cpu_p50": float(np.percentile(cpu["reference"], 50))
        / max(float(np.percentile(cpu["fast"], 50)), 1e-9),
        "top10_agreement": float(np.mean(agree)),
    }


def bm25_rows(
    sizes: Sequence[int] = (2_000, 100_000), queries: int = 200, seed: int = 0
) -> list[dict[str, Any]]:
    """Fast BM25 against rank-bm25, one row per corpus size with both implementations.

    Args:
        sizes: Numbers of pages (documents) of the synthetic worlds.
        queries: Queries timed on the fast index; the reference runs the first
            ``min(queries, REFERENCE_DOC_QUERIES // size)`` of them (at least one).
        seed: Seed of the worlds and of the queries.

    Returns:
        Rows with keys ``size``, ``queries``, ``reference_queries``, ``fast_build_s`` and
        ``reference_build_s`` (tokenising included), ``fast_p50_ms``, ``fast_p95_ms``,
        ``reference_p50_ms``, ``reference_p95_ms`` (per-query latency of tokenising and
        top-10), ``speedup_p50`` (reference p50 / fast p50) and ``top10_agreement`` (fraction
        of the reference's queries whose top-10 lists are identical; 1.0 expected).
    """
    return [_row(size, queries, seed) for size in sizes]
