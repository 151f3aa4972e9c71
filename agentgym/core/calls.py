"""Pairing predicted tool calls with gold ones: the one rule the scorers and the credit share.

HierR (``envs/tools/rewards.py``) and the rubric credit variant (``baselines/credit/rubric.py``)
both pair each gold call with a predicted call of the same name by a maximum-weight matching
(scipy's ``linear_sum_assignment``), the weight of a pair being its key Jaccard plus its value
share (:func:`pair_scores`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = ["pair_calls", "pair_scores"]


def pair_scores(pred: Mapping[str, Any], gold: Mapping[str, Any]) -> tuple[float, float]:
    """Key Jaccard and value share of two argument dicts.

    The value share counts the keys whose values agree over the union of both key sets;
    two empty dicts score (1, 1).
    """
    keys = set(pred) | set(gold)
    if not keys:
        return 1.0, 1.0
    same = sum(k in pred and k in gold and pred[k] == gold[k] for k in keys)
    return len(set(pred) & set(gold)) / len(keys), same / len(keys)


def pair_calls(
    pred: Sequence[Mapping[str, Any]], gold: Sequence[Mapping[str, Any]]
) -> dict[int, int]:
    """Gold call index -> the index of the predicted call paired with it, name by name.

    A maximum-weight matching of the same-name pairs (weight: the sum of :func:`pair_scores`
    of their arguments); a gold call left over is absent. Where several matchings are optimal,
    the one ``linear_sum_assignment`` returns.
    """
    out: dict[int, int] = {}
    for name in dict.fromkeys(str(g["name"]) for g in gold):
        ps = [i for i, c in enumerate(pred) if c.get("name") == name]
        gs = [j for j, c in enumerate(gold) if c["name"] == name]
        if not ps:
            continue
        weight = [
            [sum(pair_scores(pred[i].get("arguments") or {}, gold[j]["arguments"])) for j in gs]
            for i in ps
        ]
        rows, cols = linear_sum_assignment(np.array(weight), maximize=True)
        out.update({gs[c]: ps[r] for r, c in zip(rows, cols, strict=True)})
    return out
