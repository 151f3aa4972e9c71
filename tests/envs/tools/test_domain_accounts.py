"""Tests of the customer-accounts tool domain: schemas, the seeded backend, resources and the
generated tasks with their gold calls."""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import random
import re
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from agentgym.envs.tools.backend import TASK_TYPES, Call, Domain, Task, Tool, ToolFailure
from agentgym.envs.tools.domains.accounts import AccountsDomain

PER_TYPE = 60
WRITE_TYPES = ("single", "multiple", "parallel", "dependent", "clarification")
SCHEMA_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "items",
    "description",
}
ID_PATTERN = re.compile(r"\^([a-z])\[0-9\]\+\$")


@pytest.fixture(scope="module")
def domain() -> AccountsDomain:
    return AccountsDomain()


@pytest.fixture(scope="module")
def state(domain: AccountsDomain) -> dict[str, Any]:
    return domain.build(0)


@pytest.fixture(scope="module")
def tools(domain: AccountsDomain) -> dict[str, Tool]:
    return {t.name: t for t in domain.tools()}


@pytest.fixture(scope="module")
def validators(tools: dict[str, Tool]) -> dict[str, jsonschema.Draft202012Validator]:
    checker = jsonschema.FormatChecker()
    return {
        name: jsonschema.Draft202012Validator(t.parameters, format_checker=checker)
        for name, t in tools.items()
    }


@pytest.fixture(scope="module")
def returns(tools: dict[str, Tool]) -> dict[str, jsonschema.Draft202012Validator]:
    return {name: jsonschema.Draft202012Validator(t.returns) for name, t in tools.items()}


@pytest.fixture(scope="module")
def generated(domain: AccountsDomain, state: dict[str, Any]) -> tuple[list[Task], str]:
    """The tasks for seed 0 and the state's dump taken before generating them."""
    before = json.dumps(state, sort_keys=True)
    return domain.tasks(state, seed=0, per_type=PER_TYPE), before


@pytest.fixture(scope="module")
def tasks(generated: tuple[list[Task], str]) -> list[Task]:
    return generated[0]


@pytest.fixture(scope="module")
def replays(
    domain: AccountsDomain, state: dict[str, Any], tasks: list[Task]
) -> dict[str, list[list[Any]]]:
    """Each task's gold results, turn by turn, from one deep copy of the initial state."""
    out = {}
    for task in tasks:
        work = copy.deepcopy(state)
        out[task.id] = [
            [domain.call(work, c.name, copy.deepcopy(c.arguments)) for c in turn]
            for turn in task.gold_calls
        ]
    return out


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _conflict(domain: Domain, a: Call, b: Call) -> bool:
    """Whether two calls conflict by the tree rule of ``Domain.resources``."""
    (ra, wa), (rb, wb) = (
        domain.resources(a.name, a.arguments),
        domain.resources(b.name, b.arguments),
    )

    def overlap(p: str, q: str) -> bool:
        return p == q or p.startswith(q + "/") or q.startswith(p + "/")

    return any(overlap(w, p) for w in wa for p in rb + wb) or any(
        overlap(w, p) for w in wb for p in ra
    )


# ---------------------------------------------------------------------------------------------
# build


def test_build_is_deterministic_and_json_round_trips(domain: AccountsDomain) -> None:
    a, b = domain.build(3), domain.build(3)
    assert _dump(a) == _dump(b)
    assert _dump(a) != _dump(domain.build(4))
    assert json.loads(json.dumps(a)) == a


def test_build_is_identical_in_another_process(domain: AccountsDomain) -> None:
    code = (
        "import hashlib, json\n"
        "from agentgym.envs.tools.domains.accounts import AccountsDomain\n"
        "s = json.dumps(AccountsDomain().build(11), sort_keys=True)\n"
        "print(hashlib.sha256(s.encode()).hexdigest())\n"
    )
    env = {"PYTHONHASHSEED": "123"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    here = hashlib.sha256(_dump(domain.build(11)).encode()).hexdigest()
    assert out.stdout.strip() == here


def test_build_holds_tens_of_consistent_entities(state: dict[str, Any]) -> None:
    customers, tickets = state["customers"], state["tickets"]
    assert 10 <= len(customers) <= 99 and 10 <= len(tickets) <= 99
    address_ids = [a["address_id"] for c in customers.values() for a in c["addresses"]]
    assert 10 <= len(address_ids) <= 99 and len(set(address_ids)) == len(address_ids)
    assert state["next_address"] > max(int(a[1:]) for a in address_ids)
    assert state["next_ticket"] > max(int(t[1:]) for t in tickets)
    emails = [c["email"] for c in customers.values()]
    assert len(set(emails)) == len(emails)
    for cid, c in customers.items():
        assert c["customer_id"] == cid
        assert c["default_address_id"] in [a["address_id"] for a in c["addresses"]]
        assert c["points"]["balance"] == sum(e["points"] for e in c["points"]["history"]) >= 0
    for t in tickets.values():
        assert t["customer_id"] in customers
        assert (t["status"] == "closed") == (t["closed_on"] is not None)


# ---------------------------------------------------------------------------------------------
# tools


def _keywords(schema: dict[str, Any]) -> set[str]:
    found = set(schema)
    for sub in schema.get("properties", {}).values():
        found |= _keywords(sub)
    if isinstance(schema.get("items"), dict):
        found |= _keywords(schema["items"])
    return found


def test_tools_have_strict_valid_schemas(domain: AccountsDomain) -> None:
    tools = domain.tools()
    assert 8 <= len(tools) <= 14
    assert len({t.name for t in tools}) == len(tools)
    for tool in tools:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", tool.name), tool.name
        params = tool.parameters
        jsonschema.Draft202012Validator.check_schema(params)
        jsonschema.Draft202012Validator.check_schema(tool.returns)
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert params["required"] and set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert "type" in prop and prop["description"]
        assert _keywords(params) <= SCHEMA_KEYWORDS, tool.name
        low, high = (150, 400) if tool.writes else (50, 200)
        assert low <= tool.latency_ms <= high, tool.name
        assert tool.spec()["parameters"] is params
    assert {t.writes for t in tools} == {True, False}


# ---------------------------------------------------------------------------------------------
# tasks


def test_tasks_count_order_and_ids(tasks: list[Task]) -> None:
    assert len(tasks) == PER_TYPE * len(TASK_TYPES)
    assert [t.task_type for t in tasks] == [tt for tt in TASK_TYPES for _ in range(PER_TYPE)]
    assert len({t.id for t in tasks}) == len(tasks)
    assert all(re.fullmatch(r"accounts-[a-z]+-\d{4}", t.id) for t in tasks)
    assert len({t.request for t in tasks}) == len(tasks)


def test_tasks_are_deterministic_and_leave_state_alone(
    domain: AccountsDomain, state: dict[str, Any], generated: tuple[list[Task], str]
) -> None:
    tasks, before = generated
    assert _dump(state) == before
    again = domain.tasks(copy.deepcopy(state), seed=0, per_type=PER_TYPE)
    assert again == tasks
    other = domain.tasks(state, seed=1, per_type=10)
    assert [t.request for t in other] != [t.request for t in tasks if t.id[-4:] < "0010"]
    assert _dump(state) == before


def test_gold_calls_validate_and_replay(
    tasks: list[Task],
    replays: dict[str, list[list[Any]]],
    validators: dict[str, jsonschema.Draft202012Validator],
    returns: dict[str, jsonschema.Draft202012Validator],
) -> None:
    for task in tasks:
        for turn, results in zip(task.gold_calls, replays[task.id], strict=True):
            for call, result in zip(turn, results, strict=True):
                validators[call.name].validate(call.arguments)
                returns[call.name].validate(result)
                assert json.loads(json.dumps(result)) == result


def test_answer_facts_appear_in_gold_results(
    tasks: list[Task], replays: dict[str, list[list[Any]]]
) -> None:
    for task in tasks:
        text = "".join(json.dumps(r) for turn in replays[task.id] for r in turn)
        if task.task_type == "irrelevance":
            assert task.answer_facts == ()
            continue
        assert 1 <= len(task.answer_facts) <= 3, task.id
        for fact in task.answer_facts:
            assert isinstance(fact, str) and fact and fact in text, (task.id, fact)


def test_turn_shapes_per_type(tasks: list[Task]) -> None:
    for task in tasks:
        turns = task.gold_calls
        names = [c.name for turn in turns for c in turn]
        if task.task_type == "irrelevance":
            assert turns == ()
        elif task.task_type in ("single", "clarification"):
            assert len(turns) == 1 and len(turns[0]) == 1
        elif task.task_type == "multiple":
            assert 2 <= len(turns) <= 3 and all(len(t) == 1 for t in turns)
            assert len(set(names)) == len(names), task.id
        elif task.task_type == "parallel":
            assert len(turns) == 1 and 2 <= len(turns[0]) <= 4
        else:
            assert 2 <= len(turns) <= 3 and all(len(t) == 1 for t in turns)


def test_parallel_calls_do_not_conflict(domain: AccountsDomain, tasks: list[Task]) -> None:
    for task in (t for t in tasks if t.task_type == "parallel"):
        calls = task.gold_calls[0]
        for i, a in enumerate(calls):
            for b in calls[i + 1 :]:
                assert not _conflict(domain, a, b), (task.id, a, b)


def test_dependent_calls_use_earlier_results(
    tasks: list[Task], replays: dict[str, list[list[Any]]]
) -> None:
    for task in (t for t in tasks if t.task_type == "dependent"):
        results = replays[task.id]
        for j in range(1, len(task.gold_calls)):
            earlier = "".join(json.dumps(r) for turn in results[:j] for r in turn)
            values = [v for v in task.gold_calls[j][0].arguments.values() if isinstance(v, str)]
            assert any(v not in task.request and v in earlier for v in values), task.id


def test_clarification_hides_one_detail(tasks: list[Task]) -> None:
    for task in (t for t in tasks if t.task_type == "clarification"):
        assert len(task.hidden_facts) == 1, task.id
        arguments = task.gold_calls[0][0].arguments
        for name, value in task.hidden_facts.items():
            assert value not in task.request, task.id
            assert value in task.clarify_reply, task.id
            assert arguments[name] == value, task.id


def test_tasks_mix_reads_and_writes(tasks: list[Task], tools: dict[str, Tool]) -> None:
    used = set()
    for task_type in WRITE_TYPES:
        mine = [t for t in tasks if t.task_type == task_type]
        writes = [
            t for t in mine if any(tools[c.name].writes for turn in t.gold_calls for c in turn)
        ]
        assert len(writes) * 3 >= len(mine), task_type
        assert len(writes) < len(mine), task_type
        used |= {c.name for t in mine for turn in t.gold_calls for c in turn}
    assert used == set(tools)


def test_tasks_scale_beyond_sixty(domain: AccountsDomain) -> None:
    state = domain.build(5)
    tasks = domain.tasks(state, seed=2, per_type=80)
    assert len(tasks) == 80 * len(TASK_TYPES)
    assert len({t.request for t in tasks}) == len(tasks)


def test_irrelevance_requests_are_not_account_tasks(tasks: list[Task]) -> None:
    for task in (t for t in tasks if t.task_type == "irrelevance"):
        words = task.request.lower()
        assert not any(w in words for w in ("ticket", "address", "points", "email", "phone"))


# ---------------------------------------------------------------------------------------------
# calls


def test_writes_change_state_and_reads_do_not(
    domain: AccountsDomain, state: dict[str, Any], tasks: list[Task], tools: dict[str, Tool]
) -> None:
    seen = set()
    for task in tasks:
        work = json.loads(json.dumps(state))
        for turn in task.gold_calls:
            for call in turn:
                before = json.dumps(work)
                domain.call(work, call.name, call.arguments)
                assert (json.dumps(work) != before) == tools[call.name].writes, (task.id, call)
                seen.add(call.name)
    assert seen == set(tools)


def test_results_are_snapshots(domain: AccountsDomain, state: dict[str, Any]) -> None:
    work = copy.deepcopy(state)
    tid = next(t for t, v in work["tickets"].items() if v["status"] == "open")
    seen = domain.call(work, "get_ticket", {"ticket_id": tid})
    frozen = _dump(seen)
    domain.call(work, "add_ticket_comment", {"ticket_id": tid, "text": "More detail here."})
    domain.call(work, "close_ticket", {"ticket_id": tid, "resolution": "resolved"})
    assert _dump(seen) == frozen


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("get_customer", {"customer_id": "c999"}, "customer"),
        ("update_email", {"customer_id": "c999", "email": "x.y@example.com"}, "customer"),
        ("update_phone", {"customer_id": "c999", "phone": "+447700900123"}, "customer"),
        ("list_addresses", {"customer_id": "c999"}, "customer"),
        ("set_default_address", {"customer_id": "c1", "address_id": "a999"}, "address"),
        ("delete_address", {"customer_id": "c1", "address_id": "a999"}, "address"),
        ("get_points_history", {"customer_id": "c0"}, "customer"),
        ("redeem_reward", {"customer_id": "c999", "reward": "free_shipping"}, "customer"),
        (
            "open_ticket",
            {"customer_id": "c999", "category": "billing", "priority": "low", "subject": "Help"},
            "customer",
        ),
        ("get_ticket", {"ticket_id": "t999"}, "ticket"),
        ("list_tickets", {"customer_id": "c999"}, "customer"),
        ("add_ticket_comment", {"ticket_id": "t999", "text": "Hello"}, "ticket"),
        ("close_ticket", {"ticket_id": "t999", "resolution": "resolved"}, "ticket"),
    ],
)
def test_missing_entities_are_not_found(
    domain: AccountsDomain, state: dict[str, Any], name: str, arguments: dict[str, Any], kind: str
) -> None:
    work = copy.deepcopy(state)
    with pytest.raises(ToolFailure) as err:
        domain.call(work, name, arguments)
    assert err.value.code == "not_found" and err.value.kind == kind
    assert _dump(work) == _dump(state)


def test_address_of_another_customer_is_not_found(
    domain: AccountsDomain, state: dict[str, Any]
) -> None:
    other = state["customers"]["c2"]["addresses"][0]["address_id"]
    with pytest.raises(ToolFailure) as err:
        domain.call(
            copy.deepcopy(state), "delete_address", {"customer_id": "c1", "address_id": other}
        )
    assert err.value.code == "not_found" and err.value.key == other


def _fails(domain: Domain, work: dict[str, Any], name: str, arguments: dict[str, Any]) -> str:
    before = _dump(work)
    with pytest.raises(ToolFailure) as err:
        domain.call(work, name, arguments)
    assert err.value.code == "failed_precondition" and err.value.message
    assert _dump(work) == before
    return err.value.message


def test_business_rules_fail_preconditions(domain: AccountsDomain, state: dict[str, Any]) -> None:
    work = copy.deepcopy(state)
    customers = work["customers"]
    closed = next(t for t, v in work["tickets"].items() if v["status"] == "closed")
    assert "already closed" in _fails(
        domain, work, "close_ticket", {"ticket_id": closed, "resolution": "resolved"}
    )
    _fails(domain, work, "add_ticket_comment", {"ticket_id": closed, "text": "Any news?"})

    poor = next(c for c, v in customers.items() if v["points"]["balance"] < 200)
    message = _fails(
        domain, work, "redeem_reward", {"customer_id": poor, "reward": "free_shipping"}
    )
    assert "cheaper" in message
    low = next(c for c, v in customers.items() if v["tier"] in ("bronze", "silver"))
    customers[low]["points"]["balance"] = 10_000
    assert "tier" in _fails(
        domain, work, "redeem_reward", {"customer_id": low, "reward": "lounge_pass"}
    )

    c1 = customers["c1"]
    _fails(domain, work, "update_email", {"customer_id": "c1", "email": c1["email"].upper()})
    _fails(domain, work, "update_phone", {"customer_id": "c1", "phone": c1["phone"]})
    default = c1["default_address_id"]
    _fails(domain, work, "set_default_address", {"customer_id": "c1", "address_id": default})

    address = {"label": "other", "street": "1 Elm Grove", "city": "York", "postcode": "YO1 2AB"}
    while len(c1["addresses"]) < 5:
        domain.call(work, "add_address", {"customer_id": "c1", **address, "country": "GB"})
    _fails(domain, work, "add_address", {"customer_id": "c1", **address, "country": "GB"})
    _fails(domain, work, "delete_address", {"customer_id": "c1", "address_id": default})

    issue = {"customer_id": "c1", "category": "other", "priority": "low", "subject": "Hello"}
    while (
        sum(t["customer_id"] == "c1" and t["status"] == "open" for t in work["tickets"].values())
        < 5
    ):
        domain.call(work, "open_ticket", issue)
    _fails(domain, work, "open_ticket", issue)


def test_only_address_can_be_deleted_and_next_becomes_default(
    domain: AccountsDomain, state: dict[str, Any]
) -> None:
    work = copy.deepcopy(state)
    c = work["customers"]["c1"]
    for a in [a for a in c["addresses"] if a["address_id"] != c["default_address_id"]]:
        domain.call(work, "delete_address", {"customer_id": "c1", "address_id": a["address_id"]})
    last = c["default_address_id"]
    out = domain.call(work, "delete_address", {"customer_id": "c1", "address_id": last})
    assert out["default_address_id"] is None and out["remaining"] == 0
    new = {"label": "home", "street": "5 Canal Walk", "city": "Leeds", "postcode": "LS1 4AB"}
    added = domain.call(work, "add_address", {"customer_id": "c1", **new, "country": "GB"})
    assert added["is_default"] and c["default_address_id"] == added["address_id"]


def test_redeem_records_points_and_ids_count_up(
    domain: AccountsDomain, state: dict[str, Any]
) -> None:
    work = copy.deepcopy(state)
    rich = next(c for c, v in work["customers"].items() if v["points"]["balance"] >= 400)
    balance = work["customers"][rich]["points"]["balance"]
    first = domain.call(work, "redeem_reward", {"customer_id": rich, "reward": "free_shipping"})
    second = domain.call(work, "redeem_reward", {"customer_id": rich, "reward": "free_shipping"})
    assert (first["redemption_id"], second["redemption_id"]) == ("r1", "r2")
    assert second["balance"] == balance - 400
    history = domain.call(work, "get_points_history", {"customer_id": rich, "limit": 2})
    assert history["balance"] == balance - 400
    assert [e["points"] for e in history["entries"]] == [-200, -200]
    oldest = domain.call(work, "get_points_history", {"customer_id": rich, "order": "oldest_first"})
    assert oldest["entries"][0]["reason"] == "welcome bonus"


# ---------------------------------------------------------------------------------------------
# fuzz


def _ids(state: dict[str, Any]) -> dict[str, list[str]]:
    customers = state["customers"]
    return {
        "c": list(customers),
        "t": list(state["tickets"]),
        "a": [a["address_id"] for c in customers.values() for a in c["addresses"]],
    }


def _value(rng: random.Random, name: str, prop: dict[str, Any], ids: dict[str, list[str]]) -> Any:
    """A value valid against ``prop``, often naming an existing entity."""
    if "enum" in prop:
        return rng.choice(prop["enum"])
    if prop["type"] == "boolean":
        return rng.random() < 0.5
    if prop["type"] == "integer":
        return rng.randint(prop.get("minimum", 0), prop.get("maximum", 1000))
    if prop.get("format") == "date":
        day = datetime.date(2022, 1, 1).toordinal() + rng.randrange(1400)
        return datetime.date.fromordinal(day).isoformat()
    match = ID_PATTERN.fullmatch(prop.get("pattern", ""))
    if match:
        prefix = match.group(1)
        if ids[prefix] and rng.random() < 0.75:
            return rng.choice(ids[prefix])
        return f"{prefix}{rng.randint(0, 999)}"
    if name == "email":
        local = rng.choice(["ann", "bo.lee", "x_y"]) + str(rng.randint(0, 99))
        return f"{local}@{rng.choice(['a.io', 'mail.example'])}"
    if name == "phone":
        return "+" + str(rng.randint(1, 9)) + "".join(str(rng.randrange(10)) for _ in range(10))
    if name == "postcode":
        return rng.choice(["LS1 4AB", "69002", "D02 X285", "3511 AB", "10115"])
    words = ["late", "parcel", "refund", "hello", "12 Mill Lane", "Leeds", "x" * 3]
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))


def _arguments(rng: random.Random, tool: Tool, state: dict[str, Any]) -> dict[str, Any]:
    ids = _ids(state)
    params = tool.parameters
    return {
        name: _value(rng, name, prop, ids)
        for name, prop in params["properties"].items()
        if name in params["required"] or rng.random() < 0.5
    }


def test_fuzz_valid_arguments_raise_only_tool_failures(
    domain: AccountsDomain,
    validators: dict[str, jsonschema.Draft202012Validator],
    returns: dict[str, jsonschema.Draft202012Validator],
) -> None:
    rng = random.Random(1234)
    tools = domain.tools()
    succeeded, failed = set(), set()
    state: dict[str, Any] = {}
    for i in range(2000):
        if i % 250 == 0:
            state = domain.build(i)
        tool = rng.choice(tools)
        arguments = _arguments(rng, tool, state)
        validators[tool.name].validate(arguments)
        try:
            result = domain.call(state, tool.name, arguments)
        except ToolFailure as err:
            assert err.code in ("not_found", "failed_precondition") and err.message
            failed.add(err.code)
            continue
        returns[tool.name].validate(result)
        assert json.loads(json.dumps(result)) == result
        succeeded.add(tool.name)
    assert succeeded == {t.name for t in tools}
    assert failed == {"not_found", "failed_precondition"}
    assert json.loads(json.dumps(state)) == state


# ---------------------------------------------------------------------------------------------
# resources


def _call(name: str, **arguments: Any) -> Call:
    return Call(name, arguments)


def test_resources_conflicts(domain: AccountsDomain) -> None:
    assert _conflict(
        domain,
        _call("update_email", customer_id="c1", email="a@b.io"),
        _call("update_phone", customer_id="c1", phone="+447700900123"),
    )
    assert _conflict(
        domain,
        _call("close_ticket", ticket_id="t3", resolution="resolved"),
        _call("add_ticket_comment", ticket_id="t3", text="hi"),
    )
    assert _conflict(
        domain,
        _call("get_customer", customer_id="c1"),
        _call("set_default_address", customer_id="c1", address_id="a2"),
    )
    assert _conflict(
        domain,
        _call("list_tickets", customer_id="c1"),
        _call("close_ticket", ticket_id="t9", resolution="resolved"),
    )
    new = {"label": "home", "street": "1 High Street", "city": "York", "postcode": "YO1 1AA"}
    assert _conflict(
        domain,
        _call("add_address", customer_id="c1", country="GB", **new),
        _call("add_address", customer_id="c2", country="GB", **new),
    )
    assert not _conflict(
        domain, _call("get_customer", customer_id="c1"), _call("get_customer", customer_id="c2")
    )
    assert not _conflict(
        domain, _call("get_ticket", ticket_id="t1"), _call("get_ticket", ticket_id="t2")
    )
    assert not _conflict(
        domain,
        _call("update_email", customer_id="c1", email="a@b.io"),
        _call("update_email", customer_id="c2", email="c@d.io"),
    )
    assert not _conflict(
        domain,
        _call("update_phone", customer_id="c1", phone="+447700900123"),
        _call("list_addresses", customer_id="c1"),
    )


def test_non_conflicting_calls_commute(domain: AccountsDomain) -> None:
    """Calls that resources() lets run concurrently give the same results and final state in
    either order (the truthfulness of the paths)."""
    rng = random.Random(99)
    base = domain.build(7)
    few = {"c1", "c2", "c3"}
    base["customers"] = {c: v for c, v in base["customers"].items() if c in few}
    base["tickets"] = {t: v for t, v in base["tickets"].items() if v["customer_id"] in few}
    tools = domain.tools()

    def run(state: dict[str, Any], call: Call) -> Any:
        try:
            return domain.call(state, call.name, copy.deepcopy(call.arguments))
        except ToolFailure as err:
            return (err.code, err.message)

    checked = 0
    for _ in range(1500):
        a, b = (
            _call(t.name, **_arguments(rng, t, base))
            for t in (rng.choice(tools), rng.choice(tools))
        )
        if _conflict(domain, a, b):
            continue
        one, two = copy.deepcopy(base), copy.deepcopy(base)
        ra1, rb1 = run(one, a), run(one, b)
        rb2, ra2 = run(two, b), run(two, a)
        assert (ra1, rb1) == (ra2, rb2), (a, b)
        assert _dump(one) == _dump(two), (a, b)
        checked += 1
    assert checked > 300
