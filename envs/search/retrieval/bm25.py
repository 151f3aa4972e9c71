"""BM25Okapi retrieval: an exact fast sparse index and the rank-bm25 reference it reproduces.

:class:`FastBM25` reimplements ``rank_bm25.BM25Okapi`` (k1=1.5, b=0.75, epsilon=0.25) over a
term-major CSR matrix of precomputed per-(term, document) weights

    idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))

with idf(t) = log(N − n + 0.5) − log(n + 0.5), negative idfs replaced by epsilon × the average
idf over all terms. Every weight is computed with the same floating-point operations, in the
same order, as rank-bm25, and a query adds the posting lists of its tokens in query order (a
repeated token counts twice) exactly as rank-bm25 adds its per-token score vectors, so scores
are bit-for-bit rank-bm25's and ties are ties in both. Rankings are by (−score, document id),
keeping only positive scores.

:class:`BM25Retriever` follows :class:`~agentgym.envs.search.retrieval.Retriever` over raw
texts with either implementation; :class:`TitleIndex` is the page-title index of the search
family (an empty title indexes as the placeholder token ``"_"``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

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
_FORMAT = "agentgym-bm25/1"
_IMPLS = {"fast": "bm25", "reference": "bm25-reference"}

K1 = 1.5
B = 0.75
EPSILON = 0.25
# Terms in more than this fraction of the documents also get a dense weight column: adding a
# dense column is several times faster than scattering a long posting list.
DENSE_FRACTION = 0.25

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


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


def top_k_positive(scores: FloatArray, k: int, hint: IntArray | None = None) -> list[int]:
    """Indices of the ``k`` best positive scores ordered by (−score, index).

    Equal to ``np.lexsort((np.arange(n), -scores))[:k]`` filtered to positive scores, but
    only the candidates at or above the k-th best score are sorted.

    Args:
        scores: One score per document.
        k: How many indices at most; ``k <= 0`` gives ``[]``.
        hint: Optional distinct indices likely to score high (e.g. the documents of the
            query's rarest term). The k-th best score among them bounds the k-th best overall
            from below, which cuts the candidates cheaply; any hint gives the same result.

    Returns:
        Document indices, best first.
    """
    if k <= 0:
        return []
    candidates = np.flatnonzero(scores > 0)  # reassigned below when the hint bounds better
    if hint is not None and hint.size >= k:
        values = scores[hint]
        floor = np.partition(values, values.size - k)[values.size - k]
        if floor > 0:
            candidates = np.flatnonzero(scores >= floor)
    if candidates.size > k:
        values = scores[candidates]
        kth_best = np.partition(values, values.size - k)[values.size - k]
        candidates = candidates[values >= kth_best]  # keeps every tie at the boundary
    order = np.lexsort((candidates, -scores[candidates]))[:k]
    return [int(i) for i in candidates[order]]


@dataclass(frozen=True)
class _Counts:
    """Term counts of a tokenized corpus, documents in order.

    Attributes:
        vocab: Term of each term id (may include terms no document contains any more).
        doc_ptr: Document ``d``'s entries are ``[doc_ptr[d], doc_ptr[d + 1])``.
        terms: Term id of each entry; within a document in order of first occurrence.
        tf: Count of the entry's term in its document.
        doc_len: Number of tokens of each document.
    """

    vocab: list[str]
    doc_ptr: IntArray
    terms: IntArray
    tf: IntArray
    doc_len: IntArray

    @property
    def n_docs(self) -> int:
        """Number of documents."""
        return int(self.doc_len.size)


def _count_corpus(corpus: Iterable[Sequence[str]], vocab: Sequence[str] = ()) -> _Counts:
    """Count the terms of each document; term ids extend ``vocab`` in order of first use."""
    ids: defaultdict[str, int] = defaultdict()
    ids.default_factory = ids.__len__  # an unseen term gets the next id
    ids.update((term, i) for i, term in enumerate(vocab))
    sizes: list[int] = []
    terms: list[int] = []
    tf: list[int] = []
    doc_len: list[int] = []
    for document in corpus:
        counts = Counter(document)  # insertion order = first occurrence
        terms.extend(map(ids.__getitem__, counts))
        tf.extend(counts.values())
        sizes.append(len(counts))
        doc_len.append(len(document))
    return _Counts(
        vocab=list(ids),
        doc_ptr=_offsets(np.asarray(sizes, dtype=np.int64)),
        terms=np.asarray(terms, dtype=np.int64),
        tf=np.asarray(tf, dtype=np.int64),
        doc_len=np.asarray(doc_len, dtype=np.int64),
    )


def _offsets(sizes: IntArray) -> IntArray:
    """``[0, sizes[0], sizes[0] + sizes[1], ...]``."""
    out = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


def _gather_rows(ptr: IntArray, rows: IntArray) -> IntArray:
    """Entry positions of ``rows`` of a ragged array with offsets ``ptr``, rows in order."""
    starts, sizes = ptr[rows], ptr[rows + 1] - ptr[rows]
    new_ptr = _offsets(sizes)
    return np.repeat(starts - new_ptr[:-1], sizes) + np.arange(new_ptr[-1], dtype=np.int64)


def _select(counts: _Counts, rows: IntArray) -> _Counts:
    """The documents ``rows`` of ``counts`` (in that order) as a corpus of their own."""
    entries = _gather_rows(counts.doc_ptr, rows)
    sizes = counts.doc_ptr[rows + 1] - counts.doc_ptr[rows]
    return _Counts(
        vocab=counts.vocab,
        doc_ptr=_offsets(sizes),
        terms=counts.terms[entries],
        tf=counts.tf[entries],
        doc_len=counts.doc_len[rows],
    )


def _concat(first: _Counts, second: _Counts) -> _Counts:
    """``first``'s documents then ``second``'s (``second.vocab`` must extend ``first.vocab``)."""
    return _Counts(
        vocab=second.vocab,
        doc_ptr=np.concatenate([first.doc_ptr, second.doc_ptr[1:] + first.doc_ptr[-1]]),
        terms=np.concatenate([first.terms, second.terms]),
        tf=np.concatenate([first.tf, second.tf]),
        doc_len=np.concatenate([first.doc_len, second.doc_len]),
    )


def _idf(counts: _Counts, epsilon: float) -> FloatArray:
    """rank-bm25's idf of every term id (0 for terms in no document).

    rank-bm25 sums the idfs in the order terms first occur in the corpus, with plain float
    additions; the same order and operations are used here so the epsilon floor is identical.
    """
    n_docs, n_entries = counts.n_docs, counts.terms.size
    df = np.bincount(counts.terms, minlength=len(counts.vocab))
    first_entry = np.full(len(counts.vocab), n_entries, dtype=np.int64)
    np.minimum.at(first_entry, counts.terms, np.arange(n_entries, dtype=np.int64))
    present = np.flatnonzero(df)
    in_corpus_order = present[np.argsort(first_entry[present], kind="stable")]
    by_df: dict[int, float] = {}
    for n in np.unique(df[present]).tolist():
        by_df[n] = math.log(n_docs - n + 0.5) - math.log(n + 0.5)
    ordered = [by_df[n] for n in df[in_corpus_order].tolist()]
    idf_sum = 0.0
    for value in ordered:
        idf_sum += value
    floor = epsilon * (idf_sum / len(ordered)) if ordered else 0.0
    idf = np.zeros(len(counts.vocab), dtype=np.float64)
    idf[in_corpus_order] = [value if value >= 0 else floor for value in ordered]
    return idf


def _entry_weights(counts: _Counts, idf: FloatArray, k1: float, b: float) -> FloatArray:
    """BM25 weight of each entry, with rank-bm25's operations in rank-bm25's order."""
    if counts.terms.size == 0:
        return np.zeros(0, dtype=np.float64)
    avgdl = int(counts.doc_len.sum()) / counts.n_docs
    norm = k1 * (1 - b + b * counts.doc_len / avgdl)
    sizes = np.diff(counts.doc_ptr)
    doc_norm = np.repeat(norm, sizes)
    tf = counts.tf
    weights: FloatArray = idf[counts.terms] * (tf * (k1 + 1) / (tf + doc_norm))
    return weights


class FastBM25:
    """Exact BM25Okapi over a term-major CSR matrix of precomputed weights.

    Scores are bit-for-bit those of ``rank_bm25.BM25Okapi`` on the same tokenized corpus.

    Attributes:
        k1: Term-frequency saturation.
        b: Length normalisation.
        epsilon: Floor of negative idfs, as a fraction of the average idf.
        tag: Free text saved with the index (e.g. a fingerprint of the corpus).
    """

    def __init__(
        self,
        corpus: Iterable[Sequence[str]],
        *,
        k1: float = K1,
        b: float = B,
        epsilon: float = EPSILON,
    ) -> None:
        """Index ``corpus`` (document ``i`` is ``corpus[i]``, a list of tokens).

        Args:
            corpus: Tokenized documents; empty documents are allowed.
            k1: Term-frequency saturation.
            b: Length normalisation.
            epsilon: Floor of negative idfs, as a fraction of the average idf.
        """
        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self.tag = ""
        self._set_counts(_count_corpus(corpus))

    def _set_counts(self, counts: _Counts) -> None:
        """Compute the term-major weight matrix of ``counts``."""
        self._counts = counts
        weights = _entry_weights(counts, _idf(counts, self.epsilon), self.k1, self.b)
        order = np.argsort(counts.terms, kind="stable")  # by term, then document
        doc_of_entry = np.repeat(np.arange(counts.n_docs, dtype=np.int64), np.diff(counts.doc_ptr))
        self._indptr = _offsets(np.bincount(counts.terms, minlength=len(counts.vocab)))
        self._docs = doc_of_entry[order]
        self._weights = weights[order]
        self._prepare_lookup()

    def _prepare_lookup(self) -> None:
        """Term ids by term, and dense weight columns of the most frequent terms."""
        self._ids = {term: i for i, term in enumerate(self._counts.vocab)}
        df = np.diff(self._indptr)
        frequent = np.flatnonzero(df > DENSE_FRACTION * self.n_docs)
        self._dense_row = {int(term): row for row, term in enumerate(frequent)}
        self._dense = np.zeros((frequent.size, self.n_docs), dtype=np.float64)
        for row, term in enumerate(frequent):
            lo, hi = self._indptr[term], self._indptr[term + 1]
            self._dense[row, self._docs[lo:hi]] = self._weights[lo:hi]

    @classmethod
    def _from_counts(cls, counts: _Counts, k1: float, b: float, epsilon: float) -> FastBM25:
        index = cls.__new__(cls)
        index.k1, index.b, index.epsilon, index.tag = k1, b, epsilon, ""
        index._set_counts(counts)
        return index

    @property
    def n_docs(self) -> int:
        """Number of documents."""
        return self._counts.n_docs

    @property
    def avgdl(self) -> float:
        """Average document length in tokens (0 for an empty corpus)."""
        n = self.n_docs
        return int(self._counts.doc_len.sum()) / n if n else 0.0

    @property
    def vocabulary(self) -> list[str]:
        """Every indexed term (a copy)."""
        return list(self._counts.vocab)

    def get_scores(self, query_tokens: Sequence[str]) -> FloatArray:
        """BM25 score of every document; a repeated token counts once per occurrence.

        Args:
            query_tokens: Query tokens; unknown tokens add nothing.

        Returns:
            ``float64`` array of length :attr:`n_docs`.
        """
        scores = np.zeros(self.n_docs, dtype=np.float64)
        for token in query_tokens:  # in query order, as rank-bm25 adds them
            term = self._ids.get(token)
            if term is None:
                continue
            row = self._dense_row.get(term)
            if row is not None:  # adding 0.0 leaves other documents' scores bit-identical
                np.add(scores, self._dense[row], out=scores)
            else:
                lo, hi = self._indptr[term], self._indptr[term + 1]
                scores[self._docs[lo:hi]] += self._weights[lo:hi]
        return scores

    def top_k(self, query_tokens: Sequence[str], k: int) -> list[int]:
        """The ``k`` best documents with a positive score, ordered by (−score, document id).

        Args:
            query_tokens: Query tokens.
            k: How many documents at most.

        Returns:
            Document ids, best first.
        """
        if k <= 0 or not query_tokens:
            return []
        return top_k_positive(
            self.get_scores(query_tokens), k, self._rarest_postings(query_tokens, k)
        )

    def _rarest_postings(self, query_tokens: Sequence[str], k: int) -> IntArray | None:
        """Documents of the query's rarest term found in at least ``k`` documents."""
        best: tuple[int, int] | None = None  # (df, term)
        for token in query_tokens:
            term = self._ids.get(token)
            if term is None:
                continue
            df = int(self._indptr[term + 1] - self._indptr[term])
            if df >= k and (best is None or df < best[0]):
                best = (df, term)
        if best is None:
            return None
        lo = self._indptr[best[1]]
        return self._docs[lo : lo + best[0]]

    def with_documents(self, documents: Sequence[int | Sequence[str]]) -> FastBM25:
        """A new index over ``documents``, built as if from scratch.

        Args:
            documents: Each either the id of a document of this index (reused without
                recounting) or a new document's tokens.

        Returns:
            An index whose document ``i`` is ``documents[i]``, with the same parameters.
        """
        rows: list[int] = []  # row of each document in this index's documents + new_docs
        new_docs: list[Sequence[str]] = []
        for doc in documents:
            if isinstance(doc, (int, np.integer)):
                if not 0 <= doc < self.n_docs:
                    raise IndexError(f"document id {doc} out of range [0, {self.n_docs})")
                rows.append(int(doc))
            else:
                rows.append(self.n_docs + len(new_docs))
                new_docs.append(doc)
        combined = _concat(self._counts, _count_corpus(new_docs, self._counts.vocab))
        selected = _select(combined, np.asarray(rows, dtype=np.int64))
        return self._from_counts(selected, self.k1, self.b, self.epsilon)

    def save(self, path: str | Path) -> None:
        """Write the index to exactly ``path`` as an uncompressed ``.npz`` (nothing pickled).

        Args:
            path: Target file (``.npz`` is not appended).
        """
        vocab_bytes, vocab_ptr = _encode_strings(self._counts.vocab)
        with Path(path).open("wb") as handle:  # every array is numeric or str: nothing pickled
            np.savez(
                handle,
                format=np.array(_FORMAT),
                tag=np.array(self.tag),
                params=np.array([self.k1, self.b, self.epsilon], dtype=np.float64),
                vocab_bytes=vocab_bytes,
                vocab_ptr=vocab_ptr,
                doc_ptr=self._counts.doc_ptr,
                terms=self._counts.terms,
                tf=self._counts.tf,
                doc_len=self._counts.doc_len,
                indptr=self._indptr,
                docs=self._docs,
                weights=self._weights,
            )

    @classmethod
    def load(cls, path: str | Path) -> FastBM25:
        """Read an index written by :meth:`save`.

        Args:
            path: The ``.npz`` file.

        Returns:
            The index, scoring exactly as the saved one.

        Raises:
            ValueError: If the file is not a saved index of this format.
        """
        with np.load(Path(path), allow_pickle=False) as data:
            if "format" not in data.files or str(data["format"]) != _FORMAT:
                raise ValueError(f"{path} is not a {_FORMAT} index")
            k1, b, epsilon = (float(x) for x in data["params"])
            index = cls.__new__(cls)
            index.k1, index.b, index.epsilon = k1, b, epsilon
            index.tag = str(data["tag"])
            vocab = _decode_strings(data["vocab_bytes"], data["vocab_ptr"])
            index._counts = _Counts(
                vocab, data["doc_ptr"], data["terms"], data["tf"], data["doc_len"]
            )
            index._indptr, index._docs = data["indptr"], data["docs"]
            index._weights = data["weights"]
        index._prepare_lookup()
        return index


def _encode_strings(strings: Sequence[str]) -> tuple[npt.NDArray[np.uint8], IntArray]:
    """UTF-8 bytes of ``strings`` concatenated, and their offsets."""
    encoded = [s.encode("utf-8") for s in strings]
    sizes = np.asarray([len(e) for e in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), _offsets(sizes)


def _decode_strings(data: npt.NDArray[np.uint8], ptr: IntArray) -> list[str]:
    """Inverse of :func:`_encode_strings`."""
    raw = data.tobytes()
    bounds = ptr.tolist()
    return [raw[lo:hi].decode("utf-8") for lo, hi in itertools.pairwise(bounds)]


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
