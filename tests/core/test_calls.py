"""Pairing predicted tool calls with gold ones (shared by HierR and the rubric credit)."""

import pytest

from agentgym.core.calls import pair_calls, pair_scores


def test_pair_scores_by_hand():
    # keys {a, b, c}: shared {a, b}; equal values only a -> Jaccard 2/3, value share 1/3
    assert pair_scores({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}) == pytest.approx((2 / 3, 1 / 3))
    assert pair_scores({}, {}) == (1.0, 1.0)
    assert pair_scores({"a": 1}, {}) == (0.0, 0.0)


def test_pair_calls_matches_by_arguments_not_by_order():
    gold = [
        {"name": "get", "arguments": {"id": 1}},
        {"name": "get", "arguments": {"id": 2}},
        {"name": "add", "arguments": {"x": 1}},
    ]
    pred = [
        {"name": "get", "arguments": {"id": 2}},
        {"name": "other", "arguments": {}},
        {"name": "get", "arguments": {"id": 1}},
    ]
    # in order, gold 0 would take pred 0 (id 2): the matching pairs equal arguments instead;
    # no predicted "add" call, so gold 2 stays unpaired
    assert pair_calls(pred, gold) == {0: 2, 1: 0}
