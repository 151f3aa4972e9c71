"""Building a BM25Okapi index: term counts of a tokenized corpus and rank-bm25's weights.

A corpus is counted once into :class:`TermCounts` (ragged per-document arrays of term ids and
frequencies). Documents can be selected and concatenated without recounting, which is how an
index is rebuilt over a changed corpus. :func:`term_idf` and :func:`entry_weights` then give
rank-bm25's idf and per-(term, document) weights

    idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))

with the same floating-point operations, in the same order, as ``rank_bm25.BM25Okapi``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

K1 = 1.5
B = 0.75
EPSILON = 0.25

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TermCounts:
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


def count_corpus(corpus: Iterable[Sequence[str]], vocab: Sequence[str] = ()) -> TermCounts:
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
    return TermCounts(
        vocab=list(ids),
        doc_ptr=offsets(np.asarray(sizes, dtype=np.int64)),
        terms=np.asarray(terms, dtype=np.int64),
        tf=np.asarray(tf, dtype=np.int64),
        doc_len=np.asarray(doc_len, dtype=np.int64),
    )


def offsets(sizes: IntArray) -> IntArray:
    """``[0, sizes[0], sizes[0] + sizes[1], ...]``."""
    out = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


def gather_rows(ptr: IntArray, rows: IntArray) -> IntArray:
    """Entry positions of ``rows`` of a ragged array with offsets ``ptr``, rows in order."""
    starts, sizes = ptr[rows], ptr[rows + 1] - ptr[rows]
    new_ptr = offsets(sizes)
    return np.repeat(starts - new_ptr[:-1], sizes) + np.arange(new_ptr[-1], dtype=np.int64)


def select_documents(counts: TermCounts, rows: IntArray) -> TermCounts:
    """The documents ``rows`` of ``counts`` (in that order) as a corpus of their own."""
    entries = gather_rows(counts.doc_ptr, rows)
    sizes = counts.doc_ptr[rows + 1] - counts.doc_ptr[rows]
    return TermCounts(
        vocab=counts.vocab,
        doc_ptr=offsets(sizes),
        terms=counts.terms[entries],
        tf=counts.tf[entries],
        doc_len=counts.doc_len[rows],
    )


def concat_counts(first: TermCounts, second: TermCounts) -> TermCounts:
    """``first``'s documents then ``second``'s (``second.vocab`` must extend ``first.vocab``)."""
    return TermCounts(
        vocab=second.vocab,
        doc_ptr=np.concatenate([first.doc_ptr, second.doc_ptr[1:] + first.doc_ptr[-1]]),
        terms=np.concatenate([first.terms, second.terms]),
        tf=np.concatenate([first.tf, second.tf]),
        doc_len=np.concatenate([first.doc_len, second.doc_len]),
    )


def term_idf(counts: TermCounts, epsilon: float) -> FloatArray:
    """rank-bm25's idf of every term id (0 for terms in no document).

    idf(t) = log(N − n + 0.5) − log(n + 0.5), negative idfs replaced by ``epsilon`` × the
    average idf over all terms. rank-bm25 sums the idfs in the order terms first occur in the
    corpus, with plain float additions; the same order and operations are used here so the
    epsilon floor is identical.
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


def entry_weights(counts: TermCounts, idf: FloatArray, k1: float, b: float) -> FloatArray:
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


def encode_strings(strings: Sequence[str]) -> tuple[npt.NDArray[np.uint8], IntArray]:
    """UTF-8 bytes of ``strings`` concatenated, and their offsets."""
    encoded = [s.encode("utf-8") for s in strings]
    sizes = np.asarray([len(e) for e in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets(sizes)


def decode_strings(data: npt.NDArray[np.uint8], ptr: IntArray) -> list[str]:
    """Inverse of :func:`encode_strings`."""
    raw = data.tobytes()
    bounds = ptr.tolist()
    return [raw[lo:hi].decode("utf-8") for lo, hi in itertools.pairwise(bounds)]
