"""Title search over a world's pages with rank-bm25's BM25Okapi."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric tokens."""
    return _TOKEN.findall(text.lower())


class TitleIndex:
    """BM25Okapi over page titles; ties broken by page id so results are deterministic."""

    def __init__(self, titles: Sequence[str]):
        """Index ``titles`` (``titles[i]`` is page ``i``'s title)."""
        self._bm25 = BM25Okapi([tokenize(t) or ["_"] for t in titles])

    def search(self, query: str, k: int = 5) -> list[int]:
        """Ids of the ``k`` best-scoring pages with a positive score, best first."""
        tokens = tokenize(query)
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        order = np.lexsort((np.arange(len(scores)), -scores))[:k]
        return [int(i) for i in order if scores[i] > 0]
