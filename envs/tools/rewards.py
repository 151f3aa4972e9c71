"""Scores of a tool-calling episode against its gold calls.

* HierR (SLCA-GRPO, CREDIT.md §10): format gate → tool-name F1 → parameter keys → parameter
  values → parallel structure. Each layer counts only when every layer below it is non-zero
  (a failing layer zeroes those above); ``hierr`` is the mean of the five gated layers.
* Tool-Exact-Match with the TUM fix (CREDIT.md §13): exactly matched calls over
  ``max(|pred|, |gold|)``, so spurious extra calls cost as much as missing ones. Exact
  equality makes the optimal matching a multiset intersection, so it is unique.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

Call = dict[str, Any]
"""{"name": str, "arguments": dict}."""


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


def _pairs(pred: Sequence[Call], gold: Sequence[Call]) -> list[tuple[Call, Call]]:
    """Predicted and gold calls of the same name, paired in order.

    The i-th prediction of a name is paired with the i-th gold call of that name.
    """
    by_name: dict[str, list[Call]] = {}
    for g in gold:
        by_name.setdefault(g["name"], []).append(g)
    out = []
    for p in pred:
        queue = by_name.get(p["name"])
        if queue:
            out.append((p, queue.pop(0)))
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


def hierr(
    pred_turns: Sequence[Sequence[Call]],
    gold_turns: Sequence[Sequence[Call]],
    format_ok: bool,
) -> dict[str, float]:
    """The five gated HierR layers and their mean ``hierr``."""
    pred = [c for t in pred_turns for c in t]
    gold = [c for t in gold_turns for c in t]
    layers: dict[str, float] = {"format": 1.0 if format_ok else 0.0}
    matched_names = sum(
        (Counter(c["name"] for c in pred) & Counter(c["name"] for c in gold)).values()
    )
    layers["tool_name_f1"] = _f1(matched_names, len(pred), len(gold))
    pairs = _pairs(pred, gold)
    if pairs:
        key_scores, value_scores = [], []
        for p, g in pairs:
            pk, gk = set(p["arguments"]), set(g["arguments"])
            key_scores.append(len(pk & gk) / len(pk | gk) if pk | gk else 1.0)
            same = [k for k in pk & gk if p["arguments"][k] == g["arguments"][k]]
            value_scores.append(len(same) / len(pk | gk) if pk | gk else 1.0)
        layers["param_keys"] = sum(key_scores) / len(gold)
        layers["param_values"] = sum(value_scores) / len(gold)
    else:
        empty = 1.0 if not pred and not gold else 0.0
        layers["param_keys"] = layers["param_values"] = empty
    layers["parallel"] = _structure(pred_turns, gold_turns)
    gate = 1.0
    for name in ("format", "tool_name_f1", "param_keys", "param_values", "parallel"):
        layers[name] = layers[name] * gate
        gate = gate if layers[name] > 0 else 0.0
    layers["hierr"] = sum(layers.values()) / 5
    return layers


def normalize(text: str) -> str:
    """Lower case with runs of white space collapsed (how facts are found in a summary)."""
    return " ".join(text.lower().split())


def missing_facts(summary: str, facts: Sequence[str]) -> list[str]:
    """The facts that ``summary`` does not contain."""
    text = normalize(summary)
    return [f for f in facts if normalize(f) not in text]
