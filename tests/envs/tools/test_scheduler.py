"""The asynchronous scheduler: conflicting calls run in issue order, the rest concurrently,
and the makespan is the longest path through the conflict graph."""

import numpy as np

from agentgym.envs.tools.scheduler import LatencyModel, Scheduler, conflicts


def test_writes_conflict_with_what_lies_above_or_below_them_and_reads_never_with_reads():
    assert conflicts([], ["carts/u1"], [], ["carts/u1"])
    assert conflicts([], ["carts"], ["carts/u1"], [])
    assert conflicts(["carts/u1/items"], [], [], ["carts/u1"])
    assert not conflicts(["carts/u1"], [], ["carts/u1"], [])
    assert not conflicts([], ["carts/u1"], [], ["carts/u10"])  # a prefix that is not a parent
    assert not conflicts(["products/p1"], [], [], ["carts/u1"])


def _longest_path(calls):
    """Finish times by dynamic programming over explicit conflict edges (earlier -> later)."""
    finish = []
    for j, (reads, writes, latency) in enumerate(calls):
        before = [finish[i] for i in range(j) if conflicts(calls[i][0], calls[i][1], reads, writes)]
        finish.append(max([0.0, *before]) + latency)
    return max(finish)


def test_the_makespan_of_calls_issued_together_is_the_conflict_graphs_longest_path():
    rng = np.random.default_rng(0)
    paths = ["a", "a/1", "a/2", "b", "b/1", "c"]
    for _ in range(200):
        calls = []
        for _ in range(int(rng.integers(1, 8))):
            picked = [paths[int(i)] for i in rng.integers(len(paths), size=2)]
            write = bool(rng.random() < 0.5)
            reads, writes = ([], picked[:1]) if write else (picked, [])
            calls.append((reads, writes, float(rng.integers(10, 500))))
        scheduler = Scheduler()
        for reads, writes, latency in calls:
            scheduler.submit("tool", reads, writes, latency, result={})
        done = scheduler.collect(wait="all")
        assert len(done) == len(calls)
        assert scheduler.now == _longest_path(calls)


def test_results_are_delivered_when_ready_in_finish_order():
    scheduler = Scheduler()
    slow = scheduler.submit("slow", ["x"], [], 300.0, result=1)
    fast = scheduler.submit("fast", ["y"], [], 100.0, result=2)
    assert scheduler.collect() == []  # nothing has finished at time 0
    assert [f.id for f in scheduler.collect(wait="any")] == [fast.id]
    assert scheduler.now == 100.0
    scheduler.advance(250.0)
    assert [f.id for f in scheduler.collect()] == [slow.id]
    assert scheduler.pending() == []


def test_state_round_trips_and_latencies_are_a_function_of_seed_and_index():
    scheduler = Scheduler()
    scheduler.submit("t", [], ["a"], 120.0, result={"ok": True})
    scheduler.collect(wait="all")
    scheduler.submit("t", ["a"], [], 80.0, result=[1])
    again = Scheduler.from_state(scheduler.state())
    assert again.state() == scheduler.state()
    model = LatencyModel(seed=3)
    assert model.call_ms(100.0, 5) == LatencyModel(seed=3).call_ms(100.0, 5)
    assert model.call_ms(100.0, 5) != model.call_ms(100.0, 6)
    draws = [model.call_ms(100.0, i) for i in range(2000)]
    assert 95.0 < np.mean(draws) < 105.0  # the mean latency is the tool's mean
