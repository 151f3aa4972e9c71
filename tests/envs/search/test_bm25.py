"""The fast BM25 index reproduces rank-bm25's BM25Okapi exactly: scores, rankings, ties."""

from __future__ import annotations

import re

import numpy as np
import pytest

from agentgym.envs.search.retrieval import Retriever
from agentgym.envs.search.retrieval.bm25 import (
    BM25Retriever,
    FastBM25,
    ReferenceBM25,
    TitleIndex,
    tokenize,
    top_k_positive,
)

rank_bm25 = pytest.importorskip("rank_bm25")


def _corpus(rng: np.random.Generator, n_docs: int, vocab: int, max_len: int) -> list[list[str]]:
    """Random documents over a Zipf-ish vocabulary (frequent terms get negative idf)."""
    weights = 1.0 / np.arange(1, vocab + 1)
    p = weights / weights.sum()
    return [
        [f"w{t}" for t in rng.choice(vocab, size=int(rng.integers(0, max_len + 1)), p=p)]
        for _ in range(n_docs)
    ]


def _query(rng: np.random.Generator, vocab: int) -> list[str]:
    """1–5 tokens, repeats and unknown tokens included."""
    return [f"w{t}" for t in rng.integers(0, vocab + 3, size=int(rng.integers(1, 6)))]


def _lexsort_top_k(scores: np.ndarray, k: int) -> list[int]:
    order = np.lexsort((np.arange(scores.size), -scores))[:k]
    return [int(i) for i in order if scores[i] > 0]


def _texts(rng: np.random.Generator, n_docs: int, vocab: int = 12) -> list[str]:
    return [" ".join(doc) for doc in _corpus(rng, n_docs, vocab, 8)]


@pytest.mark.parametrize(
    "text",
    ["", "Hello, World!", "a--b  c_d\te\n42x", "Ärger über Öl", "Kelvin \u212a", "İstanbul ß"],
)
def test_tokenize_is_lowercase_alphanumeric_runs(text):
    assert tokenize(text) == re.findall(r"[a-z0-9]+", text.lower())


def test_scores_equal_rank_bm25_on_random_corpora():
    rng = np.random.default_rng(0)
    for _ in range(150):
        vocab = int(rng.integers(1, 20))
        corpus = _corpus(rng, int(rng.integers(1, 40)), vocab, 10)
        if not any(corpus):
            continue
        reference, fast = rank_bm25.BM25Okapi(corpus), FastBM25(corpus)
        for _ in range(10):
            query = _query(rng, vocab)
            # Same operations in the same order: bit-for-bit equal, so ties are ties in both.
            np.testing.assert_array_equal(fast.get_scores(query), reference.get_scores(query))


def test_negative_idf_takes_the_epsilon_floor():
    corpus = [["common", "a"], ["common", "b"], ["common"], ["rare", "common"]]
    fast, reference = FastBM25(corpus), rank_bm25.BM25Okapi(corpus)
    assert reference.idf["common"] == pytest.approx(0.25 * reference.average_idf)
    np.testing.assert_array_equal(fast.get_scores(["common"]), reference.get_scores(["common"]))
    assert fast.top_k(["common"], 2) == [2, 0]  # the shortest document, then ties by id


def test_repeated_query_token_counts_twice():
    corpus = [["x", "y"], ["y"], ["z"]]
    fast = FastBM25(corpus)
    np.testing.assert_array_equal(fast.get_scores(["x", "x"]), 2 * fast.get_scores(["x"]))
    reference = rank_bm25.BM25Okapi(corpus)
    np.testing.assert_array_equal(
        fast.get_scores(["x", "y", "x"]), reference.get_scores(["x", "y", "x"])
    )


@pytest.mark.parametrize(
    "corpus",
    [[["a", "b", "a"]], [[], ["a"], [], ["a", "b"]], [["only"]], [[], []], []],
    ids=["one-document", "empty-documents", "single-term", "all-empty", "no-documents"],
)
def test_edge_corpora_match_the_reference(corpus):
    fast, reference = FastBM25(corpus), ReferenceBM25(corpus)
    assert fast.n_docs == reference.n_docs == len(corpus)
    for query in (["a"], ["b", "a"], ["only"], ["missing"]):
        np.testing.assert_array_equal(fast.get_scores(query), reference.get_scores(query))
        assert fast.top_k(query, 3) == reference.top_k(query, 3)


def test_top_k_equals_a_full_lexsort_with_planted_ties():
    rng = np.random.default_rng(1)
    for _ in range(40):
        vocab = int(rng.integers(2, 15))
        base = _corpus(rng, int(rng.integers(2, 30)), vocab, 8)
        # Duplicated and reordered documents score exactly alike: ties broken by id.
        copies = [base[i][::-1] for i in rng.integers(0, len(base), size=len(base))]
        corpus = base + copies
        fast, reference = FastBM25(corpus), ReferenceBM25(corpus)
        for _ in range(25):
            query = _query(rng, vocab)
            k = int(rng.integers(1, len(corpus) + 3))
            expected = _lexsort_top_k(reference.get_scores(query), k)
            assert fast.top_k(query, k) == expected
            assert reference.top_k(query, k) == expected


def test_top_k_positive_resolves_boundary_ties_by_index_whatever_the_hint():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        scores = rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, -1.0], size=n)
        k = int(rng.integers(0, n + 2))
        expected = _lexsort_top_k(scores, k) if k > 0 else []
        assert top_k_positive(scores, k) == expected
        hint = rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)
        assert top_k_positive(scores, k, hint) == expected


def test_with_documents_scores_exactly_as_rank_bm25_on_the_new_corpus():
    rng = np.random.default_rng(6)
    for _ in range(40):
        vocab = int(rng.integers(2, 16))
        corpus = _corpus(rng, int(rng.integers(1, 25)), vocab, 8)
        index = FastBM25(corpus)
        spec: list[int | list[str]] = []
        for _ in range(int(rng.integers(1, 30))):
            if rng.random() < 0.6:
                spec.append(int(rng.integers(0, len(corpus))))  # reused (maybe twice)
            else:
                spec.append(_corpus(rng, 1, vocab + 4, 8)[0])  # new, maybe new terms
        new_corpus = [corpus[d] if isinstance(d, int) else d for d in spec]
        if not any(new_corpus):
            continue
        derived, reference = index.with_documents(spec), rank_bm25.BM25Okapi(new_corpus)
        for _ in range(10):
            query = _query(rng, vocab + 4)
            np.testing.assert_array_equal(derived.get_scores(query), reference.get_scores(query))


@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_replaced_equals_a_fresh_build_with_original_indices(impl):
    rng = np.random.default_rng(3)
    texts = _texts(rng, 40)
    retriever = BM25Retriever(texts, impl=impl)
    current: list[str | None] = list(texts)
    for _ in range(4):  # chained replacements, removed documents sometimes restored
        picks = rng.choice(len(texts), size=8, replace=False)
        changes = {
            int(i): None if rng.random() < 0.5 else " ".join(_corpus(rng, 1, 14, 8)[0])
            for i in picks
        }
        retriever = retriever.replaced(changes)
        current = [changes.get(i, t) for i, t in enumerate(current)]
        present = [i for i, t in enumerate(current) if t is not None]
        fresh = BM25Retriever([current[i] for i in present], impl=impl)
        for _ in range(20):
            query = " ".join(_query(rng, 14))
            got = retriever.search(query, len(texts))
            assert got == [present[j] for j in fresh.search(query, len(texts))]
            assert not {i for i, t in enumerate(current) if t is None} & set(got)


def test_replaced_leaves_the_original_unchanged_and_checks_its_input():
    texts = ["alpha beta", "beta gamma", "gamma alpha", "delta", "delta epsilon"]
    retriever = BM25Retriever(texts)
    before = retriever.search("alpha", 3)
    assert retriever.replaced({0: None}).search("alpha", 3) == [2]
    assert retriever.search("alpha", 3) == before
    with pytest.raises(IndexError):
        retriever.replaced({5: "x"})
    with pytest.raises(TypeError):
        retriever.replaced({0: 7})  # type: ignore[dict-item]


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    corpus = [*_corpus(rng, 50, 20, 10), ["ünïcode", "_"]]
    index = FastBM25(corpus)
    index.tag = "some tag"
    index.save(tmp_path / "index.npz")
    loaded = FastBM25.load(tmp_path / "index.npz")
    assert loaded.tag == "some tag"
    assert loaded.vocabulary == index.vocabulary
    for _ in range(30):
        query = [*_query(rng, 20), "ünïcode"]
        np.testing.assert_array_equal(loaded.get_scores(query), index.get_scores(query))
        assert loaded.top_k(query, 7) == index.top_k(query, 7)
    changed = [0, ["w1", "w1", "new"], *range(2, 51)]
    np.testing.assert_array_equal(
        loaded.with_documents(changed).get_scores(["w1", "new"]),
        index.with_documents(changed).get_scores(["w1", "new"]),
    )
    (tmp_path / "bad.npz").write_bytes(b"not an index")
    with pytest.raises(Exception):  # noqa: B017  (numpy raises its own error for a non-zip)
        FastBM25.load(tmp_path / "bad.npz")


def test_cache_is_used_only_for_the_same_texts(tmp_path):
    rng = np.random.default_rng(5)
    texts, other = _texts(rng, 30), _texts(rng, 30)
    path = tmp_path / "cache" / "bm25.idx"
    built = BM25Retriever(texts, cache_path=path)
    assert path.exists()
    loaded = BM25Retriever(texts, cache_path=path)
    rebuilt = BM25Retriever(other, cache_path=path)  # stale cache: rebuilt, overwritten
    plain = BM25Retriever(other)
    for _ in range(20):
        query = " ".join(_query(rng, 12))
        assert loaded.search(query, 10) == built.search(query, 10)
        assert rebuilt.search(query, 10) == plain.search(query, 10)
    path.write_bytes(b"corrupt")
    assert BM25Retriever(texts, cache_path=path).search("w0", 5) == built.search("w0", 5)
    with pytest.raises(ValueError):
        BM25Retriever(texts, impl="reference", cache_path=path)


def test_retriever_protocol_and_empty_queries():
    texts = ["Alice Marlow directed Night Harbor.", "Night Harbor was released in 1999.", ""]
    for impl, name in (("fast", "bm25"), ("reference", "bm25-reference")):
        retriever = BM25Retriever(texts, impl=impl)
        assert isinstance(retriever, Retriever)
        assert retriever.name == name
        assert retriever.search("", 5) == []
        assert retriever.search("?!", 5) == []
        assert retriever.search("unknown words", 5) == []
        assert retriever.search("night harbor", 0) == []
        assert retriever.search("Who directed Night Harbor?", 5)[0] == 0
    with pytest.raises(ValueError):
        BM25Retriever(texts, impl="bm25s")


def test_title_index_matches_rank_bm25_on_the_small_preset():
    from agentgym.envs.search import data

    titles = [e.title for e in data.load("small").world.entities]
    titles_with_empty = [*titles, "", "(!)"]
    for corpus_titles in (titles, titles_with_empty):
        index = TitleIndex(corpus_titles)
        reference = rank_bm25.BM25Okapi([tokenize(t) or ["_"] for t in corpus_titles])
        queries = [*titles[:10], titles[3].split()[0], "the", "zzz unknown", ""]
        for query in queries:
            tokens = tokenize(query)
            expected = _lexsort_top_k(reference.get_scores(tokens), 5) if tokens else []
            assert index.search(query) == expected
            assert index.search(query, 2) == expected[:2]


def test_bench_rows_on_a_tiny_world():
    from agentgym.envs.search.bench.bm25 import bm25_rows

    (row,) = bm25_rows(sizes=(40,), queries=5, seed=1, build_repeats=2)
    assert row["size"] == 40
    assert row["reference_queries"] == 5
    assert row["top10_agreement"] == 1.0
    assert row["fast_p50_ms"] > 0 and row["reference_p50_ms"] > 0
    assert row["fast_cpu_p50_ms"] > 0 and row["speedup_cpu_p50"] > 0  # both clocks
    # both indexes built in alternating rounds: a median per side within its own range
    builds = row["build_timing_s"]
    assert set(builds) == {"fast", "reference"}
    for side, timing in builds.items():
        assert timing["runs"] == 2
        assert timing["wall_min_s"] - 1e-6 <= row[f"{side}_build_s"] <= timing["wall_max_s"] + 1e-6
    assert row["build_speedup"] > 0 and row["build_speedup_cpu"] > 0


def test_bench_interleaves_queries_alternating_which_side_goes_first():
    from agentgym.envs.search.bench.bm25 import _latencies_ms

    order: list[str] = []

    class Side:
        def __init__(self, name):
            self.name = name

        def search(self, query, k):
            order.append(self.name)
            return [len(query)]

    hits, wall, cpu = _latencies_ms({"a": Side("a"), "b": Side("b")}, ["q0", "q1", "q22"], 2)
    warmups, paired = ["a", "b"], ["a", "b", "b", "a"]
    assert order == [*warmups, *paired, "a"]  # alternating pairs, then the first side alone
    assert len(hits["a"]) == 3 and len(hits["b"]) == 2  # past `paired`, the first side alone
    assert len(wall["a"]) == len(cpu["a"]) == 3
