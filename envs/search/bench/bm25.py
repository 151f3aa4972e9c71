"""BM25 speed: the fast exact index against rank-bm25 on synthetic search worlds.

Documents are the pages of ``generate_world(size, seed)`` (title and sentences joined);
queries are question-like strings built from random entity names and relation words. Both
implementations are timed through :class:`BM25Retriever` (tokenising and top-10 included),
query by query, alternating which goes first, on wall and CPU clocks; medians (p50) compare.
Index builds are timed in alternating repeated rounds (:func:`agentgym.core.timing.alternate`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agentgym.core.timing import Alternated, Sample, Stopwatch, alternate
from agentgym.envs.search.bench.dense import interleaved_ms
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


def _builds(texts: list[str], repeats: int) -> tuple[dict[str, BM25Retriever], Alternated]:
    """Both indexes built ``repeats`` times in alternating rounds; the last of each and the runs.

    Only the last index of each side is kept: the previous one is dropped before a build, so
    memory holds at most one of each.
    """
    built: dict[str, BM25Retriever] = {}

    def build(impl: str) -> Callable[[], Sample]:
        def side() -> Sample:
            built.pop(impl, None)
            with Stopwatch() as watch:
                retriever = BM25Retriever(texts, impl=impl)
            built[impl] = retriever
            return watch.sample

        return side

    runs = alternate({"fast": build("fast"), "reference": build("reference")}, repeats, 0)
    return built, runs


def _latencies_ms(
    sides: dict[str, BM25Retriever], queries: Sequence[str], paired: int
) -> tuple[dict[str, list[list[int]]], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Top-10 of every query per side, with its wall and CPU latency in milliseconds.

    The first ``paired`` queries go to every side, alternating which side goes first from
    query to query; the rest to the first side only (the fast one: the slow reference is
    bounded). Each side answers one warm-up query first.
    """
    asked = {name: queries if n == 0 else queries[:paired] for n, name in enumerate(sides)}
    calls = {n: [functools.partial(sides[n].search, q, TOP_K) for q in asked[n]] for n in sides}
    timed = interleaved_ms(calls, warmup=1)
    hits = {name: results for name, (results, _, _) in timed.items()}
    return (
        hits,
        {name: wall for name, (_, wall, _) in timed.items()},
        {name: cpu for name, (_, _, cpu) in timed.items()},
    )


def _row(size: int, queries: int, seed: int, build_repeats: int) -> dict[str, Any]:
    world = generate_world(size, seed)
    texts = page_texts(world)
    query_texts = make_queries(world, queries, seed)
    n_reference = max(1, min(queries, REFERENCE_DOC_QUERIES // size))
    built, builds = _builds(texts, build_repeats)
    # the fast side first: past the paired queries, only the first side answers
    fast, reference = built["fast"], built["reference"]
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
        "build_repeats": build_repeats,
        "fast_build_s": builds.median("fast"),
        "reference_build_s": builds.median("reference"),
        "build_speedup": builds.ratio("reference", "fast"),
        "build_speedup_cpu": builds.ratio("reference", "fast", clock="cpu"),
        "build_timing_s": builds.summary(),
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
    sizes: Sequence[int] = (2_000, 100_000),
    queries: int = 200,
    seed: int = 0,
    build_repeats: int = 3,
) -> list[dict[str, Any]]:
    """Fast BM25 against rank-bm25, one row per corpus size with both implementations.

    Args:
        sizes: Numbers of pages (documents) of the synthetic worlds.
        queries: Queries timed on the fast index; the reference runs the first
            ``min(queries, REFERENCE_DOC_QUERIES // size)`` of them (at least one).
        seed: Seed of the worlds and of the queries.
        build_repeats: Alternating rounds in which both indexes are built.

    Returns:
        Rows with keys ``size``, ``queries``, ``reference_queries``, ``fast_build_s`` and
        ``reference_build_s`` (median build of each, tokenising included; ``build_timing_s``:
        each side's median, min and max on wall and CPU time; ``build_speedup`` and
        ``build_speedup_cpu``: reference / fast from the medians), ``fast_p50_ms``,
        ``fast_p95_ms``, ``reference_p50_ms``, ``reference_p95_ms`` (per-query latency of
        tokenising and top-10), ``speedup_p50`` (reference p50 / fast p50) and
        ``top10_agreement`` (fraction of the reference's queries whose top-10 lists are
        identical; 1.0 expected).
    """
    return [_row(size, queries, seed, build_repeats) for size in sizes]
