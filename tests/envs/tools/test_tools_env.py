"""The mock-API envs: the oracle serves every task type in every domain, sync and async;
asynchronous episodes take the critical path's time and end in the synchronous run's state;
bad calls never raise and come back as structured errors; the success rule's parts."""

import json
import re

import numpy as np
import pytest

import agentgym
from agentgym.core.errors import SnapshotMismatch
from agentgym.envs.tools.backend import TASK_TYPES
from agentgym.envs.tools.grammar import GRAMMAR
from agentgym.envs.tools.scheduler import conflicts

DOMAINS = ("Ecommerce", "Accounts", "Travel")


def make(domain, async_calls=False, **kwargs):
    suffix = "-Async" if async_calls else ""
    return agentgym.make(f"agentgym/Tools-{domain}{suffix}-v0", **kwargs)


def play_oracle(env, task_id):
    _, info = env.reset(options={"task_id": task_id})
    actions, infos = [], [info]
    while True:
        action = env.unwrapped.oracle_action()
        _, reward, term, trunc, info = env.step(action)
        actions.append(action)
        infos.append(info)
        if term or trunc:
            return actions, infos, reward


@pytest.mark.parametrize("async_calls", [False, True])
@pytest.mark.parametrize("domain", DOMAINS)
def test_the_oracle_serves_every_task_of_every_type(domain, async_calls):
    env = make(domain, async_calls, split="test")
    base = env.unwrapped
    types = {base.task_type_of(t) for t in base.task_ids()}
    assert types == set(TASK_TYPES)
    for task_id in base.task_ids():
        _, infos, reward = play_oracle(env, task_id)
        components = infos[-1]["reward_components"]
        assert reward == 1.0 and infos[-1]["won"], (task_id, components)
        assert components["hierr"] == 1.0 and components["tool_exact_match"] == 1.0
        assert infos[-1]["domain"] == domain.lower()
        assert infos[-1]["task_type"] == base.task_type_of(task_id)


def _timeline(env, task_id, async_calls):
    """The episode's virtual time computed from the latency model and the domain's resources
    alone, without the env's scheduler: sync turns wait for each call in turn; async calls
    are issued when their block ends and start when every earlier conflicting call is done."""
    base = env.unwrapped
    model, domain = base.latency, base._world.domain
    tools = {t.name: t for t in domain.tools()}
    env.reset(options={"task_id": task_id})
    now, index, issued = 0.0, 0, []  # issued: (reads, writes, finish)
    while True:
        action = base.oracle_action()
        llm = model.llm_overhead_ms + model.llm_ms_per_char * len(action)
        ends = [m.end() for m in re.finditer(r"</tool_call>", action)]
        calls = [json.loads(b) for b in re.findall(r"<tool_call>(.*?)</tool_call>", action)]
        finishes = []
        wait = 0.0
        for call, end in zip(calls, ends, strict=True):
            index += 1
            latency = model.tool_ms(tools[call["name"]], task_id, index)
            if not async_calls:
                wait += latency
                continue
            reads, writes = domain.resources(call["name"], call["arguments"])
            at = now + model.llm_overhead_ms + model.llm_ms_per_char * end
            start = max([at] + [f for r, w, f in issued if conflicts(r, w, reads, writes)])
            issued.append((reads, writes, start + latency))
            finishes.append(start + latency)
        now = max([now + llm + wait, *finishes])
        _, _, term, trunc, _ = env.step(action)
        if term or trunc:
            return now


@pytest.mark.parametrize("domain", DOMAINS)
def test_async_episodes_take_the_critical_path_and_end_in_the_sync_state(domain):
    sync_env, async_env = make(domain, split="test"), make(domain, True, split="test")
    base = async_env.unwrapped
    faster = 0
    for task_id in base.task_ids():
        if base.task_type_of(task_id) not in ("parallel", "dependent", "multiple"):
            continue
        sync_ms = _timeline(sync_env, task_id, async_calls=False)
        assert sync_env.unwrapped.clock_ms == pytest.approx(sync_ms, abs=1e-2)
        async_ms = _timeline(async_env, task_id, async_calls=True)
        assert base.clock_ms == pytest.approx(async_ms, abs=1e-2)
        assert base._state == sync_env.unwrapped._state  # the same final backend state
        assert async_ms <= sync_ms + 1e-6
        faster += async_ms < sync_ms
    assert faster > 0


@pytest.mark.parametrize("domain", DOMAINS)
def test_thousands_of_bad_calls_never_raise_and_each_names_its_problem(domain):
    env = make(domain)
    base = env.unwrapped
    tools = base._world.domain.tools()
    rng = np.random.default_rng(0)
    junk = [None, -1, 0, 2.5, True, "", "x" * 50, [], {}, {"a": 1}, "2027-02-30", "o99999"]
    env.reset(seed=0)
    codes = set()
    for i in range(3000):
        tool = tools[int(rng.integers(len(tools)))]
        props = list(tool.parameters["properties"])
        arguments = {
            [*props, "bogus"][int(rng.integers(len(props) + 1))]: junk[int(rng.integers(len(junk)))]
            for _ in range(int(rng.integers(0, 4)))
        }
        name = tool.name if rng.random() < 0.9 else tool.name + "_x"
        block = json.dumps({"name": name, "arguments": arguments})
        if rng.random() < 0.05:
            block = block[: int(rng.integers(len(block)))]
        obs, _, term, trunc, info = env.step(f"<tool_call>{block}</tool_call>")
        codes.update(re.findall(r'"error": "([a-z_]+)"', obs))
        if not info["action_valid"]:
            assert re.search(r'"error": "[a-z_]+"', obs), obs
        if term or trunc:
            env.reset(seed=i)
    assert {"unknown_tool", "missing_parameter", "wrong_type", "malformed_call"} <= codes


def test_a_bad_call_changes_nothing_and_a_failing_one_is_invalid():
    env = make("Ecommerce")
    base = env.unwrapped
    env.reset(seed=0)
    before = json.dumps(base._state, sort_keys=True)
    bad = '<tool_call>{"name": "add_to_cart", "arguments": {"user_id": "u1"}}</tool_call>'
    obs, _, _, _, info = env.step(bad)
    assert not info["action_valid"] and '"error": "missing_parameter"' in obs
    missing = '<tool_call>{"name": "get_order", "arguments": {"order_id": "o99999"}}</tool_call>'
    obs, _, _, _, info = env.step(missing)
    assert not info["action_valid"] and '"error": "not_found"' in obs
    assert json.dumps(base._state, sort_keys=True) == before


def _first(env, task_type):
    base = env.unwrapped
    return next(t for t in base.task_ids() if base.task_type_of(t) == task_type)


def test_success_needs_the_question_the_facts_and_no_needless_call():
    env = make("Ecommerce", split="test")
    base = env.unwrapped
    # a clarification task served without asking fails, even with the right calls
    task = base._world.tasks[_first(env, "clarification")]
    env.reset(options={"task_id": task.id})
    for turn in task.gold_calls:
        env.step("".join(f"<tool_call>{json.dumps(c.to_json())}</tool_call>" for c in turn))
    _, reward, term, _, info = env.step(f"<summary>{'; '.join(task.answer_facts)}</summary>")
    assert term and reward == 0.0 and info["reward_components"]["tool_exact_match"] == 1.0
    # an irrelevance task with a call fails
    env.reset(options={"task_id": _first(env, "irrelevance")})
    env.step('<tool_call>{"name": "get_product", "arguments": {"product_id": "p1"}}</tool_call>')
    _, reward, _, _, info = env.step("<summary>No tool can help.</summary>")
    assert reward == 0.0 and info["reward_components"]["tool_name_f1"] == 0.0
    # a summary that leaves out a fact the results showed: failure and the omission flag
    task = base._world.tasks[_first(env, "single")]
    env.reset(options={"task_id": task.id})
    env.step(base.oracle_action())
    _, reward, _, _, info = env.step("<summary>All done.</summary>")
    assert reward == 0.0 and info["reward_components"]["omission"] == 1.0
    assert info["reward_components"]["hierr"] == 1.0  # the calls themselves were right


def test_an_async_snapshot_mid_episode_continues_exactly():
    env = make("Travel", True, split="test")
    task_id = _first(env, "dependent")
    env.reset(options={"task_id": task_id})
    env.step(env.unwrapped.oracle_action())
    snap = env.unwrapped.snapshot()
    other = make("Travel", True, split="test")
    other.reset(seed=0)
    other.unwrapped.restore(snap)
    for e in (env, other):
        out = []
        while True:
            obs, r, term, trunc, info = e.step(e.unwrapped.oracle_action())
            out.append((obs, r, info["state_key"], e.unwrapped.clock_ms))
            if term or trunc:
                break
        e.result = out
    assert env.result == other.result and env.result[-1][1] == 1.0


def test_the_first_observation_shows_every_schema_and_info_the_parsed_calls():
    env = make("Accounts")
    obs, _ = env.reset(seed=3)
    for tool in env.unwrapped._world.domain.tools():
        assert json.dumps(tool.spec()) in obs
    action = '<think>look</think><tool_call>{"name": "x", "arguments": {}}</tool_call>'
    _, _, _, _, info = env.step(action)
    assert info["tool_calls"] == [{"name": "x", "arguments": {}}]
    assert [action[s["start"] : s["end"]][:7] for s in info["segments"]] == ["<think>", "<tool_c"]


@pytest.mark.parametrize("env_id", ["agentgym/Tools-Travel-v1", "agentgym/Tools-Mixed-v1"])
def test_without_schemas_the_episode_is_the_same_but_the_first_observation_names_the_tools(
    env_id,
):
    full, short = agentgym.make(env_id), agentgym.make(env_id, schemas=False)
    for seed in range(6):
        a, info_a = full.reset(seed=seed)
        b, info_b = short.reset(seed=seed)
        assert info_a["task_id"] == info_b["task_id"] and "JSON Schema" not in b
        request = a.splitlines()[0]
        assert b.startswith(request + "\nTools: ") and len(b) < len(a) / 3
        while True:
            action = full.unwrapped.oracle_action()
            a, r_a, term, trunc, _ = full.step(action)
            b, r_b, *_ = short.step(action)
            assert (a, r_a) == (b, r_b)  # only the first observation differs
            if term or trunc:
                break


def _invalid_then_oracle(env):
    """The observations of a reset, two invalid actions and one oracle action."""
    obs, _ = env.reset(seed=1)
    observations = [obs]
    for action in ("<summary>", "I will book the flight now.", env.unwrapped.oracle_action):
        obs, _, _, _, info = env.step(action() if callable(action) else action)
        assert info["action_valid"] is (callable(action))
        observations.append(obs)
    return observations


def test_v0_repeats_the_grammar_after_an_invalid_actions_reason():
    first, summary, text, valid = _invalid_then_oracle(make("Travel"))
    assert first.endswith(f"Turn 1 of 10. {GRAMMAR}")
    # v0's text is kept byte for byte: the reason, the grammar, then the turn line's grammar
    assert f"Invalid action: <summary> is never closed. {GRAMMAR}" in summary.splitlines()
    assert summary.count(GRAMMAR) == 2 and summary.endswith(f"Turn 2 of 10. {GRAMMAR}")
    reason = "Invalid action: text outside the tags: 'I will book the flight now.'."
    assert f"{reason} {GRAMMAR}" in text.splitlines() and text.count(GRAMMAR) == 2
    assert valid.count(GRAMMAR) == 1 and valid.endswith(f"Turn 4 of 10. {GRAMMAR}")


@pytest.mark.parametrize("suffix", ["", "-Async"])
def test_v1_states_the_grammar_once_per_observation_and_on_every_turn(suffix):
    env = agentgym.make(f"agentgym/Tools-Travel{suffix}-v1")
    first, summary, text, valid = _invalid_then_oracle(env)
    assert first.endswith(f"Turn 1 of 10. {GRAMMAR}")
    lines = summary.splitlines()
    assert "Invalid action: <summary> is never closed." in lines
    assert summary.count(GRAMMAR) == 1 and lines[-1] == f"Turn 2 of 10. {GRAMMAR}"
    assert "Invalid action: text outside the tags: 'I will book the flight now.'." in text
    assert text.count(GRAMMAR) == 1 and text.endswith(f"Turn 3 of 10. {GRAMMAR}")
    assert valid.count(GRAMMAR) == 1 and valid.endswith(f"Turn 4 of 10. {GRAMMAR}")


def test_v1_differs_from_v0_only_in_the_reasons_of_invalid_actions():
    old = _invalid_then_oracle(make("Travel"))
    new = _invalid_then_oracle(agentgym.make("agentgym/Tools-Travel-v1"))
    assert [o.replace(f". {GRAMMAR}\n", ".\n") for o in old] == new
    assert old[0] == new[0] and old[3] == new[3] and old[1] != new[1]


def test_v0_and_v1_snapshots_do_not_restore_into_each_other():
    env = make("Travel")
    env.reset(seed=1)
    other = agentgym.make("agentgym/Tools-Travel-v1")
    with pytest.raises(SnapshotMismatch, match="cannot restore"):
        other.unwrapped.restore(env.unwrapped.snapshot())


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_incremental_state_key_equals_a_full_recomputation(domain):
    from agentgym.envs.tools.env import StateDigest

    env = make(domain)
    base = env.unwrapped
    tools = base._world.domain.tools()
    rng = np.random.default_rng(1)
    for task_id in base.task_ids()[::7]:
        env.reset(options={"task_id": task_id})
        task = base._world.tasks[task_id]
        calls = [c.to_json() for turn in task.gold_calls for c in turn]
        for _ in range(4):  # gold calls of other tasks: writes on other entities
            other = base._world.tasks[base.task_ids()[int(rng.integers(len(base.task_ids())))]]
            calls += [c.to_json() for turn in other.gold_calls for c in turn]
        for call in calls:
            env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
            if base.done:
                break
            assert base._digest.hexdigest(base._state) == StateDigest().hexdigest(base._state)
    assert any(t.writes for t in tools)


def _entities(state):
    """Every ``top/key`` entity path (or ``top`` for a scalar) with its JSON."""
    out = {}
    for top, value in state.items():
        if isinstance(value, dict):
            out.update({f"{top}/{k}": json.dumps(v, sort_keys=True) for k, v in value.items()})
        else:
            out[top] = json.dumps(value)
    return out


def _above_or_below(a, b):
    return a.startswith(b + "/") or b.startswith(a + "/")


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_write_changes_only_what_the_domain_says_it_changes(domain):
    """``Domain.changes`` (the state digest's invalidation, by entity) covers every entity a
    successful write creates, edits or removes; top-level scalars (id counters) are always
    re-read."""
    import copy

    from agentgym.envs.tools.backend import ToolFailure

    world = make(domain).unwrapped._world
    writes = {t.name for t in world.domain.tools() if t.writes}
    state = json.loads(world.state_json)
    checked = 0
    for task in world.tasks.values():
        for call in (c for turn in task.gold_calls for c in turn):
            if call.name not in writes:
                continue
            named = world.domain.changes(state, call.name, call.arguments)
            before = _entities(state)
            try:
                world.domain.call(state, call.name, copy.deepcopy(call.arguments))
            except ToolFailure:  # another task's call on a state it was not drawn for
                assert _entities(state) == before
                continue
            after = _entities(state)
            changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
            covered = {
                p
                for p in changed
                if "/" not in p or any(n == p or _above_or_below(n, p) for n in named)
            }
            assert changed == covered, (call.name, sorted(changed - covered), named)
            checked += 1
    assert checked > 50
