"""BFCL tasks: the loader, the AST matcher (prompt mode) and the single-turn env."""

from __future__ import annotations

import copy
import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentgym.checker.transcript import ADVERSARIAL_ACTIONS, canonical
from agentgym.core.errors import BadInput, ResetNeeded
from agentgym.core.info import info_problems
from agentgym.envs.tools import bfcl
from agentgym.envs.tools.bfcl import (
    CATEGORIES,
    BFCLEnv,
    Entry,
    Verdict,
    excluded_entries,
    gold_calls,
    kept_entries,
    load_category,
    match_calls,
    render_calls,
)
from agentgym.envs.tools.grammar import GRAMMAR

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"
FIXTURE_EXCLUDED = {
    "simple": {"simple_python_17"},
    "multiple": set(),
    "parallel": set(),
    "parallel_multiple": {"parallel_multiple_12"},
    "live": {"live_simple_106-63-0"},
}


def entry(category: str, entry_id: str) -> Entry:
    return load_category(category, FIXTURES).entries[entry_id]


def score(e: Entry, calls: list[dict[str, Any]]) -> Verdict:
    return match_calls(e.functions, e.ground_truth, calls)


def gold(e: Entry) -> list[dict[str, Any]]:
    return gold_calls(e.ground_truth)


def schema(name: str, **types: str) -> dict[str, Any]:
    """A function schema in BFCL's format whose parameters (of the given types) are required."""
    props = {p: {"type": t} for p, t in types.items()}
    return {"name": name, "parameters": {"type": "dict", "properties": props, "required": [*types]}}


def with_args(e: Entry, **changes: Any) -> list[dict[str, Any]]:
    """The single gold call of ``e`` with arguments changed (a value of ... removes one)."""
    (call,) = copy.deepcopy(gold(e))
    for key, value in changes.items():
        if value is ...:
            call["arguments"].pop(key)
        else:
            call["arguments"][key] = value
    return [call]


# ---------------------------------------------------------------------- loader
@pytest.mark.parametrize("category", list(CATEGORIES))
def test_loader_excludes_self_contradicting_entries(category: str) -> None:
    data = load_category(category, FIXTURES)
    assert set(excluded_entries(category, FIXTURES)) == FIXTURE_EXCLUDED[category]
    assert set(data.excluded) == FIXTURE_EXCLUDED[category]
    kept = kept_entries(category, FIXTURES)
    assert kept and not set(kept) & FIXTURE_EXCLUDED[category]
    files = {e.category for e in data.entries.values()}
    assert files <= set(CATEGORIES[category])


def test_exclusion_reasons() -> None:
    assert load_category("simple", FIXTURES).excluded == {
        "simple_python_17": "the ground truth marks the required 'formatted' of "
        "'get_prime_factors' optional"
    }
    assert load_category("parallel_multiple", FIXTURES).excluded == {
        "parallel_multiple_12": "the ground truth names 'permeability', missing from the "
        "schema of 'calculate_voltage_difference'"
    }
    assert load_category("live", FIXTURES).excluded == {
        "live_simple_106-63-0": "the ground truth fails the matcher: missing required "
        "parameter 'auto_loan_payment_start'"
    }


def test_entries_join_questions_and_answers_in_file_order() -> None:
    e = entry("live", "live_parallel_0-0-0")
    assert e.category == "live_parallel"
    assert e.messages[0]["role"] == "user" and "北京" in e.messages[0]["content"]
    assert [f["name"] for f in e.functions] == ["get_current_weather"]
    assert len(e.ground_truth) == 2
    assert kept_entries("live", FIXTURES) == (
        "live_simple_0-0-0",
        "live_multiple_0-0-0",
        "live_multiple_552-153-1",
        "live_parallel_0-0-0",
        "live_parallel_multiple_0-0-0",
    )


def test_loading_is_cached() -> None:
    first = load_category("parallel", FIXTURES)
    assert load_category("parallel", str(FIXTURES) + "/") is first
    hits = bfcl._load.cache_info().hits
    BFCLEnv("parallel", data_dir=str(FIXTURES))
    assert bfcl._load.cache_info().hits == hits + 1


def test_loader_errors(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="unknown BFCL category 'java'"):
        load_category("java", FIXTURES)
    with pytest.raises(BadInput, match="cannot read BFCL data file"):
        load_category("simple", tmp_path)
    shutil.copytree(FIXTURES, tmp_path / "d")
    answers = tmp_path / "d" / "possible_answer" / "BFCL_v4_multiple.json"
    lines = answers.read_text().splitlines()
    answers.write_text("\n".join(lines[1:]) + "\n")
    assert load_category("multiple", tmp_path / "d").excluded == {
        "multiple_0": "no possible answer"
    }
    shutil.copytree(FIXTURES, tmp_path / "e")
    answers = tmp_path / "e" / "possible_answer" / "BFCL_v4_multiple.json"
    answers.write_text(json.dumps({"id": "multiple_0", "ground_truth": {"f": {}}}) + "\n")
    with pytest.raises(BadInput, match="the ground truth of multiple_0 is not BFCL's"):
        load_category("multiple", tmp_path / "e")


# ---------------------------------------------------------------------- matcher
@pytest.mark.parametrize("category", list(CATEGORIES))
def test_gold_calls_win(category: str) -> None:
    for e in load_category(category, FIXTURES).entries.values():
        verdict = score(e, gold(e))
        assert verdict == Verdict(True, "", len(e.ground_truth), len(e.ground_truth))


def test_int_for_float_wins_float_for_int_loses() -> None:
    sine, interest = entry("simple", "simple_python_99"), entry("simple", "simple_python_136")
    assert score(sine, with_args(sine, start_range=0)).won  # gold 0.0
    assert score(interest, with_args(interest, annual_rate=5)).won  # gold 5.0
    assert score(interest, with_args(interest, annual_rate=5.0)).won
    lost = score(interest, with_args(interest, principal=10000.0))
    assert lost.reason == "type of 'principal': expected integer, got float"
    assert score(sine, with_args(sine, frequency=5.0)).reason.startswith("type of 'frequency'")


@pytest.mark.parametrize(
    ("value", "got"), [("10000", "string"), (True, "boolean"), (None, "null"), ([1], "array")]
)
def test_types_are_strict(value: Any, got: str) -> None:
    interest = entry("simple", "simple_python_136")
    verdict = score(interest, with_args(interest, principal=value))
    assert verdict.reason == f"type of 'principal': expected integer, got {got}"
    assert score(interest, with_args(interest, compounding_freq=1)).reason == (
        "type of 'compounding_freq': expected string, got integer"
    )


@pytest.mark.parametrize(
    ("location", "won"),
    [
        ("New York, NY", True),
        ("new york ny", True),
        ("NEW-YORK,NY.", True),
        (" New_York / NY ", True),
        ("New York", False),
        ("Boston, MA", False),
    ],
)
def test_strings_ignore_case_spaces_and_punctuation(location: str, won: bool) -> None:
    vegan = entry("simple", "simple_python_35")
    verdict = score(vegan, with_args(vegan, location=location))
    assert verdict.won is won
    if not won:
        assert verdict.reason.startswith("value of 'location' not acceptable: ")
        assert 'expected one of ["New York, NY"]' in verdict.reason


def test_string_alternatives() -> None:
    circle = entry("simple", "simple_python_7")  # unit: ["inches", "in"]
    assert score(circle, with_args(circle, unit="in")).won
    assert score(circle, with_args(circle, unit="Inches")).won
    assert not score(circle, with_args(circle, unit="cm")).won


def test_optional_and_required_parameters() -> None:
    triangle = entry("simple", "simple_python_0")  # unit: ["units", ""]; schema requires base
    assert score(triangle, with_args(triangle, unit=...)).won
    assert score(triangle, with_args(triangle, base=...)).reason == (
        "missing required parameter 'base'"
    )
    circle = entry("simple", "simple_python_7")  # unit is not schema-required, but has no ""
    assert score(circle, with_args(circle, unit=...)).reason == (
        "missing parameter 'unit': the answer requires it"
    )
    shapes = entry("multiple", "multiple_0")  # three optional booleans
    call = {"name": "triangle_properties.get", "arguments": {"side1": 5, "side2": 4, "side3": 3}}
    assert score(shapes, [call]).won


def test_extra_and_wrong_values_lose() -> None:
    triangle = entry("simple", "simple_python_0")
    assert score(triangle, with_args(triangle, color="red")).reason == (
        "unexpected parameter 'color'"
    )
    assert score(triangle, with_args(triangle, base=11)).reason == (
        "value of 'base' not acceptable: 11, expected one of [10]"
    )
    assert score(triangle, with_args(triangle, unit="cm")).reason == (
        'value of \'unit\' not acceptable: "cm", expected one of ["units"]'
    )


def test_names_are_kept_as_written() -> None:
    factorial = entry("simple", "simple_python_1")
    assert score(factorial, [{"name": "math.factorial", "arguments": {"number": 5}}]).won
    verdict = score(factorial, [{"name": "math_factorial", "arguments": {"number": 5}}])
    assert verdict.reason == "wrong function name: expected 'math.factorial', got 'math_factorial'"


def test_exactly_one_call_outside_parallel_categories() -> None:
    factorial = entry("simple", "simple_python_1")
    assert score(factorial, gold(factorial) * 2).reason == "wrong number of calls: 2 for 1"
    assert score(factorial, []).reason == "wrong number of calls: 0 for 1"


def test_parallel_calls_in_any_order() -> None:
    spotify = entry("parallel", "parallel_0")
    calls = gold(spotify)
    assert score(spotify, calls[::-1]).won
    assert score(spotify, calls[:1]) == Verdict(False, "wrong number of calls: 1 for 2", 1, 2)
    assert score(spotify, [*calls, calls[0]]).reason == "wrong number of calls: 3 for 2"
    duplicated = score(spotify, [calls[0], calls[0]])
    assert (duplicated.won, duplicated.matched, duplicated.total) == (False, 1, 2)
    assert duplicated.reason.startswith(
        "no call matches expected call 2 (spotify.play): value of 'artist' not acceptable"
    )
    mixed = entry("parallel_multiple", "parallel_multiple_0")
    assert score(mixed, gold(mixed)[::-1]).won


def test_one_to_one_matching_is_not_greedy() -> None:
    # The first gold call accepts both predicted calls, the second only the first one.
    functions = [schema("f", a="integer")]
    ground_truth = [{"f": {"a": [1, 2]}}, {"f": {"a": [1]}}]
    calls = [{"name": "f", "arguments": {"a": 1}}, {"name": "f", "arguments": {"a": 2}}]
    assert match_calls(functions, ground_truth, calls).won


def test_tuples_lists_and_dicts() -> None:
    weather = entry("multiple", "multiple_5")  # coordinates: tuple of floats
    coords = gold(weather)[0]["arguments"]["coordinates"]
    assert score(weather, with_args(weather, coordinates=tuple(coords))).won
    assert not score(weather, with_args(weather, coordinates=coords[::-1])).won
    assert not score(weather, with_args(weather, coordinates=coords[:1])).won
    assert score(weather, with_args(weather, coordinates=[1, "x"])).reason == (
        "type of 'coordinates': item 1: expected float, got string"
    )
    house = entry("multiple", "multiple_8")  # budget: dict of floats, gold ints
    assert score(house, with_args(house, budget={"max": 400000.0, "min": 300000})).won
    assert not score(house, with_args(house, budget={"min": 300000})).won
    assert not score(house, with_args(house, budget={"min": 300000, "max": 400000, "x": 1})).won
    assert score(house, with_args(house, budget={"min": "300000", "max": 400000})).reason == (
        "type of 'budget': key 'min': expected float, got string"
    )


def test_lists_of_dicts_and_nested_acceptable_values() -> None:
    query = entry("simple", "simple_python_96")  # conditions: list of dicts
    conditions = gold(query)[0]["arguments"]["conditions"]
    shouting = [{k: v.upper() for k, v in c.items()} for c in conditions]
    assert score(query, with_args(query, conditions=shouting)).won
    assert not score(query, with_args(query, conditions=conditions[::-1])).won
    drink = entry("live", "live_multiple_0-0-0")  # nested dict with alternatives
    (call,) = gold(drink)
    call["arguments"]["new_preferences"]["special_instructions"] = "boiling hot"
    assert score(drink, [call]).won
    call["arguments"]["new_preferences"]["special_instructions"] = "lukewarm"
    assert not score(drink, [call]).won


def test_optional_list_parameter() -> None:
    concerts = entry("parallel", "parallel_44")  # amenities: [["Parking"], ""]
    calls = gold(concerts)
    del calls[1]["arguments"]["amenities"]
    assert score(concerts, calls).won
    calls[1]["arguments"]["amenities"] = ["parking"]
    assert score(concerts, calls).won
    calls[1]["arguments"]["amenities"] = ["Parking", "VIP Seating"]
    assert not score(concerts, calls).won


def test_answer_values_that_break_the_schema_type_are_taken_as_written() -> None:
    salon = entry("live", "live_multiple_552-153-1")  # is_unisex: "string" in schema, gold true
    assert score(salon, with_args(salon, is_unisex=True)).won
    assert not score(salon, with_args(salon, is_unisex=False)).won
    assert score(salon, with_args(salon, is_unisex=1)).reason.startswith("type of 'is_unisex'")


def test_java_types_take_strings() -> None:
    functions = [schema("Cache.put", ttl="long", key="String")]
    ground_truth = [{"Cache.put": {"ttl": [50], "key": ["userId"]}}]
    call = {"name": "Cache.put", "arguments": {"ttl": "50", "key": "userId"}}
    assert match_calls(functions, ground_truth, [call]).won
    call["arguments"]["ttl"] = 50
    assert match_calls(functions, ground_truth, [call]).reason == (
        "type of 'ttl': expected long, got integer"
    )


def test_gold_calls_take_first_values_and_drop_optional_ones() -> None:
    triangle = entry("simple", "simple_python_0")
    assert gold(triangle) == [
        {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5, "unit": "units"}}
    ]
    drink = entry("live", "live_parallel_multiple_0-0-0")
    food = gold(drink)[0]["arguments"]
    assert food == {"foodItem": "Caesar salad", "removeIngredients": "anchovies"}
    assert "sweetness_level" not in gold(drink)[1]["arguments"]["new_preferences"]


# ---------------------------------------------------------------------- env on fixtures
def make(category: str, **kwargs: Any) -> BFCLEnv:
    return BFCLEnv(category=category, data_dir=str(FIXTURES), **kwargs)


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_oracle_wins_every_fixture_entry(category: str) -> None:
    env = make(category, privileged=True)
    for task_id in kept_entries(category, FIXTURES):
        obs, info = env.reset(options={"task_id": task_id})
        assert not info_problems(info, privileged=True)
        action = env.oracle_action()
        obs, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated) == (1.0, True, False), obs
        assert info["won"] and info["action_valid"] and info["progress"] == 1.0
        assert info["reward_components"] == {"ast_match": 1.0, "format": 1.0}
        assert info["tool_calls"] == info["gold_tool_calls"] == gold(env.entry)
        assert [action[s["start"] : s["end"]] for s in info["segments"]] == action.split("\n")
        assert info["task_type"] == category and info["domain"] == "bfcl"
        assert not info_problems(info, privileged=True)
        with pytest.raises(ResetNeeded):
            env.oracle_action()


def test_observation_shows_request_schemas_and_grammar() -> None:
    env = make("simple")
    obs, info = env.reset(options={"task_id": "simple_python_1"})
    assert obs.startswith("user: Calculate the factorial of 5 using math functions.")
    assert '"name": "math.factorial"' in obs and obs.endswith(GRAMMAR)
    assert info["action_valid"] and not info["won"] and info["tool_calls"] == []
    assert not info_problems(info, privileged=False) and "gold_tool_calls" not in info


def test_excluded_and_unknown_ids_are_refused() -> None:
    env = make("simple")
    for task_id in ("simple_python_17", "multiple_0"):
        with pytest.raises(BadInput, match="unknown task_id"):
            env.reset(options={"task_id": task_id})


BAD_ACTIONS: list[tuple[str, Any]] = [
    *ADVERSARIAL_ACTIONS,
    ("summary", "<summary>The factorial is 120.</summary>"),
    ("ask", "<ask>Which number?</ask>"),
    (
        "malformed block",
        '<tool_call>{"name": "math.factorial", "arguments": {"number": 5</tool_call>',
    ),
    (
        "chatter",
        'Sure: <tool_call>{"name": "math.factorial", "arguments": {"number": 5}}</tool_call>',
    ),
]


@pytest.mark.parametrize(("name", "action"), BAD_ACTIONS, ids=[n for n, _ in BAD_ACTIONS])
def test_bad_actions_are_invalid_and_end_the_episode(name: str, action: Any) -> None:
    env = make("simple", privileged=True)
    env.reset(options={"task_id": "simple_python_1"})
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["action_valid"] is False and info["won"] is False
    assert info["reward_components"] == {"ast_match": 0.0, "format": 0.0}
    assert obs.startswith("Invalid action: ") and len(obs) < 2000
    assert not info_problems(info, privileged=True)


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (
            "<summary>The factorial is 120.</summary>",
            "this task is answered with <tool_call> blocks, not with <summary>.",
        ),
        ("Sure.", "text outside the tags: 'Sure.'."),
    ],
)
def test_v0_repeats_the_grammar_after_the_reason_and_v1_does_not(action: str, error: str) -> None:
    observations = []
    for grammar_in_errors in (True, False):
        env = make("simple", grammar_in_errors=grammar_in_errors)
        first, _ = env.reset(options={"task_id": "simple_python_1"})
        assert first.endswith(GRAMMAR)
        obs, *_ = env.step(action)
        observations.append(obs)
    # v0's text is kept byte for byte; v1 does not repeat what the first observation says
    assert observations[0] == f"Invalid action: {error} {GRAMMAR}\nThe episode is over."
    assert observations[1] == f"Invalid action: {error}\nThe episode is over."


def test_malformed_block_is_reported_with_the_parsed_calls() -> None:
    env = make("parallel")
    env.reset(options={"task_id": "parallel_0"})
    good = render_calls(gold(env.entry)[:1])
    obs, _, _, _, info = env.step(f'{good}\n<tool_call>{{"name": 1}}</tool_call>')
    assert 'call block 2: "name" must be a non-empty string' in obs
    assert info["tool_calls"] == gold(env.entry)[:1]
    assert [s["tag"] for s in info["segments"]] == ["tool_call", "tool_call"]


def test_wrong_calls_are_valid_and_lose_with_a_reason() -> None:
    env = make("parallel")
    env.reset(options={"task_id": "parallel_0"})
    obs, reward, terminated, _, info = env.step(render_calls(gold(env.entry)[:1]))
    assert (reward, terminated, info["action_valid"], info["won"]) == (0.0, True, True, False)
    assert info["progress"] == 0.5
    assert info["reward_components"] == {"ast_match": 0.0, "format": 1.0}
    assert "wrong number of calls: 1 for 2" in obs


def _episode(env: BFCLEnv, task_id: str, action: Any) -> bytes:
    obs, info = env.reset(options={"task_id": task_id})
    return canonical([obs, info, *env.step(action)])


def test_same_task_same_transcript() -> None:
    for action in ("<summary>x</summary>", '<tool_call>{"name": "f"}</tool_call>'):
        a = _episode(make("live"), "live_parallel_0-0-0", action)
        b = _episode(make("live"), "live_parallel_0-0-0", action)
        assert a == b


def test_state_key_tracks_task_and_turn() -> None:
    env = make("live")
    _, first = env.reset(options={"task_id": "live_simple_0-0-0"})
    _, again = env.reset(options={"task_id": "live_simple_0-0-0"})
    _, other = env.reset(options={"task_id": "live_parallel_0-0-0"})
    *_, after = env.step("nonsense")
    assert first["state_key"] == again["state_key"]
    assert len({first["state_key"], other["state_key"], after["state_key"]}) == 3


def test_snapshot_restore_and_pickle() -> None:
    env = make("parallel_multiple", privileged=True)
    env.reset(options={"task_id": "parallel_multiple_1"})
    snap = env.snapshot()
    action = env.oracle_action()
    fresh = make("parallel_multiple", privileged=True)
    fresh.restore(snap)
    assert fresh.snapshot() == snap
    clone = pickle.loads(pickle.dumps(env))
    expected = canonical(env.step(action))
    assert canonical(fresh.step(action)) == expected
    assert canonical(clone.step(action)) == expected
    done = env.snapshot()
    after = make("parallel_multiple")
    after.restore(done)
    assert after.done and after.snapshot() == done


def test_snapshot_refuses_other_data() -> None:
    env = make("simple")
    env.reset(options={"task_id": "simple_python_1"})
    with pytest.raises(BadInput):
        make("multiple").restore(env.snapshot())


def test_constructor_checks() -> None:
    with pytest.raises(BadInput, match="unknown BFCL category"):
        make("simple_python")
    with pytest.raises(BadInput, match="unknown split"):
        make("simple", split="dev")
    env = make("simple", max_turns=3, render_mode="ansi")
    obs, _ = env.reset(options={"task_id": "simple_python_0"})
    assert env.render() == obs


def test_register_ids() -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def register(env_id: str, entry_point: str, **kw: Any) -> None:
        calls.append((env_id, entry_point, kw))

    bfcl.register_ids(register)
    variants = ["Simple", "Multiple", "Parallel", "ParallelMultiple", "Live"]
    assert [c[0] for c in calls] == [f"agentgym/BFCL-{v}-v{n}" for v in variants for n in (0, 1)]
    for env_id, entry_point, kw in calls:
        assert entry_point == "agentgym.envs.tools.bfcl:BFCLEnv"
        assert kw["family"] == "tools" and kw["description"]
        assert kw["kwargs"]["category"] in CATEGORIES
        # v0 keeps its constructor arguments; v1 gives invalid actions' reasons alone
        extra = {"grammar_in_errors": False} if env_id.endswith("-v1") else {}
        assert kw["kwargs"] == {"category": kw["kwargs"]["category"], **extra}


# ---------------------------------------------------------------------- the installed package
@pytest.mark.parametrize("category", list(CATEGORIES))
def test_oracle_wins_every_kept_shipped_entry(category: str) -> None:
    env = BFCLEnv(category)
    kept = kept_entries(category)
    assert len(kept) > 0.95 * (len(kept) + len(excluded_entries(category)))
    lost = []
    for task_id in kept:
        env.reset(options={"task_id": task_id})
        _, reward, *_ = env.step(env.oracle_action())
        if reward != 1.0:
            lost.append(task_id)
    assert not lost


def test_few_shipped_entries_are_excluded() -> None:
    counts = {c: len(excluded_entries(c)) for c in CATEGORIES}
    assert 0 < sum(counts.values()) <= 25, counts
    for reason in load_category("live").excluded.values():
        assert reason.startswith("the ground truth ")


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_splits_are_disjoint_and_deterministic(category: str) -> None:
    env = BFCLEnv(category, split="test")
    splits = {s: env.task_ids(s) for s in ("train", "val", "test")}
    ids = [i for s in splits.values() for i in s]
    assert sorted(ids) == sorted(kept_entries(category)) and len(set(ids)) == len(ids)
    assert all(splits.values())
    assert 0.55 < len(splits["train"]) / len(ids) < 0.85
    obs, info = env.reset(seed=7)
    assert info["task_id"] in splits["test"]
    assert BFCLEnv(category, split="test").reset(seed=7) == (obs, info)
