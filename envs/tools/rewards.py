"""Scores of a tool-calling episode against its gold calls.

* HierR (SLCA-GRPO, CREDIT.md §10): format gate → tool-name F1 → parameter keys → parameter
  values → parallel structure. Each layer counts only when every layer below it is non-zero
  (a failing layer zeroes those above); ``hierr`` is the mean of the five gated layers.
  Predicted and gold calls of the same name are paired by an optimal matching (below).
* Tool-Exact-Match with the TUM fix (CREDIT.md §13): exactly matched calls over
  ``max(|pred|, |gold|)``, so spurious extra calls cost as much as missing ones. Exact
  equality makes the optimal matching a multiset intersection, so its value is unique.
* The all-optima certificate (CREDIT.md §13, :func:`certify`): whether HierR's optimal
  matching is unique and, where it is not, the range of each layer over all optimal ones.

The matching: among same-name (pred, gold) pairs, a maximum-weight assignment
(``scipy.optimize.linear_sum_assignment``) with weight = key Jaccard + value share of the
pair. That weight is each pair's share of ``param_keys + param_values``, so the matching
maximises the two layers' sum; ``hierr`` (their mean with three layers that do not depend on
the matching) is then the same under every optimal matching, except where one of them zeroes
``param_values`` and with it the gate of ``parallel``. Optimal matchings may still split the
sum differently between the two layers: the certificate reports that split's range.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from agentgym.core.calls import pair_scores

Call = dict[str, Any]
"""{"name": str, "arguments": dict}."""

EXACT_LIMIT = 8
"""Per tool name, the most calls on either side whose optimal matchings are all enumerated;
a name with more gets bounds (see :class:`Certificate`)."""
TOL = 1e-9
"""Two matchings whose weights differ by less are tied (weights are small fractions)."""
CERTIFIED = ("param_keys", "param_values", "hierr")
"""The layers that depend on the matching, in the order a certificate lists them."""


def canonical(call: Call) -> str:
    """One string per distinct call (argument order does not matter)."""
    return json.dumps([call["name"], call["arguments"]], sort_keys=True)


def tool_exact_match(pred: Sequence[Call], gold: Sequence[Call]) -> float:
    """Exactly matched calls / max(|pred|, |gold|); 1.0 when both are empty."""
    if not pred and not gold:
        return 1.0
    matched = sum((Counter(map(canonical, pred)) & Counter(map(canonical, gold))).values())
    return matched / max(len(pred), len(gold))


def _f1(matched: int, n_pred: int, n_gold: int) -> float:
    if n_pred == 0 and n_gold == 0:
        return 1.0
    if matched == 0:
        return 0.0
    precision, recall = matched / n_pred, matched / n_gold
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class _Group:
    """The predicted and gold calls of one tool name, with their pair scores.

    ``keys`` and ``values`` have shape (len(pred), len(gold)).
    """

    pred: list[Call]
    gold: list[Call]
    keys: np.ndarray
    values: np.ndarray

    @property
    def weight(self) -> np.ndarray:
        """The matching's weight per pair: keys + values, shape (len(pred), len(gold))."""
        return self.keys + self.values


def _groups(pred: Sequence[Call], gold: Sequence[Call]) -> list[_Group]:
    """One group per name that both sides call, in name order."""
    out = []
    for name in sorted({c["name"] for c in pred} & {c["name"] for c in gold}):
        ps = [c for c in pred if c["name"] == name]
        gs = [c for c in gold if c["name"] == name]
        scores = np.array(
            [[pair_scores(p["arguments"], g["arguments"]) for g in gs] for p in ps], dtype=float
        )
        out.append(_Group(ps, gs, scores[..., 0], scores[..., 1]))
    return out


def _structure(pred_turns: Sequence[Sequence[Call]], gold_turns: Sequence[Sequence[Call]]) -> float:
    """The share of multi-call gold turns whose calls were issued together.

    A gold turn with several calls counts when its calls were all issued together in one
    predicted turn; the share is 1.0 when the gold has no such turn.
    """
    groups = [Counter(map(canonical, t)) for t in gold_turns if len(t) > 1]
    if not groups:
        return 1.0
    issued = [Counter(map(canonical, t)) for t in pred_turns]
    together = sum(any(not (g - turn) for turn in issued) for g in groups)
    return together / len(groups)


@dataclass(frozen=True)
class _Fixed:
    """What the layers take that does not depend on the matching."""

    format_ok: bool
    name_f1: float
    parallel: float
    n_gold: int
    paired: bool  # some name is called on both sides
    empty: bool  # no call on either side


def _fixed(
    pred_turns: Sequence[Sequence[Call]], gold_turns: Sequence[Sequence[Call]], format_ok: bool
) -> tuple[list[Call], list[Call], _Fixed]:
    pred = [c for t in pred_turns for c in t]
    gold = [c for t in gold_turns for c in t]
    names = Counter(c["name"] for c in pred) & Counter(c["name"] for c in gold)
    fixed = _Fixed(
        format_ok=format_ok,
        name_f1=_f1(sum(names.values()), len(pred), len(gold)),
        parallel=_structure(pred_turns, gold_turns),
        n_gold=len(gold),
        paired=bool(names),
        empty=not pred and not gold,
    )
    return pred, gold, fixed


def _layers(fixed: _Fixed, keys: float, values: float) -> dict[str, float]:
    """The five gated layers and ``hierr`` from the summed pair scores of a matching."""
    layers = {"format": 1.0 if fixed.format_ok else 0.0, "tool_name_f1": fixed.name_f1}
    if fixed.paired:
        layers["param_keys"] = keys / fixed.n_gold
        layers["param_values"] = values / fixed.n_gold
    else:
        layers["param_keys"] = layers["param_values"] = 1.0 if fixed.empty else 0.0
    layers["parallel"] = fixed.parallel
    gate = 1.0
    for name in ("format", "tool_name_f1", "param_keys", "param_values", "parallel"):
        layers[name] = layers[name] * gate
        gate = gate if layers[name] > 0 else 0.0
    layers["hierr"] = sum(layers.values()) / 5
    return layers


def hierr(
    pred_turns: Sequence[Sequence[Call]],
    gold_turns: Sequence[Sequence[Call]],
    format_ok: bool,
) -> dict[str, float]:
    """The five gated HierR layers and their mean ``hierr``, under one optimal matching.

    Where several matchings are optimal the one ``linear_sum_assignment`` returns is used;
    :func:`certify` says whether that choice can matter and by how much.
    """
    pred, gold, fixed = _fixed(pred_turns, gold_turns, format_ok)
    keys = values = 0.0
    for group in _groups(pred, gold):
        rows, cols = linear_sum_assignment(group.weight, maximize=True)
        keys += float(group.keys[rows, cols].sum())
        values += float(group.values[rows, cols].sum())
    return _layers(fixed, keys, values)


# ---------------------------------------------------------------------------- certificate


@dataclass(frozen=True)
class Certificate:
    """Whether HierR's optimal matching is unique, and the layers' range over all optima.

    Two matchings are the same when they pair each predicted call with gold calls of the same
    content (identical calls are interchangeable); a pair that shares no argument key scores
    nothing, so whether it is formed does not count either.

    Attributes:
        unique: the optimal matching is certified unique. False also where a name has more
            than :data:`EXACT_LIMIT` calls on a side (its matchings were not enumerated).
        ranges: per layer of :data:`CERTIFIED`, (min, max) over all optimal matchings; where
            ``bounded``, an outer bound (the true range lies within it).
        ambiguous_items: the predicted calls (:func:`canonical`) whose partner differs between
            optimal matchings, sorted; where ``bounded``, also every predicted call of a name
            that was not enumerated.
        bounded: some name had too many calls to enumerate its optimal matchings.
    """

    unique: bool
    ranges: dict[str, tuple[float, float]]
    ambiguous_items: list[str]
    bounded: bool

    def to_json(self) -> dict[str, Any]:
        """JSON data: ``unique``, ``bounded``, ``ranges`` as [min, max] lists, ``ambiguous``."""
        return {
            "unique": self.unique,
            "bounded": self.bounded,
            "ranges": {m: [lo, hi] for m, (lo, hi) in self.ranges.items()},
            "ambiguous": list(self.ambiguous_items),
        }


@dataclass(frozen=True)
class _Span:
    """One name's optimal matchings, summarised.

    ``low`` and ``high`` are (keys, values) summed under the optimal matching with the least
    and with the most key score; ``ambiguous`` the calls whose partner differs between optima.
    """

    low: tuple[float, float]
    high: tuple[float, float]
    ambiguous: list[str]
    unique: bool
    bounded: bool


def _classes(calls: Sequence[Call]) -> list[int]:
    """Per call, the index of its content among the distinct contents, in order of first use."""
    ids: dict[str, int] = {}
    return [ids.setdefault(canonical(c), len(ids)) for c in calls]


def _max_sum(matrix: np.ndarray) -> float:
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    return float(matrix[rows, cols].sum())


def _optima(weight: np.ndarray, gold_class: list[int], best: float) -> list[list[int]]:
    """Every matching of total weight ``best``: per predicted call its gold column or -1.

    Depth-first over the predicted calls, pruned by the most the calls left could add. Only
    pairs that score are formed, and of free gold calls of one content only the first is
    tried (the others give the same matching).
    """
    n_pred, n_gold = weight.shape
    rest = np.concatenate([np.cumsum(weight.max(axis=1)[::-1])[::-1], [0.0]])
    out: list[list[int]] = []
    pick, used = [-1] * n_pred, [False] * n_gold

    def visit(i: int, total: float) -> None:
        if total + rest[i] < best - TOL:
            return
        if i == n_pred:
            out.append(list(pick))
            return
        tried: set[int] = set()
        for j in range(n_gold):
            if used[j] or weight[i, j] <= TOL or gold_class[j] in tried:
                continue
            tried.add(gold_class[j])
            used[j], pick[i] = True, j
            visit(i + 1, total + float(weight[i, j]))
            used[j], pick[i] = False, -1
        visit(i + 1, total)

    visit(0, 0.0)
    return out


def _exact_span(group: _Group) -> _Span:
    """Enumerate the name's optimal matchings (at most :data:`EXACT_LIMIT` calls a side)."""
    weight = group.weight
    pred_class, gold_class = _classes(group.pred), _classes(group.gold)
    distinct: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for pick in _optima(weight, gold_class, _max_sum(weight)):
        key = sorted((pred_class[i], gold_class[j] if j >= 0 else -1) for i, j in enumerate(pick))
        distinct.setdefault(tuple(key), pick)
    sums = sorted(
        (
            sum(float(group.keys[i, j]) for i, j in enumerate(pick) if j >= 0),
            sum(float(group.values[i, j]) for i, j in enumerate(pick) if j >= 0),
        )
        for pick in distinct.values()
    )
    low, high = sums[0], sums[-1]
    if high[0] - low[0] < TOL:  # the same split summed in another order
        high = low
    partners: dict[int, set[tuple[int, ...]]] = {}
    for pairs in distinct:
        for cls in set(pred_class):
            partners.setdefault(cls, set()).add(tuple(g for p, g in pairs if p == cls))
    first = {cls: group.pred[pred_class.index(cls)] for cls in partners}
    ambiguous = [canonical(first[cls]) for cls, seen in partners.items() if len(seen) > 1]
    return _Span(low, high, ambiguous, unique=len(distinct) == 1, bounded=False)


def _bounded_span(group: _Group) -> _Span:
    """Outer bounds for a name with too many calls to enumerate.

    Every optimal matching has keys + values = W (the optimum) and, pair by pair, values <=
    keys, so its key score K obeys max(W / 2, W - Vmax) <= K <= min(W, Kmax), where Kmax and
    Vmax are the best key and value scores of any matching.
    """
    best = _max_sum(group.weight)
    k_low = max(best / 2, best - _max_sum(group.values))
    k_high = min(best, _max_sum(group.keys))
    v_low = best - k_high if best - k_high > TOL else 0.0
    ambiguous = [canonical(c) for c in group.pred]
    return _Span((k_low, best - k_low), (k_high, v_low), ambiguous, unique=False, bounded=True)


def certify(
    pred_turns: Sequence[Sequence[Call]],
    gold_turns: Sequence[Sequence[Call]],
    format_ok: bool,
) -> Certificate:
    """The all-optima certificate of :func:`hierr` on the same calls (CREDIT.md §13).

    Names are independent (only same-name calls pair), so the layers' extremes add up over
    names, and the two matchings with the least and the most key score give every layer's
    extremes: keys + values is the same for all optima, so ``hierr`` changes only where
    ``param_values`` reaches 0 (the most-keys end). Tool-Exact-Match needs no certificate:
    its matching pairs equal calls, whose count is the multiset intersection in every optimum.

    Args:
        pred_turns: the valid calls made, by turn.
        gold_turns: the gold calls, by turn.
        format_ok: whether every action was well-formed (HierR's first gate).

    Returns:
        The certificate; ``ranges[m]`` holds ``hierr(...)[m]`` for every m of CERTIFIED.
    """
    pred, gold, fixed = _fixed(pred_turns, gold_turns, format_ok)
    spans = [
        _exact_span(g) if max(len(g.pred), len(g.gold)) <= EXACT_LIMIT else _bounded_span(g)
        for g in _groups(pred, gold)
    ]
    low = _layers(fixed, sum(s.low[0] for s in spans), sum(s.low[1] for s in spans))
    high = _layers(fixed, sum(s.high[0] for s in spans), sum(s.high[1] for s in spans))
    ranges = {m: (min(low[m], high[m]), max(low[m], high[m])) for m in CERTIFIED}
    return Certificate(
        unique=all(s.unique for s in spans),
        # a width under TOL is the same sum added in another order
        ranges={m: (lo, hi if hi - lo > TOL else lo) for m, (lo, hi) in ranges.items()},
        ambiguous_items=sorted({item for s in spans for item in s.ambiguous}),
        bounded=any(s.bounded for s in spans),
    )


def normalize(text: str) -> str:
    """Lower case with runs of white space collapsed (how facts are found in a summary)."""
    return " ".join(text.lower().split())


def missing_facts(summary: str, facts: Sequence[str]) -> list[str]:
    """The facts that ``summary`` does not contain."""
    text = normalize(summary)
    return [f for f in facts if normalize(f) not in text]
