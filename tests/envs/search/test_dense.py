"""Dense retriever: all-MiniLM-L6-v2 embeddings searched with faiss, on the CPU and offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agentgym.envs.search.retrieval import Retriever, dense
from agentgym.envs.search.retrieval.dense import DenseRetriever

CORPUS = [
    "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar.",
    "The Great Barrier Reef off Australia is the largest coral reef system on Earth.",
    "Mount Everest is the highest mountain above sea level, on the Nepal-China border.",
    "Penicillin was discovered by Alexander Fleming in 1928.",
    "The Amazon rainforest produces a large share of the world's oxygen.",
    "Jazz music originated in New Orleans in the early twentieth century.",
    "A marathon race covers a distance of about 42 kilometres.",
    "Honey bees communicate the location of flowers through a waggle dance.",
    "The Roman Colosseum could hold tens of thousands of spectators.",
    "Python is a programming language known for its readable syntax.",
    "Volcanoes erupt when molten rock rises through the Earth's crust.",
    "The human heart pumps blood through the body with four chambers.",
    "Chess is a board game played between two players on 64 squares.",
    "The Moon's gravity causes the tides in the Earth's oceans.",
    "Coffee beans are the roasted seeds of the Coffea plant.",
    "The Nile is often considered the longest river in Africa.",
    "Shakespeare wrote the tragedy Hamlet around the year 1600.",
    "Electric cars run on batteries instead of petrol engines.",
    "Antarctica is the coldest and windiest continent.",
    "The violin is a string instrument played with a bow.",
    "Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
    "The Pacific is the largest and deepest of the world's oceans.",
    "Vaccines train the immune system to recognise a pathogen.",
    "The printing press was invented by Johannes Gutenberg around 1440.",
    "Whales are mammals that breathe air through a blowhole.",
    "The Sahara is the largest hot desert in the world.",
    "Solar panels convert sunlight directly into electricity.",
    "The stock market lets investors buy shares in public companies.",
    "Glaciers are slow-moving rivers of ice formed from compacted snow.",
    "Tennis players score points as fifteen, thirty and forty.",
    "The Mona Lisa was painted by Leonardo da Vinci.",
    "Earthquakes happen when tectonic plates suddenly slip past each other.",
    "Owls hunt at night and can turn their heads very far around.",
    "The speed of light in a vacuum is about 300,000 kilometres per second.",
    "Tea originated in China and spread along trade routes.",
    "A rainbow forms when sunlight is refracted by water droplets.",
    "The Great Wall of China stretches for thousands of kilometres.",
    "Bicycles became popular in Europe in the late nineteenth century.",
    "Sushi is a Japanese dish of vinegared rice with fish or vegetables.",
]

PARAPHRASES = {
    "Which scientist found the antibiotic penicillin?": 4,
    "How do bees tell each other where the flowers are?": 8,
    "What makes the sea level rise and fall every day?": 14,
    "Who is the painter of the famous portrait of Lisa?": 31,
    "Why does the ground shake when plates in the crust move?": 32,
    "Which desert is the biggest hot one?": 26,
}

QUERIES = [*PARAPHRASES, "ocean", "music and instruments", "", "history of inventions"]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test writes its caches under its own tmp AGENTGYM_HOME."""
    monkeypatch.setenv("AGENTGYM_HOME", str(tmp_path / "agentgym-home"))


@pytest.fixture(scope="module")
def retriever() -> DenseRetriever:
    return DenseRetriever(CORPUS)


def test_follows_retriever_protocol(retriever: DenseRetriever) -> None:
    assert isinstance(retriever, Retriever)
    assert retriever.name == "dense"
    assert len(retriever) == len(CORPUS)


def test_paraphrase_retrieves_its_document_first(retriever: DenseRetriever) -> None:
    for query, expected in PARAPHRASES.items():
        assert retriever.search(query, 3)[0] == expected, query


def test_returns_top_k_whatever_the_sign(retriever: DenseRetriever) -> None:
    scores = retriever.scores("zzzz qqqq")
    hits = retriever.search("zzzz qqqq", len(CORPUS) + 5)
    assert sorted(hits) == list(range(len(CORPUS)))
    assert hits == sorted(hits, key=lambda i: (-scores[i], i))
    assert retriever.search("anything", 0) == []


def test_encode_is_normalised_and_a_pure_function_of_text() -> None:
    first = dense.encode(CORPUS)
    assert first.dtype == np.float32 and first.shape == (len(CORPUS), dense.DIM)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert dense.encode(CORPUS).tobytes() == first.tobytes()
    # Batch mates, order and batch size change a text's embedding by float32 rounding at most:
    # no padding is involved, but the CPU's matrix kernels may block by batch size.
    reordered = dense.encode(CORPUS[::-1], batch_size=7)[::-1]
    np.testing.assert_allclose(reordered, first, rtol=0, atol=1e-6)
    for i in (0, 13, 39):
        np.testing.assert_allclose(dense.encode([CORPUS[i]])[0], first[i], rtol=0, atol=1e-6)
    assert dense.encode([]).shape == (0, dense.DIM)


def test_encode_ignores_and_keeps_the_torch_thread_setting() -> None:
    import torch

    texts = [*CORPUS, "Kangaroos carry their young in a pouch."]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = dense.encode(texts)
        assert torch.get_num_threads() == 2
        torch.set_num_threads(1)
        one = dense.encode(texts)
    finally:
        torch.set_num_threads(before)
    assert two.tobytes() == one.tobytes()


def test_results_deterministic_across_retrievers(retriever: DenseRetriever) -> None:
    dense._MEMO.clear()
    other = DenseRetriever(CORPUS)
    assert other.embeddings().tobytes() == retriever.embeddings().tobytes()
    for query in QUERIES:
        assert other.search(query, 10) == retriever.search(query, 10)
        assert other.scores(query).tobytes() == retriever.scores(query).tobytes()


def test_ties_broken_by_index() -> None:
    # 15 copies of one document: more than the k + 8 candidates fetched at first.
    copies = [2, 5, 9, 11, 12, 17, 20, 23, 26, 30, 33, 35, 38, 41, 44]
    texts = [f"Filler sentence number {i} about topic {i % 7}." for i in range(46)]
    for i in copies:
        texts[i] = CORPUS[4]
    r = DenseRetriever(texts)
    query = "Who discovered penicillin?"
    scores = r.scores(query)
    assert len({float(scores[i]) for i in copies}) == 1
    for k in (1, 2, 5, 14, 15):
        assert r.search(query, k) == copies[:k]
    assert r.search(query, 20)[:15] == copies


def test_replaced_equals_fresh_build(retriever: DenseRetriever) -> None:
    changes: dict[int, str | None] = {
        3: "Kangaroos carry their young in a pouch.",
        7: None,
        31: None,
        20: CORPUS[0],
    }
    encoded: list[str] = []
    real_encode = dense.encode

    def counting_encode(texts: list[str], *args: object, **kwargs: object) -> np.ndarray:
        encoded.extend(texts)
        return real_encode(texts, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(dense, "encode", counting_encode)
        changed = retriever.replaced(changes)
    assert encoded == [changes[3]]  # doc 0's text was embedded before; removals cost nothing

    texts: list[str | None] = list(CORPUS)
    for i, text in changes.items():
        texts[i] = text
    dense._MEMO.clear()  # the fresh build encodes everything, in its own batches
    fresh = DenseRetriever(texts)
    assert changed.embeddings().tobytes() == fresh.embeddings().tobytes()
    for query in [*QUERIES, "marsupial animals of Australia", "Leonardo's famous painting"]:
        assert changed.scores(query).tobytes() == fresh.scores(query).tobytes()
        hits = changed.search(query, len(CORPUS))
        assert hits == fresh.search(query, len(CORPUS))
        assert 7 not in hits and 31 not in hits
        assert len(hits) == len(CORPUS) - 2
    assert changed.search("animal with a pouch for its babies", 1) == [3]
    assert changed.search("Paris tower built for the World's Fair", 2) == [0, 20]
    # The original is untouched, and a removed document can come back.
    assert retriever.search("Who painted the Mona Lisa?", 1) == [31]
    assert changed.replaced({31: CORPUS[31]}).search("Who painted the Mona Lisa?", 1) == [31]
    with pytest.raises(IndexError):
        retriever.replaced({len(CORPUS): "out of range"})


def test_embeddings_cached_under_agentgym_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "agentgym-home"
    first = DenseRetriever(CORPUS, corpus_hash="corpus-abc")
    files = list((home / "cache" / "dense").glob("*.npy"))
    assert [f.name for f in files] == [f"corpus-abc-{dense.model_hash()[:16]}.npy"]

    def fail(*args: object, **kwargs: object) -> np.ndarray:
        raise AssertionError("encoded although the embeddings are cached")

    dense._MEMO.clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dense, "encode", fail)
        second = DenseRetriever(CORPUS, corpus_hash="corpus-abc")
    assert second.embeddings().tobytes() == first.embeddings().tobytes()
    assert second.search("Who discovered penicillin?", 3) == first.search(
        "Who discovered penicillin?", 3
    )
    DenseRetriever(CORPUS[:5])  # no corpus hash: no file
    assert list((home / "cache" / "dense").iterdir()) == files


def test_unusable_cache_file_is_rebuilt(tmp_path: Path) -> None:
    DenseRetriever(CORPUS[:3], corpus_hash="short")
    (path,) = (tmp_path / "agentgym-home" / "cache" / "dense").glob("*.npy")
    path.write_bytes(b"not an npy file")
    rebuilt = DenseRetriever(CORPUS[:3], corpus_hash="short")
    assert rebuilt.embeddings().tobytes() == dense.encode(CORPUS[:3]).tobytes()
    assert np.load(path, allow_pickle=False).shape == (3, dense.DIM)


def test_model_hash_is_stable() -> None:
    assert dense.model_hash() == dense.model_hash()
    assert len(dense.model_hash()) == 64


_FRESH_PROCESS = textwrap.dedent(
    """
    import json, socket, sys
    attempts = []
    def refuse(*args, **kwargs):
        attempts.append(repr(args[:2]))
        raise OSError("network disabled in this test")
    socket.socket.connect = refuse
    socket.create_connection = refuse
    from agentgym.envs.search.retrieval.dense import DenseRetriever
    texts = json.loads(sys.argv[1])
    r = DenseRetriever(texts, corpus_hash="isolation")
    hits = r.search("Who discovered penicillin?", 2)
    r.replaced({0: "A new first document.", 1: None}).search("document", 3)
    print(json.dumps({"hits": hits, "attempts": attempts}))
    """
)


def test_fresh_process_writes_only_under_agentgym_home_and_stays_offline(tmp_path: Path) -> None:
    home, agentgym_home, tmp, cwd = (tmp_path / n for n in ("home", "agh", "tmp", "cwd"))
    for d in (home, tmp, cwd):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_", "TORCH"))}
    env.pop("TRANSFORMERS_CACHE", None)
    env.update(
        HOME=str(home),
        AGENTGYM_HOME=str(agentgym_home),
        TMPDIR=str(tmp),
        PYTHONDONTWRITEBYTECODE="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, json.dumps(CORPUS[:8])],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["attempts"] == []
    assert result["hits"][0] == 4
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert all(w.startswith(("agh/", "tmp/")) for w in written), written
    assert any(w.startswith("agh/cache/dense/isolation-") for w in written), written


def test_half_precision_scan_returns_the_exact_float32_ranking():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((3000, dense.DIM)).astype(np.float32)
    query = vectors[0] + 0.05 * rng.standard_normal(dense.DIM).astype(np.float32)
    # near-ties closer than the fp16 error, which a half-precision ranking gets wrong
    for i in range(1, 40):
        vectors[i] = query + 1e-4 * rng.standard_normal(dense.DIM).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = (query / np.linalg.norm(query))[None, :].astype(np.float32)
    retriever = dense.DenseRetriever._from_parts([str(i) for i in range(3000)], vectors)
    exact = retriever._exact(query, np.arange(3000))
    expected = np.lexsort((np.arange(3000), -exact))
    for k in (1, 5, 10, 37, 60):
        assert retriever.search_vector(query, k) == expected[:k].tolist()
