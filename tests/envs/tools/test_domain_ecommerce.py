"""The e-commerce tool domain: state, schemas, calls, resources and generated tasks."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from agentgym.envs.tools.backend import TASK_TYPES, Task, Tool, ToolFailure
from agentgym.envs.tools.domains.ecommerce import EcommerceDomain

DOMAIN = EcommerceDomain()
TOOLS = {tool.name: tool for tool in DOMAIN.tools()}
PER_TYPE = 60
COLLECTIONS = {"p": "products", "u": "users", "o": "orders", "r": "refunds"}
WORDS = ("", "smart", "lamp", "books", "premium mug", "zebra", "Classic", "toys", "serum")


def dump(state: dict[str, Any]) -> str:
    return json.dumps(state, sort_keys=True)


def snap(state: dict[str, Any]) -> str:
    """A quick fingerprint for before/after checks within one process (no key sorting)."""
    return json.dumps(state)


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


ARGS = {name: validator(tool.parameters) for name, tool in TOOLS.items()}
RETURNS = {name: validator(tool.returns) for name, tool in TOOLS.items()}


def overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def conflict(first: tuple[str, dict[str, Any]], second: tuple[str, dict[str, Any]]) -> bool:
    """Whether two calls conflict by the domain's resources (a write meets any touch)."""
    r1, w1 = DOMAIN.resources(*first)
    r2, w2 = DOMAIN.resources(*second)
    return any(overlap(w, p) for w in w1 for p in r2 + w2) or any(
        overlap(w, p) for w in w2 for p in r1 + w1
    )


def random_value(prop: dict[str, Any], state: dict[str, Any], rng: random.Random) -> Any:
    """A value valid against one property schema: known or invented ids, bounded numbers."""
    if "enum" in prop:
        return rng.choice(prop["enum"])
    kind = prop["type"]
    if kind == "integer":
        return rng.randint(prop.get("minimum", 0), prop.get("maximum", 100))
    if kind == "number":
        high = rng.choice((prop.get("maximum", 1000.0), 300.0))
        return round(rng.uniform(prop.get("minimum", 0.0), high), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if "pattern" in prop:
        prefix = prop["pattern"][1]
        known = sorted(state[COLLECTIONS[prefix]])
        if known and rng.random() < 0.8:
            return rng.choice(known)
        return f"{prefix}{rng.randint(0, 999)}"
    if prop.get("format") == "date":
        return (dt.date(2024, 12, 1) + dt.timedelta(days=rng.randint(0, 140))).isoformat()
    return rng.choice(WORDS)


def random_args(tool: Tool, state: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    schema = tool.parameters
    return {
        name: random_value(prop, state, rng)
        for name, prop in schema["properties"].items()
        if name in schema["required"] or rng.random() < 0.5
    }


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return DOMAIN.build(0)


@pytest.fixture(scope="module")
def tasks(state: dict[str, Any]) -> list[Task]:
    before = dump(state)
    made = DOMAIN.tasks(state, seed=0, per_type=PER_TYPE)
    assert dump(state) == before
    return made


def replay(state: dict[str, Any], task: Task) -> list[Any]:
    """Run a task's gold calls on a copy, checking read/write behaviour and result schemas."""
    work = copy.deepcopy(state)
    results = []
    for turn in task.gold_calls:
        for call in turn:
            before = snap(work)
            result = DOMAIN.call(work, call.name, call.arguments)
            RETURNS[call.name].validate(result)
            assert (snap(work) != before) == TOOLS[call.name].writes, (task.id, call)
            results.append(result)
    return results


# --------------------------------------------------------------------------- state


def test_build_is_deterministic_json_and_seed_dependent():
    first, again = DOMAIN.build(0), DOMAIN.build(0)
    assert dump(first) == dump(again)
    assert json.loads(json.dumps(first)) == first
    assert dump(DOMAIN.build(1)) != dump(first)


def test_build_and_tasks_match_in_another_process():
    code = (
        "import hashlib, json\n"
        "from agentgym.envs.tools.domains.ecommerce import EcommerceDomain as D\n"
        "s = D().build(3)\n"
        "t = [[x.id, x.request, repr(x.gold_calls), x.answer_facts] for x in D().tasks(s, 3, 5)]\n"
        "print(hashlib.sha256((json.dumps(s, sort_keys=True) + repr(t)).encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    state = DOMAIN.build(3)
    made = [
        [x.id, x.request, repr(x.gold_calls), x.answer_facts] for x in DOMAIN.tasks(state, 3, 5)
    ]
    here = hashlib.sha256((dump(state) + repr(made)).encode()).hexdigest()
    assert out.stdout.strip() == here


def test_state_holds_every_order_status_and_consistent_totals(state):
    statuses = {o["status"] for o in state["orders"].values()}
    assert statuses == {"placed", "shipped", "delivered", "cancelled", "returned"}
    for oid, order in state["orders"].items():
        assert re.fullmatch(r"o[0-9]+", oid) and order["order_id"] == oid
        assert order["user_id"] in state["users"]
        lines = sum(x["unit_price"] * x["quantity"] for x in order["items"])
        assert order["subtotal"] == round(lines, 2)
        assert order["total"] == round(order["subtotal"] + order["shipping_cost"], 2)
    for product in state["products"].values():
        assert product["price"] == round(product["price"], 2) and product["stock"] >= 0
    assert state["next_order"] == len(state["orders"]) + 1
    assert state["next_refund"] == len(state["refunds"]) + 1
    assert all(
        state["orders"][r["order_id"]]["refund_id"] == k for k, r in state["refunds"].items()
    )
    assert any(state["carts"][u] for u in state["users"])


# --------------------------------------------------------------------------- tools


def test_tool_schemas_are_strict_and_valid():
    assert 8 <= len(TOOLS) <= 14
    for tool in TOOLS.values():
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", tool.name)
        schema = tool.parameters
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.Draft202012Validator.check_schema(tool.returns)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        for prop in schema["properties"].values():
            assert prop["type"] in ("string", "integer", "number", "boolean")
            assert prop["description"]
        low, high = (150, 400) if tool.writes else (50, 200)
        assert low <= tool.latency_ms <= high, tool.name
    assert {t.name for t in TOOLS.values() if t.writes} == {
        "add_to_cart",
        "remove_from_cart",
        "place_order",
        "cancel_order",
        "request_refund",
    }


def test_place_order_moves_cart_to_a_new_order_and_takes_stock(state):
    work = copy.deepcopy(state)
    uid = next(u for u in sorted(work["users"]) if work["carts"][u])
    lines = copy.deepcopy(work["carts"][uid])
    stock = {x["product_id"]: work["products"][x["product_id"]]["stock"] for x in lines}
    result = DOMAIN.call(work, "place_order", {"user_id": uid, "shipping_speed": "express"})
    assert result["order_id"] == f"o{state['next_order']}" and result["status"] == "placed"
    assert work["carts"][uid] == []
    for line in lines:
        assert (
            work["products"][line["product_id"]]["stock"]
            == stock[line["product_id"]] - (line["quantity"])
        )
    order = DOMAIN.call(work, "get_order", {"order_id": result["order_id"]})
    assert order["items"] == lines and order["total"] == result["total"]
    back = DOMAIN.call(
        work, "cancel_order", {"order_id": result["order_id"], "reason": "changed_mind"}
    )
    assert back["refund_amount"] == result["total"]
    assert all(work["products"][p]["stock"] == n for p, n in stock.items())


def test_search_filters_and_sorts(state):
    result = DOMAIN.call(
        state,
        "search_products",
        {"category": "books", "max_price": 40, "sort": "price_asc", "limit": 20},
    )
    prices = [r["price"] for r in result["results"]]
    assert prices == sorted(prices) and all(p <= 40 for p in prices)
    assert all(r["category"] == "books" for r in result["results"])
    expected = sum(
        1 for p in state["products"].values() if p["category"] == "books" and p["price"] <= 40
    )
    assert result["count"] == expected > 0
    stocked = DOMAIN.call(state, "search_products", {"in_stock_only": True, "limit": 20})
    assert all(r["in_stock"] for r in stocked["results"])


def test_missing_entities_raise_not_found(state):
    cases = [
        ("get_product", {"product_id": "p999"}, "product"),
        ("view_cart", {"user_id": "u99"}, "user"),
        ("get_order", {"order_id": "o999"}, "order"),
        ("track_shipment", {"order_id": "o0"}, "order"),
        ("get_refund", {"refund_id": "r999"}, "refund"),
        ("add_to_cart", {"user_id": "u1", "product_id": "p999", "quantity": 1}, "product"),
        ("cancel_order", {"order_id": "o999", "reason": "changed_mind"}, "order"),
        ("request_refund", {"order_id": "o999", "reason": "damaged"}, "order"),
    ]
    for name, args, kind in cases:
        with pytest.raises(ToolFailure) as err:
            DOMAIN.call(copy.deepcopy(state), name, args)
        assert err.value.code == "not_found" and err.value.kind == kind, name


def test_broken_rules_raise_failed_precondition_and_change_nothing(state):
    orders = sorted(state["orders"].values(), key=lambda o: int(o["order_id"][1:]))
    today = dt.date.fromisoformat(state["today"])

    def age(order: dict[str, Any]) -> int:
        return (today - dt.date.fromisoformat(order["shipping"]["delivered_date"])).days

    shipped = next(o for o in orders if o["status"] == "shipped")["order_id"]
    placed = next(o for o in orders if o["status"] == "placed")["order_id"]
    returned = next(o for o in orders if o["status"] == "returned")["order_id"]
    old = next(o for o in orders if o["status"] == "delivered" and age(o) > 30)["order_id"]
    empty = next(u for u in sorted(state["users"]) if not state["carts"][u])
    full = next(u for u in sorted(state["users"]) if state["carts"][u])
    sold_out = next(p for p, v in state["products"].items() if v["stock"] < 10)
    absent = next(
        p for p in state["products"] if p not in {x["product_id"] for x in state["carts"][full]}
    )
    cases = [
        ("cancel_order", {"order_id": shipped, "reason": "changed_mind"}),
        ("request_refund", {"order_id": placed, "reason": "damaged"}),
        ("request_refund", {"order_id": old, "reason": "damaged"}),
        ("request_refund", {"order_id": returned, "reason": "damaged"}),
        ("place_order", {"user_id": empty, "shipping_speed": "standard"}),
        ("add_to_cart", {"user_id": empty, "product_id": sold_out, "quantity": 10}),
        ("remove_from_cart", {"user_id": full, "product_id": absent}),
    ]
    for name, args in cases:
        work = copy.deepcopy(state)
        with pytest.raises(ToolFailure) as err:
            DOMAIN.call(work, name, args)
        assert err.value.code == "failed_precondition" and err.value.message, (name, args)
        assert dump(work) == dump(state)


def test_refund_creates_an_id_once(state):
    work = copy.deepcopy(state)
    today = dt.date.fromisoformat(state["today"])
    oid = next(
        o["order_id"]
        for o in work["orders"].values()
        if o["status"] == "delivered"
        and (today - dt.date.fromisoformat(o["shipping"]["delivered_date"])).days <= 30
    )
    refund = DOMAIN.call(work, "request_refund", {"order_id": oid, "reason": "wrong_item"})
    assert refund["refund_id"] == f"r{state['next_refund']}"
    assert refund["amount"] == state["orders"][oid]["total"]
    assert DOMAIN.call(work, "get_refund", {"refund_id": refund["refund_id"]}) == refund
    assert DOMAIN.call(work, "get_order", {"order_id": oid})["status"] == "returned"
    with pytest.raises(ToolFailure, match="already has refund"):
        DOMAIN.call(work, "request_refund", {"order_id": oid, "reason": "wrong_item"})


def test_fuzz_valid_arguments_raise_only_tool_failures():
    rng = random.Random(7)
    names = sorted(TOOLS)
    failures: dict[str, int] = {}
    work: dict[str, Any] = {}
    for i in range(2000):
        if i % 250 == 0:
            work = DOMAIN.build(i // 250)
        tool = TOOLS[rng.choice(names)]
        args = random_args(tool, work, rng)
        ARGS[tool.name].validate(args)
        before = snap(work)
        try:
            result = DOMAIN.call(work, tool.name, args)
        except ToolFailure as err:
            assert err.code in ("not_found", "failed_precondition")
            assert snap(work) == before
            failures[err.code] = failures.get(err.code, 0) + 1
            continue
        RETURNS[tool.name].validate(json.loads(json.dumps(result)))
        if not tool.writes:
            assert snap(work) == before
    assert failures.get("not_found", 0) > 50 and failures.get("failed_precondition", 0) > 50


# --------------------------------------------------------------------------- resources


def test_resources_conflict_on_shared_entities_only():
    assert conflict(
        ("add_to_cart", {"user_id": "u1", "product_id": "p1", "quantity": 1}),
        ("remove_from_cart", {"user_id": "u1", "product_id": "p2"}),
    )
    assert conflict(
        ("cancel_order", {"order_id": "o3", "reason": "changed_mind"}),
        ("request_refund", {"order_id": "o3", "reason": "damaged"}),
    )
    assert conflict(
        ("place_order", {"user_id": "u2", "shipping_speed": "standard"}),
        ("get_product", {"product_id": "p5"}),
    )
    assert conflict(
        ("request_refund", {"order_id": "o3", "reason": "damaged"}),
        ("get_refund", {"refund_id": "r9"}),
    )
    assert not conflict(
        ("get_product", {"product_id": "p1"}), ("get_product", {"product_id": "p2"})
    )
    assert not conflict(("get_order", {"order_id": "o1"}), ("track_shipment", {"order_id": "o2"}))
    assert not conflict(
        ("add_to_cart", {"user_id": "u1", "product_id": "p1", "quantity": 1}),
        ("add_to_cart", {"user_id": "u2", "product_id": "p1", "quantity": 1}),
    )


def test_non_conflicting_calls_commute():
    rng = random.Random(11)
    names = sorted(TOOLS)
    checked = 0
    states = [DOMAIN.build(seed) for seed in range(4)]
    for i in range(500):
        state = states[i % 4]
        first, second = (TOOLS[rng.choice(names)] for _ in range(2))
        a = (first.name, random_args(first, state, rng))
        b = (second.name, random_args(second, state, rng))
        if conflict(a, b):
            continue
        outcomes = []
        for x, y in ((a, b), (b, a)):
            work = copy.deepcopy(state)
            got = {}
            for name, args in (x, y):
                try:
                    got[name + json.dumps(args, sort_keys=True)] = DOMAIN.call(work, name, args)
                except ToolFailure as err:
                    got[name + json.dumps(args, sort_keys=True)] = err.code
            outcomes.append(json.dumps(got, sort_keys=True) + dump(work))
        assert outcomes[0] == outcomes[1], (a, b)
        checked += 1
    assert checked > 150


# --------------------------------------------------------------------------- tasks


def test_task_ids_types_and_determinism(state, tasks):
    assert len({t.id for t in tasks}) == len(tasks) == 6 * PER_TYPE
    assert [t.task_type for t in tasks] == [k for k in TASK_TYPES for _ in range(PER_TYPE)]
    assert all(t.id.startswith(f"ecommerce-{t.task_type}-") for t in tasks)
    assert DOMAIN.tasks(state, seed=0, per_type=10) == DOMAIN.tasks(state, seed=0, per_type=10)
    assert DOMAIN.tasks(state, seed=1, per_type=10) != DOMAIN.tasks(state, seed=0, per_type=10)
    for kind in TASK_TYPES:
        distinct = {(t.request, repr(t.gold_calls)) for t in tasks if t.task_type == kind}
        assert len(distinct) >= PER_TYPE * 3 // 4, kind


def test_gold_calls_validate_replay_and_hold_the_facts(state, tasks):
    before = dump(state)
    used = set()
    for task in tasks:
        for turn in task.gold_calls:
            for call in turn:
                ARGS[call.name].validate(call.arguments)
                used.add(call.name)
        text = "".join(json.dumps(r) for r in replay(state, task))
        if task.task_type == "irrelevance":
            assert task.gold_calls == () and task.answer_facts == ()
            continue
        assert 1 <= len(task.answer_facts) <= 3, task.id
        for fact in task.answer_facts:
            assert fact and fact in text, (task.id, fact)
    assert used == set(TOOLS)
    assert dump(state) == before


def test_task_shapes_per_type(tasks):
    for task in tasks:
        turns = task.gold_calls
        names = [c.name for turn in turns for c in turn]
        if task.task_type in ("single", "clarification"):
            assert len(turns) == 1 and len(turns[0]) == 1
        elif task.task_type == "multiple":
            assert 2 <= len(turns) <= 3 and all(len(t) == 1 for t in turns)
            assert len(set(names)) == len(names)
        elif task.task_type == "parallel":
            assert len(turns) == 1 and 2 <= len(turns[0]) <= 4
            calls = [(c.name, c.arguments) for c in turns[0]]
            for i, a in enumerate(calls):
                for b in calls[i + 1 :]:
                    assert not conflict(a, b), (task.id, a, b)
        elif task.task_type == "dependent":
            assert 2 <= len(turns) <= 3 and all(len(t) == 1 for t in turns)


def test_writes_are_a_third_of_tool_tasks(tasks):
    for kind in ("single", "multiple", "parallel", "dependent", "clarification"):
        group = [t for t in tasks if t.task_type == kind]
        writing = [
            t for t in group if any(TOOLS[c.name].writes for turn in t.gold_calls for c in turn)
        ]
        assert 3 * len(writing) >= len(group), kind
        assert len(writing) < len(group), kind


def test_dependent_calls_need_earlier_results(state, tasks):
    for task in (t for t in tasks if t.task_type == "dependent"):
        results = replay(state, task)
        calls = [c for turn in task.gold_calls for c in turn]
        for k in range(1, len(calls)):
            seen = "".join(json.dumps(r) for r in results[:k])
            fed = [
                v
                for v in calls[k].arguments.values()
                if isinstance(v, str) and v not in task.request and json.dumps(v) in seen
            ]
            assert fed, (task.id, calls[k])


def test_clarification_hides_one_detail(tasks):
    for task in (t for t in tasks if t.task_type == "clarification"):
        assert len(task.hidden_facts) == 1
        (key, value), call = next(iter(task.hidden_facts.items())), task.gold_calls[0][0]
        assert call.arguments[key] == value
        assert value not in task.request and value in task.clarify_reply, task.id


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tasks_replay_on_other_seeds(seed):
    state = DOMAIN.build(seed)
    for task in DOMAIN.tasks(state, seed=seed, per_type=20):
        text = "".join(json.dumps(r) for r in replay(state, task))
        assert all(fact in text for fact in task.answer_facts), task.id
