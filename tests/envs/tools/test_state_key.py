"""The tool env's state key and progress, kept up to date call by call, equal their
from-scratch computation on oracle and random episodes, after a restore too; the key is a
function of the state alone (any process, any order that reaches it)."""

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import agentgym
from agentgym.envs.tools.digest import StateDigest, seen_sum, state_key
from agentgym.envs.tools.rewards import canonical

DOMAINS = ("Ecommerce", "Accounts", "Travel")


def make(domain, async_calls=False, **kwargs):
    suffix = "-Async" if async_calls else ""
    return agentgym.make(f"agentgym/Tools-{domain}{suffix}-v0", **kwargs)


def scratch_key(base):
    """The state key recomputed from the whole state, nothing cached."""
    ep = base._ep
    digest = StateDigest().hexdigest(base._state)
    return state_key(base.task.id, digest, seen_sum(ep.seen), ep.asked, ep.summary is not None)


def scratch_progress(base):
    gold = Counter(canonical(c.to_json()) for turn in base.task.gold_calls for c in turn)
    made = Counter(canonical(c) for turn in base._ep.calls for c in turn)
    return sum((made & gold).values()) / sum(gold.values()) if gold else 0.0


def check(base, info):
    assert info["state_key"] == scratch_key(base)
    assert info["progress"] == pytest.approx(scratch_progress(base))


@pytest.mark.parametrize("async_calls", [False, True])
@pytest.mark.parametrize("domain", DOMAINS)
def test_oracle_episodes_keep_the_key_equal_to_its_recomputation(domain, async_calls):
    env = make(domain, async_calls, split="test")
    base = env.unwrapped
    for task_id in base.task_ids():
        _, info = env.reset(options={"task_id": task_id})
        check(base, info)
        while not base.done:
            *_, info = env.step(base.oracle_action())
            check(base, info)
        assert info["progress"] == (1.0 if base.task.gold_calls else 0.0)


def _random_action(base, rng):
    """A gold call of any task (writes on many entities), a bad call, a question, noise."""
    world = base._world
    tasks = list(world.tasks.values())
    roll = rng.random()
    if roll < 0.7:
        task = tasks[int(rng.integers(len(tasks)))]
        calls = [c.to_json() for turn in task.gold_calls for c in turn] or [{"name": "x"}]
        picked = [calls[int(i)] for i in rng.integers(len(calls), size=int(rng.integers(1, 3)))]
        return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in picked)
    if roll < 0.8:
        return '<tool_call>{"name": "get_order", "arguments": {"order_id": 3}}</tool_call>'
    if roll < 0.9:
        return "<ask>Which one?</ask>"
    return "just text"


@pytest.mark.parametrize("domain", DOMAINS)
def test_random_episodes_and_restores_keep_the_key_equal_to_its_recomputation(domain):
    env, other = make(domain), make(domain)
    base, twin = env.unwrapped, other.unwrapped
    rng = np.random.default_rng(7)
    for episode in range(12):
        _, info = env.reset(seed=episode)
        check(base, info)
        for _ in range(8):
            *_, info = env.step(_random_action(base, rng))
            check(base, info)
            if base.done:
                break
            # a restored twin hashes its state afresh, then follows the same calls
            other.reset(seed=episode + 100)
            twin.restore(base.snapshot())
            action = _random_action(base, rng)
            obs, *_, mine = env.step(action)
            twin_obs, *_, theirs = other.step(action)
            assert obs == twin_obs  # results render alike (entities keep their key order)
            assert mine["state_key"] == theirs["state_key"] == scratch_key(twin)
            assert mine["progress"] == theirs["progress"]
            check(base, mine)
            if base.done:
                break


def test_the_same_state_reached_in_either_order_has_the_same_key_and_others_differ():
    env = make("Accounts")
    base = env.unwrapped
    writes = [
        '{"name": "update_email", "arguments": {"customer_id": "c1", "email": "a@b.io"}}',
        '{"name": "update_phone", "arguments": {"customer_id": "c2", "phone": "+15551234567"}}',
    ]
    keys = []
    for order in (writes, writes[::-1]):
        env.reset(options={"task_id": base.task_ids()[0]})
        for call in order:
            *_, info = env.step(f"<tool_call>{call}</tool_call>")
            assert info["action_valid"], info
        keys.append(info["state_key"])
    assert keys[0] == keys[1]
    env.reset(options={"task_id": base.task_ids()[0]})
    *_, info = env.step(f"<tool_call>{writes[0]}</tool_call>")
    assert info["state_key"] not in keys  # one write fewer: another state


_KEYS_SCRIPT = """
import json, agentgym
env = agentgym.make("agentgym/Tools-Ecommerce-v0", split="test")
base = env.unwrapped
keys = []
for task_id in base.task_ids()[::5]:
    _, info = env.reset(options={"task_id": task_id})
    keys.append(info["state_key"])
    while not base.done:
        keys.append(env.step(base.oracle_action())[-1]["state_key"])
print(json.dumps(keys))
"""


def test_the_key_is_the_same_in_another_process():
    environ = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run(
        [sys.executable, "-c", _KEYS_SCRIPT], capture_output=True, text=True, env=environ
    )
    assert out.returncode == 0, out.stderr
    env = make("Ecommerce", split="test")
    base = env.unwrapped
    keys = []
    for task_id in base.task_ids()[::5]:
        _, info = env.reset(options={"task_id": task_id})
        keys.append(info["state_key"])
        while not base.done:
            keys.append(env.step(base.oracle_action())[-1]["state_key"])
    assert json.loads(out.stdout) == keys
    assert len(set(keys)) > len(keys) // 2  # steps move the state
