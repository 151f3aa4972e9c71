"""Dense retrieval speed: faiss search at corpus scale and query encoding, timed apart.

The searches (faiss with its threads, faiss on one thread, ours) are timed query by query,
interleaved with the order alternating, on wall and CPU clocks (CPU time counts every
thread, so a multi-threaded search shows more CPU than wall time).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from agentgym.core.timing import interleave

K = 10
WARMUP = 3

_SUBJECTS = (
    "Oscar Lockhart",
    "Verent Holdings",
    "Tolliver University",
    "the river Aske",
    "Mount Calder",
    "the Harrow Prize",
    "Lena Morrow",
    "the city of Venireach",
)
_TEMPLATES = (
    "Who founded {}?",
    "Where was {} born?",
    "When was {} established?",
    "What is {} best known for?",
    "Which university did {} attend?",
    "Who leads {} today?",
    "In which country is {}?",
)


def _questions(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` short question-like strings."""
    return [
        _TEMPLATES[rng.integers(len(_TEMPLATES))].format(_SUBJECTS[rng.integers(len(_SUBJECTS))])
        for _ in range(n)
    ]


def _unit_rows(n: int, rng: np.random.Generator, dim: int) -> np.ndarray:
    """``n`` random float32 vectors of length one."""
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def _timed_ms(calls: Sequence[Callable[[], Any]]) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Each call's result, wall and CPU time in ms, after a few untimed warm-up calls."""
    return interleaved_ms({"only": calls})["only"]


def interleaved_ms(
    sides: Mapping[str, Sequence[Callable[[], Any]]], warmup: int = WARMUP
) -> dict[str, tuple[list[Any], np.ndarray, np.ndarray]]:
    """Per side: each call's result, wall and CPU ms (:func:`~agentgym.core.timing.interleave`)."""
    out = {}
    for name, (results, samples) in interleave(sides, warmup=warmup).items():
        wall = np.array([x.wall_s for x in samples]) * 1000
        out[name] = (results, wall, np.array([x.cpu_s for x in samples]) * 1000)
    return out


def _row(
    op: str, n_docs: int, times_ms: np.ndarray, cpu_ms: np.ndarray, note: str
) -> dict[str, Any]:
    return {
        "op": op,
        "n_docs": n_docs,
        "queries": len(times_ms),
        "p50_ms": round(float(np.percentile(times_ms, 50)), 3),
        "p95_ms": round(float(np.percentile(times_ms, 95)), 3),
        "cpu_p50_ms": round(float(np.percentile(cpu_ms, 50)), 3),
        "note": note,
    }


def dense_rows(n_docs: int = 100_000, queries: int = 100, seed: int = 0) -> list[dict[str, Any]]:
    """Per-query latency of the dense retriever's two parts, measured separately.

    Query encoding: one short question at a time through
    :func:`agentgym.envs.search.retrieval.dense.encode` (model loaded before timing). Faiss
    search: the top ``K`` of an ``IndexFlatIP`` over ``n_docs`` random unit vectors (encoding
    a real corpus that size would take many minutes on a small CPU), queried with the encoded
    questions; encoding is not included.

    Args:
        n_docs: Vectors in the faiss index.
        queries: Timed queries for each part.
        seed: Seed of the random vectors and questions.

    Returns:
        Rows ``{op, n_docs, queries, p50_ms, p95_ms, note}``: faiss's exact flat search with
        its own OpenMP thread count and with one thread (the peers), our retriever's exact
        search, then query encoding.
    """
    import faiss

    from agentgym.envs.search.retrieval import dense

    rng = np.random.default_rng(seed)
    texts = _questions(queries, rng)
    dense.load_encoder()
    encoders: list[Callable[[], Any]] = [functools.partial(dense.encode, [t]) for t in texts]
    encoded, encode_ms, encode_cpu = _timed_ms(encoders)

    vectors = _unit_rows(n_docs, rng, dense.DIM)
    index = faiss.IndexFlatIP(dense.DIM)
    index.add(vectors)
    ours = dense.DenseRetriever._from_parts([f"doc {i}" for i in range(n_docs)], vectors)
    threads = faiss.omp_get_max_threads()

    def one_thread(v: np.ndarray) -> Any:
        faiss.omp_set_num_threads(1)
        try:
            return index.search(v, K)
        finally:
            faiss.omp_set_num_threads(threads)

    timed_sides = interleaved_ms(
        {
            "faiss": [functools.partial(index.search, v, K) for v in encoded],
            "faiss 1 thread": [functools.partial(one_thread, v) for v in encoded],
            "ours": [functools.partial(ours.search_vector, v, K) for v in encoded],
        }
    )
    note = "random unit float32 vectors as the corpus; query encoding excluded"
    _, search_ms, search_cpu = timed_sides["faiss"]
    _, single_ms, single_cpu = timed_sides["faiss 1 thread"]
    _, ours_ms, ours_cpu = timed_sides["ours"]
    flat = f"faiss IndexFlatIP search, top {K}"
    return [
        _row(flat, n_docs, search_ms, search_cpu, f"{note}; {threads} threads"),
        _row(flat, n_docs, single_ms, single_cpu, f"{note}; 1 thread"),
        _row(
            f"DenseRetriever exact search, top {K}",
            n_docs,
            ours_ms,
            ours_cpu,
            f"{note}; fp16 scan + exact float32 rescoring, 1 thread",
        ),
        _row(
            "query encoding (all-MiniLM-L6-v2, CPU, 1 thread)",
            0,
            encode_ms,
            encode_cpu,
            "one short question per call; model load excluded",
        ),
    ]
