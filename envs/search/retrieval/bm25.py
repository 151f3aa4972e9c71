"""BM25Okapi retrieval: an exact fast sparse index and the rank-bm25 reference it reproduces.

:class:`FastBM25` (:mod:`~agentgym.envs.search.retrieval.bm25_fast`) reimplements
``rank_bm25.BM25Okapi`` (k1=1.5, b=0.75, epsilon=0.25) over a term-major CSR matrix of
precomputed per-(term, document) weights

    idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))

with idf(t) = log(N − n + 0.5) − log(n + 0.5), negative idfs replaced by epsilon × the average
idf over all terms (built by :mod:`~agentgym.envs.search.retrieval.bm25_build`). Every weight
is computed with the same floating-point operations, in the same order, as rank-bm25, and a
query adds the posting lists of its tokens in query order (a repeated token counts twice)
exactly as rank-bm25 adds its per-token score vectors, so scores are bit-for-bit rank-bm25's
and ties are ties in both. Rankings are by (−score, document id), keeping only positive scores.

:class:`BM25Retriever` follows :class:`~agentgym.envs.search.retrieval.Retriever` over raw
texts with either implementation; :class:`TitleIndex` is the page-title index of the search
family (an empty title indexes as the placeholder token ``"_"``).
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from agentgym.envs.search.retrieval.bm25_build import EPSILON, K1, B, FloatArray
from agentgym.envs.search.retrieval.bm25_fast import FastBM25, top_k_positive

__all__ = [
    "BM25Retriever",
    "FastBM25",
    "ReferenceBM25",
    "TitleIndex",
    "corpus_fingerprint",
    "tokenize",
    "top_k_positive",
]

_TOKEN = re.compile(r"[a-z0-9]+")
# ASCII characters other than [a-z0-9] become spaces: for ASCII text, ``split()`` after this
# translation gives exactly ``_TOKEN.findall`` (and is about twice as fast).
_SEPARATORS = str.maketrans(
    {c: " " for c in range(128) if not ("a" <= chr(c) <= "z" or "0" <= chr(c) <= "9")}
)
_IMPLS = {"fast": "bm25", "reference": "bm25-reference"}


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric tokens.

    Args:
        text: Any text.

    Returns:
        The maximal runs of ``[a-z0-9]`` in ``text.lower()``, in order.
    """
    lowered = text.lower()
    if lowered.isascii():
        return lowered.translate(_SEPARATORS).split()
    return _TOKEN.findall(lowered)


class ReferenceBM25:
    """``rank_bm25.BM25Okapi`` with :class:`FastBM25`'s interface and ranking rule.

    An empty corpus, or one without any token (where rank-bm25 divides by zero), scores 0.
    """

    def __init__(
        self,
        corpus: Iterable[Sequence[str]],
        *,
        k1: float = K1,
        b: float = B,
        epsilon: float = EPSILON,
    ) -> None:
        """Index ``corpus`` with rank-bm25.

        Args:
            corpus: Tokenized documents.
            k1: Term-frequency saturation.
            b: Length normalisation.
            epsilon: Floor of negative idfs, as a fraction of the average idf.
        """
        from rank_bm25 import BM25Okapi

        documents = [list(doc) for doc in corpus]
        self.n_docs = len(documents)
        self._bm25 = BM25Okapi(documents, k1=k1, b=b, epsilon=epsilon) if any(documents) else None

    def get_scores(self, query_tokens: Sequence[str]) -> FloatArray:
        """rank-bm25's score of every document."""
        if self._bm25 is None:
            return np.zeros(self.n_docs, dtype=np.float64)
        scores: FloatArray = self._bm25.get_scores(list(query_tokens))
        return scores

    def top_k(self, query_tokens: Sequence[str], k: int) -> list[int]:
        """The ``k`` best documents with a positive score, ordered by (−score, document id)."""
        if k <= 0 or not query_tokens:
            return []
        return top_k_positive(self.get_scores(query_tokens), k)


def corpus_fingerprint(texts: Sequence[str]) -> str:
    """SHA-256 of ``texts`` (length-prefixed UTF-8), to tell whether a cache is current."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class BM25Retriever:
    """BM25Okapi over raw texts, following the ``Retriever`` protocol.

    Document ``i`` is ``texts[i]`` tokenized with :func:`tokenize`. Results are document
    indices ordered by (−score, index), positive scores only.

    Attributes:
        name: ``"bm25"`` (fast) or ``"bm25-reference"`` (rank-bm25).
    """

    def __init__(
        self,
        texts: Sequence[str],
        *,
        impl: str = "fast",
        cache_path: Path | None = None,
    ) -> None:
        """Index ``texts``.

        Args:
            texts: The documents.
            impl: ``"fast"`` (:class:`FastBM25`) or ``"reference"`` (:class:`ReferenceBM25`).
            cache_path: Fast index only: load the index from this ``.npz`` if it exists and
                was built from the same texts, else build it and save it there.

        Raises:
            ValueError: If ``impl`` is unknown, or ``cache_path`` is given for the reference.
        """
        if impl not in _IMPLS:
            raise ValueError(f"unknown BM25 impl {impl!r}: {sorted(_IMPLS)}")
        if cache_path is not None and impl != "fast":
            raise ValueError("cache_path is only supported by the fast implementation")
        self.name = _IMPLS[impl]
        self._impl = impl
        self._texts: tuple[str | None, ...] = tuple(texts)
        self._rows = np.arange(len(self._texts), dtype=np.int64)  # index row -> text index
        self._index: FastBM25 | ReferenceBM25
        if cache_path is None:
            self._index = self._build(self._doc_tokens(t) for t in texts)
        else:
            self._index = self._cached(list(texts), Path(cache_path))

    @staticmethod
    def _doc_tokens(text: str) -> list[str]:
        """Tokens a document is indexed under."""
        return tokenize(text)

    def _build(self, corpus: Iterable[list[str]]) -> FastBM25 | ReferenceBM25:
        return FastBM25(corpus) if self._impl == "fast" else ReferenceBM25(corpus)

    def _cached(self, texts: list[str], path: Path) -> FastBM25:
        fingerprint = f"{type(self).__name__}:{corpus_fingerprint(texts)}"
        if path.exists():
            try:
                cached = FastBM25.load(path)
            except (ValueError, OSError, KeyError, zipfile.BadZipFile):
                cached = None  # unreadable: rebuild and overwrite
            if cached is not None and cached.tag == fingerprint:
                return cached
        index = FastBM25(self._doc_tokens(t) for t in texts)
        index.tag = fingerprint
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        index.save(partial)
        os.replace(partial, path)  # readers never see a half-written cache
        return index

    def __len__(self) -> int:
        """Number of document slots, removed ones included."""
        return len(self._texts)

    def search(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best documents with a positive score, best first; ties by index.

        Args:
            query: Query text; no known token gives ``[]``.
            k: How many results at most.

        Returns:
            Document indices (never a removed one).
        """
        tokens = tokenize(query)
        if not tokens or k <= 0:
            return []
        return [int(self._rows[r]) for r in self._index.top_k(tokens, k)]

    def replaced(self, changes: Mapping[int, str | None]) -> BM25Retriever:
        """A retriever with ``changes[i]`` as document ``i``'s new text (``None``: removed).

        Scores equal those of a retriever built from scratch on the present documents (removed
        ones count in neither N nor avgdl), yet results keep the original indices.

        Args:
            changes: New text (or ``None``) by document index.

        Returns:
            A new retriever; this one is unchanged.

        Raises:
            IndexError: If an index is out of range.
            TypeError: If a new text is neither a string nor ``None``.
        """
        for i, text in changes.items():
            if not 0 <= i < len(self._texts):
                raise IndexError(f"document {i} out of range [0, {len(self._texts)})")
            if text is not None and not isinstance(text, str):
                raise TypeError(f"document {i}: expected str or None, got {type(text).__name__}")
        texts = tuple(changes.get(i, t) for i, t in enumerate(self._texts))
        present = [i for i, t in enumerate(texts) if t is not None]
        clone = object.__new__(type(self))
        clone.name, clone._impl, clone._texts = self.name, self._impl, texts
        clone._rows = np.asarray(present, dtype=np.int64)
        clone._index = self._rebuilt(texts, present, changes)
        return clone

    def _rebuilt(
        self, texts: tuple[str | None, ...], present: list[int], changes: Mapping[int, str | None]
    ) -> FastBM25 | ReferenceBM25:
        if isinstance(self._index, ReferenceBM25):
            return self._build([self._doc_tokens(texts[i] or "") for i in present])
        row_of = {int(text_index): row for row, text_index in enumerate(self._rows)}
        documents: list[int | Sequence[str]] = [
            self._doc_tokens(texts[i] or "") if i in changes else row_of[i] for i in present
        ]
        return self._index.with_documents(documents)


class TitleIndex(BM25Retriever):
    """BM25Okapi over page titles (``titles[i]`` is page ``i``); ties broken by page id.

    A title without tokens indexes as the placeholder token ``"_"`` (as it always has), so it
    still counts in N and avgdl but no query matches it.
    """

    def __init__(self, titles: Sequence[str]) -> None:
        """Index ``titles`` with the fast implementation."""
        super().__init__(titles)

    @staticmethod
    def _doc_tokens(text: str) -> list[str]:
        return tokenize(text) or ["_"]

    def search(self, query: str, k: int = 5) -> list[int]:
        """Ids of the ``k`` best-scoring pages with a positive score, best first."""
        return super().search(query, k)
