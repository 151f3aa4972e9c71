"""The fast exact BM25Okapi index: a term-major CSR matrix of precomputed weights.

:class:`FastBM25` reimplements ``rank_bm25.BM25Okapi`` (k1=1.5, b=0.75, epsilon=0.25) over the
weights of :mod:`agentgym.envs.search.retrieval.bm25_build`, stored term-major. A query adds
the posting lists of its tokens in query order (a repeated token counts twice) exactly as
rank-bm25 adds its per-token score vectors, so scores are bit-for-bit rank-bm25's and ties are
ties in both. Rankings are by (−score, document id), keeping only positive scores
(:func:`top_k_positive`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from agentgym.envs.search.retrieval.bm25_build import (
    EPSILON,
    K1,
    B,
    FloatArray,
    IntArray,
    TermCounts,
    concat_counts,
    count_corpus,
    decode_strings,
    encode_strings,
    entry_weights,
    offsets,
    select_documents,
    term_idf,
)

_FORMAT = "agentgym-bm25/1"
# Terms in more than this fraction of the documents also get a dense weight column: adding a
# dense column is several times faster than scattering a long posting list.
DENSE_FRACTION = 0.25


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
        self._set_counts(count_corpus(corpus))

    def _set_counts(self, counts: TermCounts) -> None:
        """Compute the term-major weight matrix of ``counts``."""
        self._counts = counts
        weights = entry_weights(counts, term_idf(counts, self.epsilon), self.k1, self.b)
        order = np.argsort(counts.terms, kind="stable")  # by term, then document
        doc_of_entry = np.repeat(np.arange(counts.n_docs, dtype=np.int64), np.diff(counts.doc_ptr))
        self._indptr = offsets(np.bincount(counts.terms, minlength=len(counts.vocab)))
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
    def _from_counts(cls, counts: TermCounts, k1: float, b: float, epsilon: float) -> FastBM25:
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
        combined = concat_counts(self._counts, count_corpus(new_docs, self._counts.vocab))
        selected = select_documents(combined, np.asarray(rows, dtype=np.int64))
        return self._from_counts(selected, self.k1, self.b, self.epsilon)

    def save(self, path: str | Path) -> None:
        """Write the index to exactly ``path`` as an uncompressed ``.npz`` (nothing pickled).

        Args:
            path: Target file (``.npz`` is not appended).
        """
        vocab_bytes, vocab_ptr = encode_strings(self._counts.vocab)
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
            vocab = decode_strings(data["vocab_bytes"], data["vocab_ptr"])
            index._counts = TermCounts(
                vocab, data["doc_ptr"], data["terms"], data["tf"], data["doc_len"]
            )
            index._indptr, index._docs = data["indptr"], data["docs"]
            index._weights = data["weights"]
        index._prepare_lookup()
        return index
