"""The travel domain: deterministic state, strict schemas, valid gold tasks, business rules,
truthful resources, and no stray exceptions on schema-valid arguments."""

from __future__ import annotations

import copy
import json
import os
import random
import re
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from agentgym.envs.tools.backend import TASK_TYPES, Call, Task, ToolFailure
from agentgym.envs.tools.domains.travel import TravelDomain, calls_conflict

DOMAIN = TravelDomain()
TOOLS = {t.name: t for t in DOMAIN.tools()}
PER_TYPE = 60
COLLECTIONS = {
    "f": "flights",
    "h": "hotels",
    "t": "travellers",
    "b": "bookings",
    "pay": "payments",
}


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


ARGS = {name: validator(tool.parameters) for name, tool in TOOLS.items()}
RESULTS = {name: validator(tool.returns) for name, tool in TOOLS.items()}


def clone(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON-able state (faster than ``copy.deepcopy``)."""
    return json.loads(json.dumps(state))


def run_call(state: dict[str, Any], call: Call) -> Any:
    return DOMAIN.call(state, call.name, copy.deepcopy(call.arguments))


def replay(state: dict[str, Any], task: Task) -> list[list[Any]]:
    """Every turn's results, run in order on one copy of ``state``."""
    sim = clone(state)
    return [[run_call(sim, c) for c in turn] for turn in task.gold_calls]


def has_write(task: Task) -> bool:
    return any(TOOLS[c.name].writes for turn in task.gold_calls for c in turn)


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return DOMAIN.build(0)


@pytest.fixture(scope="module")
def tasks(state: dict[str, Any]) -> list[Task]:
    before = dumps(state)
    made = DOMAIN.tasks(state, seed=0, per_type=PER_TYPE)
    assert dumps(state) == before, "tasks() changed the initial state"
    return made


# ---- state and schemas ---------------------------------------------------------------------


def test_build_is_deterministic_json_and_seed_dependent():
    a, b = DOMAIN.build(3), DOMAIN.build(3)
    assert dumps(a) == dumps(b)
    assert json.loads(json.dumps(a)) == a
    assert dumps(DOMAIN.build(4)) != dumps(a)
    assert 20 <= len(a["flights"]) <= 60 and 15 <= len(a["hotels"]) <= 40
    assert len(a["bookings"]) == a["next_booking"] - 1
    assert len(a["payments"]) == a["next_payment"] - 1


def test_build_is_identical_in_another_process():
    code = (
        "import json; from agentgym.envs.tools.domains.travel import TravelDomain; "
        "print(json.dumps(TravelDomain().build(11), sort_keys=True))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    ).stdout
    assert out.strip() == dumps(DOMAIN.build(11))


def test_state_is_consistent(state):
    for b in state["bookings"].values():
        assert b["status"] in ("pending_payment", "paid", "cancelled")
        if b["status"] == "paid":
            assert state["payments"][b["payment_id"]]["status"] == "captured"
        elif b["payment_id"] is not None:
            assert b["status"] == "cancelled"
            assert state["payments"][b["payment_id"]]["status"] == "refunded"
    for p in state["payments"].values():
        assert state["bookings"][p["booking_id"]]["payment_id"] == p["payment_id"]
    for f in state["flights"].values():
        assert f["date"].startswith("2027-03-")
        for cabin in f["cabins"].values():
            assert cabin["price"] == round(cabin["price"], 2) and cabin["seats_left"] >= 0


def test_tool_schemas_are_strict_and_documented():
    tools = DOMAIN.tools()
    assert 8 <= len(tools) <= 14
    assert len(TOOLS) == len(tools)
    for tool in tools:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", tool.name)
        assert tool.description
        params = tool.parameters
        jsonschema.Draft202012Validator.check_schema(params)
        jsonschema.Draft202012Validator.check_schema(tool.returns)
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop["type"] and prop["description"]
        low, high = (150, 400) if tool.writes else (50, 200)
        assert low <= tool.latency_ms <= high
        assert tool.spec()["parameters"] is params
    assert {t.name for t in tools if t.writes} == {
        "book_flight",
        "book_hotel",
        "cancel_booking",
        "pay_booking",
    }


# ---- tasks ---------------------------------------------------------------------------------


def test_task_counts_ids_and_order(tasks):
    assert len(tasks) == PER_TYPE * len(TASK_TYPES)
    assert len({t.id for t in tasks}) == len(tasks)
    assert [t.task_type for t in tasks] == [k for k in TASK_TYPES for _ in range(PER_TYPE)]
    for task_type in TASK_TYPES:
        same = [t for t in tasks if t.task_type == task_type]
        assert len({(t.request, t.clarify_reply) for t in same}) == PER_TYPE


def test_tasks_are_deterministic_in_seed(state, tasks):
    again = DOMAIN.tasks(state, seed=0, per_type=PER_TYPE)
    assert again == tasks
    small = DOMAIN.tasks(state, seed=0, per_type=5)
    other = DOMAIN.tasks(state, seed=1, per_type=5)
    assert [t.task_type for t in other] == [k for k in TASK_TYPES for _ in range(5)]
    assert [t.request for t in other] != [t.request for t in small]


def check_gold(state: dict[str, Any], tasks: list[Task]) -> None:
    """Gold calls are schema-valid, replay without failure into results that match the
    tools' ``returns``, and contain every answer fact; ``state`` is left as it was."""
    before = dumps(state)
    for task in tasks:
        for turn in task.gold_calls:
            for call in turn:
                ARGS[call.name].validate(call.arguments)
        results = replay(state, task)
        for turn, outs in zip(task.gold_calls, results, strict=True):
            for call, out in zip(turn, outs, strict=True):
                RESULTS[call.name].validate(out)
        text = " ".join(json.dumps(r) for outs in results for r in outs)
        for fact in task.answer_facts:
            assert fact in text, (task.id, fact)
        if task.task_type == "irrelevance":
            assert task.gold_calls == () and task.answer_facts == ()
        else:
            assert 1 <= len(task.answer_facts) <= 3, task.id
    assert dumps(state) == before


def test_gold_calls_validate_replay_and_support_the_facts(state, tasks):
    check_gold(state, tasks)


@pytest.mark.parametrize("seed", [5, 17])
def test_tasks_hold_for_other_states(seed):
    state = DOMAIN.build(seed)
    check_gold(state, DOMAIN.tasks(state, seed=seed, per_type=20))


def test_task_shapes(state, tasks):
    for task in tasks:
        turns = task.gold_calls
        if task.task_type == "single":
            assert len(turns) == 1 and len(turns[0]) == 1
        elif task.task_type == "multiple":
            names = [c.name for turn in turns for c in turn]
            assert 2 <= len(turns) <= 3 and all(len(t) == 1 for t in turns)
            assert len(set(names)) == len(names), task.id
        elif task.task_type == "parallel":
            assert len(turns) == 1 and 2 <= len(turns[0]) <= 4
            res = [DOMAIN.resources(c.name, c.arguments) for c in turns[0]]
            for i in range(len(res)):
                for j in range(i):
                    assert not calls_conflict(res[i], res[j]), task.id
        elif task.task_type == "dependent":
            assert 2 <= len(turns) <= 3 and all(len(t) == 1 for t in turns)


def test_dependent_calls_use_values_only_found_in_results(state, tasks):
    for task in (t for t in tasks if t.task_type == "dependent"):
        results = replay(state, task)
        for i in range(1, len(task.gold_calls)):
            earlier = " ".join(json.dumps(r) for outs in results[:i] for r in outs)
            values = [v for v in task.gold_calls[i][0].arguments.values() if isinstance(v, str)]
            assert any(v not in task.request and v in earlier for v in values), (task.id, i)


def test_clarification_hides_one_detail(tasks):
    for task in (t for t in tasks if t.task_type == "clarification"):
        assert len(task.hidden_facts) == 1
        ((key, value),) = task.hidden_facts.items()
        (call,) = task.gold_calls[0]
        assert key in TOOLS[call.name].parameters["required"]
        assert call.arguments[key] == value
        assert value not in task.request and value in task.clarify_reply


def test_write_tasks_are_at_least_a_third(tasks):
    for task_type in ("single", "multiple", "parallel", "dependent", "clarification"):
        same = [t for t in tasks if t.task_type == task_type]
        writes = sum(has_write(t) for t in same)
        assert 3 * writes >= len(same), task_type
        assert writes < len(same), task_type


def test_writes_change_state_and_reads_do_not(state, tasks):
    seen: set[str] = set()
    for task in tasks:
        sim = clone(state)
        for turn in task.gold_calls:
            for call in turn:
                before = json.dumps(sim)
                run_call(sim, call)
                assert (json.dumps(sim) != before) == TOOLS[call.name].writes, call
                seen.add(call.name)
    assert seen == set(TOOLS)


# ---- rules ---------------------------------------------------------------------------------


def expect_failure(
    state: dict[str, Any], name: str, args: dict[str, Any], code: str, kind: str = ""
) -> None:
    before = dumps(state)
    with pytest.raises(ToolFailure) as info:
        DOMAIN.call(state, name, args)
    assert info.value.code == code and info.value.message
    if kind:
        assert info.value.kind == kind
    assert dumps(state) == before, "a failed call changed the state"


def test_missing_entities_are_not_found(state):
    s = copy.deepcopy(state)
    stay = {"check_in": "2027-03-02", "check_out": "2027-03-04", "rooms": 1}
    nf = "not_found"
    expect_failure(s, "get_flight", {"flight_id": "f999"}, nf, "flight")
    expect_failure(s, "get_hotel", {"hotel_id": "h999"}, nf, "hotel")
    expect_failure(s, "get_booking", {"booking_id": "b999"}, nf, "booking")
    expect_failure(s, "cancel_booking", {"booking_id": "b999"}, nf, "booking")
    expect_failure(s, "pay_booking", {"booking_id": "b999", "payment_method": "visa"}, nf)
    expect_failure(s, "get_payment", {"payment_id": "pay999"}, nf, "payment")
    expect_failure(s, "list_bookings", {"traveller_id": "t99"}, nf, "traveller")
    args = {"flight_id": "f1", "traveller_id": "t99", "cabin": "economy"}
    expect_failure(s, "book_flight", args, nf, "traveller")
    expect_failure(s, "book_flight", {**args, "flight_id": "f999", "traveller_id": "t1"}, nf)
    expect_failure(s, "book_hotel", {"hotel_id": "h999", "traveller_id": "t1", **stay}, nf)
    search = {"origin": "XYZ", "destination": "JFK", "date": "2027-03-05", "cabin": "economy"}
    expect_failure(s, "search_flights", search, nf, "airport")


def test_booking_paying_and_cancelling_follow_the_rules(state):
    s = copy.deepcopy(state)
    fid, cabin = next(
        (fid, c)
        for fid, f in sorted(s["flights"].items())
        for c, v in f["cabins"].items()
        if v["seats_left"] > 0
    )
    seats = s["flights"][fid]["cabins"][cabin]["seats_left"]
    booked = DOMAIN.call(s, "book_flight", {"flight_id": fid, "traveller_id": "t1", "cabin": cabin})
    assert booked["booking_id"] == f"b{state['next_booking']}"
    assert booked["seats_left"] == seats - 1 == s["flights"][fid]["cabins"][cabin]["seats_left"]
    bid = booked["booking_id"]
    paid = DOMAIN.call(s, "pay_booking", {"booking_id": bid, "payment_method": "amex"})
    assert paid["payment_id"] == f"pay{state['next_payment']}"
    assert paid["amount"] == booked["total"]
    fp = "failed_precondition"
    expect_failure(s, "pay_booking", {"booking_id": bid, "payment_method": "visa"}, fp)
    done = DOMAIN.call(s, "cancel_booking", {"booking_id": bid})
    assert done["refund_amount"] == booked["total"]
    assert done["refunded_payment_id"] == paid["payment_id"]
    assert s["payments"][paid["payment_id"]]["status"] == "refunded"
    assert s["flights"][fid]["cabins"][cabin]["seats_left"] == seats
    expect_failure(s, "cancel_booking", {"booking_id": bid}, fp)
    expect_failure(s, "pay_booking", {"booking_id": bid, "payment_method": "visa"}, fp)
    s["flights"][fid]["cabins"][cabin]["seats_left"] = 0
    expect_failure(s, "book_flight", {"flight_id": fid, "traveller_id": "t1", "cabin": cabin}, fp)


def test_unpaid_cancellation_refunds_nothing_and_frees_rooms(state):
    s = copy.deepcopy(state)
    hotel = s["hotels"]["h1"]
    hotel["rooms_available"] = 2
    args = {"hotel_id": "h1", "traveller_id": "t2", "check_in": "2027-03-10", "rooms": 2}
    booked = DOMAIN.call(s, "book_hotel", {**args, "check_out": "2027-03-13"})
    assert booked["nights"] == 3 and hotel["rooms_available"] == 0
    assert booked["total"] == round(hotel["price_per_night"] * 3 * 2, 2)
    fp = "failed_precondition"
    expect_failure(s, "book_hotel", {**args, "rooms": 1, "check_out": "2027-03-12"}, fp)
    hotel["rooms_available"] = 4
    expect_failure(s, "book_hotel", {**args, "check_out": "2027-03-10"}, fp)
    expect_failure(s, "book_hotel", {**args, "check_out": "2027-04-02"}, fp)
    expect_failure(
        s,
        "search_hotels",
        {"city": "Paris", "check_in": "2027-03-09", "check_out": "2027-03-08"},
        fp,
    )
    same = {"origin": "JFK", "destination": "JFK", "date": "2027-03-05", "cabin": "business"}
    expect_failure(s, "search_flights", same, fp)
    done = DOMAIN.call(s, "cancel_booking", {"booking_id": booked["booking_id"]})
    assert done["refund_amount"] == 0.0 and done["refunded_payment_id"] is None
    assert hotel["rooms_available"] == 6


def test_searches_filter_and_sort(state):
    f = state["flights"]["f1"]
    args = {"origin": f["origin"], "destination": f["destination"], "date": f["date"]}
    hits = DOMAIN.call(state, "search_flights", {**args, "cabin": "business", "sort_by": "price"})
    assert "f1" in [h["flight_id"] for h in hits["flights"]]
    prices = [h["price"] for h in hits["flights"]]
    assert prices == sorted(prices) and hits["count"] == len(prices)
    city = state["hotels"]["h1"]["city"]
    stay = {"city": city, "check_in": "2027-03-03", "check_out": "2027-03-05"}
    every = DOMAIN.call(state, "search_hotels", stay)["hotels"]
    assert {h["hotel_id"] for h in every} == {
        i for i, h in state["hotels"].items() if h["city"] == city
    }
    cap = min(h["price_per_night"] for h in every)
    cheap = DOMAIN.call(state, "search_hotels", {**stay, "max_price": cap})["hotels"]
    assert [h["price_per_night"] for h in cheap] == [cap] * len(cheap)
    assert all(h["total_price"] == round(h["price_per_night"] * 2, 2) for h in every)


# ---- fuzz and resources --------------------------------------------------------------------


def random_value(rng: random.Random, schema: dict[str, Any], state: dict[str, Any]) -> Any:
    """A value valid against ``schema``: ids from the state or invented, dates in and around
    the window, numbers within bounds."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if schema["type"] == "integer":
        return rng.randint(schema.get("minimum", 0), schema.get("maximum", 10))
    if schema["type"] == "number":
        return round(rng.uniform(schema.get("minimum", 0), schema.get("maximum", 1000) / 4), 2)
    if schema.get("format") == "date":
        return f"2027-{rng.choice(['02', '03', '03', '03', '04'])}-{rng.randint(1, 28):02d}"
    if schema.get("pattern") == "^[A-Z]{3}$":
        codes = sorted(state["airports"])
        return rng.choice([*codes, *codes, "ZZZ", "ABC"])
    match = re.fullmatch(r"\^([a-z]+)\[0-9\]\+\$", schema["pattern"])
    assert match, schema
    prefix = match.group(1)
    ids = sorted(state[COLLECTIONS[prefix]])
    if ids and rng.random() < 0.85:
        return rng.choice(ids)
    return f"{prefix}{rng.randint(0, 60)}"


def random_call(
    rng: random.Random,
    state: dict[str, Any],
    hints: dict[str, Any] | None = None,
    writes_only: bool = False,
) -> Call:
    """A schema-valid call of a random tool (a writing one if ``writes_only``); an argument
    named in ``hints`` mostly takes the hinted value."""
    tool = rng.choice([t for t in DOMAIN.tools() if t.writes or not writes_only])
    params = tool.parameters
    hints = hints or {}
    args = {
        key: hints[key] if key in hints and rng.random() < 0.8 else random_value(rng, prop, state)
        for key, prop in params["properties"].items()
        if key in params["required"] or rng.random() < 0.5
    }
    return Call(tool.name, args)


def related(state: dict[str, Any], call: Call) -> dict[str, Any]:
    """Argument values naming what ``call`` touches: a booking's flight, hotel, traveller,
    payment and dates, a payment's booking, a flight's route, the next new ids; used to aim
    a second call at the same entities."""
    hints = {
        "booking_id": f"b{state['next_booking']}",
        "payment_id": f"pay{state['next_payment']}",
        **call.arguments,
    }
    payment = state["payments"].get(hints.get("payment_id", ""))
    if payment:
        hints["booking_id"] = payment["booking_id"]
    booking = state["bookings"].get(hints.get("booking_id", ""))
    if booking:
        hints.update({k: v for k, v in booking.items() if v is not None and k != "status"})
    flight = state["flights"].get(hints.get("flight_id", ""))
    if flight:
        hints.update(
            origin=flight["origin"], destination=flight["destination"], date=flight["date"]
        )
    hotel = state["hotels"].get(hints.get("hotel_id", ""))
    if hotel:
        hints["city"] = hotel["city"]
    hints.pop("total", None)
    return hints


def outcome(state: dict[str, Any], call: Call) -> str:
    try:
        return dumps(run_call(state, call))
    except ToolFailure as failure:
        return f"{failure.code}: {failure.message}"


def test_fuzz_valid_arguments_raise_only_tool_failures():
    rng = random.Random(2024)
    failures: dict[str, int] = {}
    for seed in range(10):
        state = DOMAIN.build(seed)
        kept: list[tuple[Any, str]] = []
        for _ in range(200):
            call = random_call(rng, state)
            ARGS[call.name].validate(call.arguments)
            try:
                result = run_call(state, call)
            except ToolFailure as failure:
                assert failure.code in ("not_found", "failed_precondition")
                failures[failure.code] = failures.get(failure.code, 0) + 1
                continue
            RESULTS[call.name].validate(result)
            kept.append((result, dumps(result)))
        assert json.loads(json.dumps(state)) == state
        assert all(dumps(r) == d for r, d in kept), "a result shares objects with the state"
    assert failures.get("not_found", 0) > 50 and failures.get("failed_precondition", 0) > 50


def test_resources_conflict_on_the_same_entity_only():
    res = DOMAIN.resources
    assert calls_conflict(
        res("pay_booking", {"booking_id": "b3", "payment_method": "visa"}),
        res("cancel_booking", {"booking_id": "b3"}),
    )
    book = {"flight_id": "f2", "traveller_id": "t1", "cabin": "economy"}
    assert calls_conflict(
        res("book_flight", book), res("book_flight", {**book, "traveller_id": "t2"})
    )
    assert calls_conflict(res("book_flight", book), res("search_flights", {}))
    assert calls_conflict(
        res("pay_booking", {"booking_id": "b3"}), res("list_bookings", {"traveller_id": "t1"})
    )
    assert not calls_conflict(
        res("get_flight", {"flight_id": "f1"}), res("get_flight", {"flight_id": "f2"})
    )
    assert not calls_conflict(
        res("get_booking", {"booking_id": "b1"}), res("get_booking", {"booking_id": "b2"})
    )
    assert not calls_conflict(res("get_hotel", {"hotel_id": "h1"}), res("book_flight", book))
    assert not calls_conflict(
        res("pay_booking", {"booking_id": "b3"}), res("get_booking", {"booking_id": "b4"})
    )
    assert not calls_conflict(res("list_travellers", {}), res("book_flight", book))


def test_non_conflicting_calls_commute():
    """Two calls that ``resources`` lets run concurrently give the same results and final
    state in either order."""
    rng = random.Random(7)
    checked = 0
    for seed in range(4):
        state = DOMAIN.build(seed)
        for _ in range(250):
            a = random_call(rng, state, writes_only=rng.random() < 0.5)
            b = random_call(rng, state, related(state, a))
            ARGS[b.name].validate(b.arguments)
            if calls_conflict(
                DOMAIN.resources(a.name, a.arguments), DOMAIN.resources(b.name, b.arguments)
            ):
                continue
            first, second = clone(state), clone(state)
            ab = (outcome(first, a), outcome(first, b))
            ba = (outcome(second, b), outcome(second, a))
            assert ab == (ba[1], ba[0]), (a, b)
            assert dumps(first) == dumps(second), (a, b)
            checked += 1
            if rng.random() < 0.3:
                outcome(state, a)
    assert checked > 200
