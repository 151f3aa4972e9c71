"""Answer scoring: exact match and token F1 with SQuAD-style normalisation."""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Lowercase, drop punctuation and articles, collapse whitespace.

    ``"The 412,000."`` becomes ``"412000"``.
    """
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


# Sentence texts and entity names are normalised again and again: remember them.
normalize_cached = functools.lru_cache(maxsize=1 << 18)(normalize)


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals a normalised gold answer, else 0.0."""
    pred = normalize(prediction)
    return float(any(pred == normalize(g) for g in golds))


def token_f1(prediction: str, golds: Iterable[str]) -> float:
    """Best token-level F1 between the prediction and any gold answer, in [0, 1]."""
    pred = normalize(prediction).split()
    best = 0.0
    for gold in golds:
        ref = normalize(gold).split()
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            precision, recall = common / len(pred), common / len(ref)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def answer_score(prediction: str, golds: Iterable[str]) -> float:
    """1.0 on an exact match, else token F1: partial answers earn partial credit."""
    golds = list(golds)
    return exact_match(prediction, golds) or token_f1(prediction, golds)
