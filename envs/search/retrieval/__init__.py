"""Retrievers over a list of documents: BM25 (exact fast and rank-bm25 reference) and dense.

Every retriever follows :class:`Retriever`: ``search`` returns document indices best first,
ties broken by index, so results are deterministic. The implementations also offer
``replaced(changes)``: an exact rebuild over a corpus with some documents changed or removed.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Retriever(Protocol):
    """Search over a fixed list of documents (document ``i`` is ``texts[i]``)."""

    name: str

    def search(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best documents with a positive score, best first; ties by index."""
        ...
