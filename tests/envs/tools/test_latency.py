"""The latency model (seeded, heavy-tailed, per tool kind), cross-turn futures and the real
clock: same seed, same latencies and transcript; a dependent call never completes before what
it depends on; an earlier independent call's latency is hidden; real mode really sleeps."""

import itertools
import subprocess
import sys
import time

import numpy as np

import agentgym
from agentgym.envs.tools.backend import Tool
from agentgym.envs.tools.latency import LatencyModel, kind_of


def _tool(name, writes=False, mean=100.0):
    return Tool(name, "", {"type": "object", "properties": {}}, {}, writes=writes, latency_ms=mean)


def test_latencies_are_seeded_per_task_and_call_with_the_tools_mean_and_a_heavy_tail():
    model = LatencyModel(seed=3)
    write = _tool("book", writes=True)
    assert model.tool_ms(write, "t1", 4) == LatencyModel(seed=3).tool_ms(write, "t1", 4)
    assert model.tool_ms(write, "t1", 4) != model.tool_ms(write, "t2", 4)
    draws = np.array([model.tool_ms(write, "t", i) for i in range(20000)])
    assert 95.0 < draws.mean() < 105.0  # the mean is the tool's
    assert np.percentile(draws, 99) > 3 * np.median(draws)  # the tail
    assert kind_of(write) == "write" and kind_of(_tool("search_x")) == "search"
    script = (
        "from agentgym.envs.tools.latency import LatencyModel\n"
        "from agentgym.envs.tools.backend import Tool\n"
        "t = Tool('book', '', {}, {}, writes=True, latency_ms=100.0)\n"
        "print(repr([LatencyModel(seed=3).tool_ms(t, 't', i) for i in range(50)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == repr([model.tool_ms(write, "t", i) for i in range(50)])


def _play(env_id, task_id, **kwargs):
    env = agentgym.make(env_id, split="test", **kwargs)
    base = env.unwrapped
    obs, _ = env.reset(options={"task_id": task_id})
    out = [obs]
    while not base.done:
        obs, *_ = env.step(base.oracle_action())
        out.append(obs)
    return out, base


def _first(base, task_type):
    return next(t for t in base.task_ids() if base.task_type_of(t) == task_type)


def test_the_same_seed_gives_the_same_transcript_and_clock():
    base = agentgym.make("agentgym/Tools-Travel-Async-v2", split="test").unwrapped
    task_id = _first(base, "multiple")
    first, a = _play("agentgym/Tools-Travel-Async-v2", task_id)
    again, b = _play("agentgym/Tools-Travel-Async-v2", task_id)
    assert first == again and a.clock_ms == b.clock_ms


def test_a_dependent_call_never_starts_before_what_it_depends_on_finishes():
    for domain in ("Ecommerce", "Accounts", "Travel"):
        env_id = f"agentgym/Tools-{domain}-Async-v2"
        base = agentgym.make(env_id, split="test").unwrapped
        for task_id in [t for t in base.task_ids() if base.task_type_of(t) == "dependent"]:
            _, played = _play(env_id, task_id)
            futures = played._time.scheduler.futures  # one per gold turn, each using the last
            assert len(futures) == len(played.task.gold_calls) > 1
            for earlier, later in itertools.pairwise(futures):
                assert later.issued >= earlier.finish and later.finish > earlier.finish


def test_across_turns_an_earlier_independent_calls_latency_is_hidden():
    base = agentgym.make("agentgym/Tools-Ecommerce-v0").unwrapped
    slow = '{"name": "search_products", "arguments": {"query": "lamp"}}'
    other = '{"name": "get_shipping_options", "arguments": {"user_id": "u1"}}'
    clocks = {}
    for env_id in ("agentgym/Tools-Ecommerce-v0", "agentgym/Tools-Ecommerce-Async-v2"):
        env = agentgym.make(env_id, tool_latency_scale=10.0)
        env.reset(options={"task_id": base.task_ids()[0]})
        obs1, *_ = env.step(f"<tool_call>{slow}</tool_call>")
        env.step(f"<tool_call>{other}</tool_call>")
        env.step("<summary>done</summary>")
        clocks[env_id] = env.unwrapped.clock_ms
    assert "issued as future f1" in obs1 and "Future f1" not in obs1  # still running
    assert clocks["agentgym/Tools-Ecommerce-Async-v2"] < clocks["agentgym/Tools-Ecommerce-v0"]


def test_the_real_clock_really_sleeps_and_keeps_the_transcript():
    base = agentgym.make("agentgym/Tools-Ecommerce-v0", split="test").unwrapped
    task_id = _first(base, "parallel")
    virtual, v = _play("agentgym/Tools-Ecommerce-Async-v2", task_id)
    start = time.perf_counter()
    real, r = _play("agentgym/Tools-Ecommerce-Async-v2", task_id, clock="real", clock_scale=0.01)
    elapsed = time.perf_counter() - start
    assert real == virtual and r.clock_ms == v.clock_ms
    assert elapsed >= r.clock_ms * 0.01 / 1e3  # every virtual ms slept 0.01 ms for real
