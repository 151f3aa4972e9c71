"""The perturbation control (CREDIT.md §13): known changes to the gold lower a sound metric's
score by exactly the amount its definition gives, and a broken metric is caught and flagged."""

import io

import pytest
from rich.console import Console

import agentgym
from agentgym.envs.tools import rewards
from agentgym.harness.controls import _perturbation_control
from agentgym.harness.evaluate import evaluate
from agentgym.harness.report import print_report

SEARCH = "agentgym/Search-Menu-Small-v0"
TOOLS = "agentgym/Tools-Ecommerce-v1"
SEEDS = list(range(12))
EXPECTED = {
    SEARCH: {
        ("answer written twice", "check_answer"),
        ("answer cut to its first half", "check_answer"),
    },
    TOOLS: {
        ("a spurious call added", "tool_exact_match"),
        ("the last gold call dropped", "tool_exact_match"),
        ("one argument value changed", "param_values"),
        ("one argument value changed", "param_keys"),
    },
}


def failed(control):
    return [(k["name"], k["metric"]) for k in control["checks"] if not k["ok"]]


@pytest.mark.parametrize("env_id", [SEARCH, TOOLS])
def test_a_sound_metric_moves_by_exactly_the_expected_amount(env_id):
    control = _perturbation_control(env_id, SEEDS, "test", {})
    assert control["ok"] and failed(control) == []
    assert {(k["name"], k["metric"]) for k in control["checks"]} == EXPECTED[env_id]
    for k in control["checks"]:
        assert k["episodes"] > 0 and k["off"] == 0 and k["mean"] == pytest.approx(k["expected"])
        if k["metric"] != "param_keys":  # the one layer a changed value must leave alone
            assert k["expected"] < 1.0  # the perturbation does lower the score


def test_a_check_answer_that_always_says_yes_fails(monkeypatch):
    cls = type(agentgym.make(SEARCH).unwrapped)
    monkeypatch.setattr(cls, "check_answer", lambda self, text: 1.0)
    control = _perturbation_control(SEARCH, SEEDS, "test", {})
    assert not control["ok"]
    assert set(failed(control)) == EXPECTED[SEARCH]
    twice = next(k for k in control["checks"] if k["name"] == "answer written twice")
    assert twice["mean"] == 1.0 and twice["expected"] == pytest.approx(2 / 3)
    assert twice["off"] == twice["episodes"] and twice["off_seeds"]


def _ignores_the_first_argument(monkeypatch):
    """Make HierR's value share count the first (sorted) shared key as equal, whatever it holds."""
    sound = rewards.pair_scores  # argument dicts: the predicted call's, the gold call's

    def broken(p, g):
        keys, values = sound(p, g)
        shared = sorted(set(p) & set(g))
        if shared and p[shared[0]] != g[shared[0]]:
            values += 1 / len(set(p) | set(g))
        return keys, values

    monkeypatch.setattr(rewards, "pair_scores", broken)


def test_a_value_layer_that_ignores_one_argument_fails_and_only_there(monkeypatch):
    _ignores_the_first_argument(monkeypatch)
    control = _perturbation_control(TOOLS, SEEDS, "test", {})
    assert not control["ok"]
    assert failed(control) == [("one argument value changed", "param_values")]
    changed = next(k for k in control["checks"] if k["metric"] == "param_values")
    assert changed["mean"] == 1.0 and changed["expected"] < 1.0


def test_eval_controls_report_the_perturbation_beside_positive_and_null():
    doc = evaluate("oracle", [TOOLS], seeds=4, controls=True)
    c = doc["controls"][TOOLS]
    assert set(c) == {"positive", "null", "perturbation"}
    assert c["positive"]["ok"] and c["perturbation"]["ok"]
    out = io.StringIO()
    print_report(Console(file=out, width=200), doc)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("controls for"))
    assert line.startswith(f"controls for oracle on {TOOLS}: passed; oracle 1.000")
    assert line.endswith("perturbations 4 of 4 as expected")


def test_the_report_flags_a_metric_that_fails_a_perturbation(monkeypatch):
    _ignores_the_first_argument(monkeypatch)
    doc = evaluate("oracle", [TOOLS], seeds=4, controls=True)
    out = io.StringIO()
    print_report(Console(file=out, width=200), doc)
    text = out.getvalue()
    assert f"controls for oracle on {TOOLS}: FAILED" in text
    assert "perturbations 3 of 4 as expected" in text
    assert "param_values failed a perturbation: one argument value changed scored 1.000" in text
