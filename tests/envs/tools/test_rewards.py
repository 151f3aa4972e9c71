"""HierR's gated layers and Tool-Exact-Match normalised by max(|pred|, |gold|), on
hand-computed cases."""

import pytest

from agentgym.envs.tools.rewards import hierr, missing_facts, tool_exact_match


def c(name, **arguments):
    return {"name": name, "arguments": arguments}


GOLD = [[c("search", q="lamp", n=3)], [c("buy", id="p1", qty=2), c("ship", id="o1")]]


def test_the_gold_calls_score_one_on_every_layer():
    layers = hierr(GOLD, GOLD, format_ok=True)
    assert layers == {
        "format": 1.0,
        "tool_name_f1": 1.0,
        "param_keys": 1.0,
        "param_values": 1.0,
        "parallel": 1.0,
        "hierr": 1.0,
    }


def test_a_failing_format_gate_zeroes_every_layer():
    assert hierr(GOLD, GOLD, format_ok=False)["hierr"] == 0.0


def test_layers_by_hand():
    pred = [[c("search", q="lamp", n=5)], [c("buy", id="p1", colour="red")], [c("ship", id="o1")]]
    layers = hierr(pred, GOLD, format_ok=True)
    assert layers["tool_name_f1"] == 1.0
    # search: keys {q,n} vs {q,n} -> 1; buy: {id,colour} vs {id,qty} -> 1/3; ship -> 1
    assert layers["param_keys"] == pytest.approx((1 + 1 / 3 + 1) / 3)
    # values: search 1/2 (q), buy 1/3 (id), ship 1
    assert layers["param_values"] == pytest.approx((1 / 2 + 1 / 3 + 1) / 3)
    assert layers["parallel"] == 0.0  # buy and ship were not issued together
    expected = (1 + 1 + (1 + 1 / 3 + 1) / 3 + (1 / 2 + 1 / 3 + 1) / 3 + 0) / 5
    assert layers["hierr"] == pytest.approx(expected)


def test_a_wrong_tool_zeroes_the_layers_above_the_names():
    layers = hierr([[c("delete_everything")]], GOLD, format_ok=True)
    assert layers["tool_name_f1"] == 0.0
    assert layers["param_keys"] == layers["param_values"] == layers["parallel"] == 0.0
    assert layers["hierr"] == pytest.approx(1 / 5)


def test_no_call_is_right_when_none_was_needed():
    assert hierr([], [], format_ok=True)["hierr"] == 1.0
    assert hierr([[c("search", q="x")]], [], format_ok=True)["tool_name_f1"] == 0.0


def test_tool_exact_match_charges_extra_calls_like_missing_ones():
    gold = [c("a", x=1), c("b", y=2)]
    assert tool_exact_match(gold, gold) == 1.0
    assert tool_exact_match(gold[:1], gold) == 0.5
    assert tool_exact_match([*gold, c("a", x=9), c("c")], gold) == 0.5  # 2 / max(4, 2)
    assert tool_exact_match([c("b", y=2), c("a", x=1)], gold) == 1.0  # order does not matter
    assert tool_exact_match([c("a", x=1), c("a", x=1)], gold) == 0.5  # a duplicate counts once
    assert tool_exact_match([], []) == 1.0


def test_facts_are_found_whatever_the_case_and_spacing():
    assert missing_facts("Order O41 is  Delivered, total 58.50", ["o41", "delivered"]) == []
    assert missing_facts("Order o41", ["o41", "58.50"]) == ["58.50"]
