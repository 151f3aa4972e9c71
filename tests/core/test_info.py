import numpy as np

from agentgym.core.info import info_problems

GOOD = {
    "action_valid": True,
    "won": False,
    "state_key": "abc",
    "task_id": "q00001",
    "task_type": "bridge",
    "domain": "encyclopedia",
    "action_mask": np.ones(4, dtype=np.int8),
    "progress": 0.5,
    "segments": [{"tag": "answer", "start": 0, "end": 3}],
    "provenance": {"visited": [], "cited": [], "produced": [], "consumed": []},
}


def test_a_complete_info_has_no_problem():
    assert info_problems(dict(GOOD), privileged=False) == []


def test_missing_and_mistyped_keys_are_reported():
    info = dict(GOOD)
    del info["state_key"]
    info["action_mask"] = np.ones(4, dtype=np.int64)
    info["progress"] = 1.5
    info["segments"] = [{"tag": "poem", "start": 0, "end": 1}]
    problems = " | ".join(info_problems(info, privileged=False))
    assert "state_key" in problems
    assert "int8" in problems
    assert "[0, 1]" in problems
    assert "bad segment" in problems


def test_privileged_keys_only_when_privileged():
    leaked = {**GOOD, "gold_answer": "Paris"}
    assert any("privileged" in p for p in info_problems(leaked, privileged=False))
    assert info_problems(leaked, privileged=True) == []
    assert any("privileged" in p for p in info_problems(dict(GOOD), privileged=True))


def test_credit_values_are_privileged_and_shaped():
    table = {"value": 0.5, "q": {"a": 1.0, "b": 0.0}, "advantage": {"a": 0.5, "b": -0.5}}
    info = {**GOOD, "credit_values": {"uniform": table, "optimal": table}}
    assert any("privileged" in p for p in info_problems(info, privileged=False))
    assert info_problems(info, privileged=True) == []
    bad = {**GOOD, "credit_values": {"uniform": {"value": 0.5}}}
    assert any("value, q and advantage" in p for p in info_problems(bad, privileged=True))
