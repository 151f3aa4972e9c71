import pytest

from agentgym.core.timing import Sample, Stopwatch, alternate


def test_alternate_reverses_the_order_every_other_round_and_drops_warmup():
    calls: list[str] = []
    timed = alternate({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3, 1)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert [len(timed.samples[s]) for s in "ab"] == [3, 3]
    assert [len(timed.results[s]) for s in "ab"] == [3, 3]


def test_ratio_median_and_spread_read_the_samples():
    timed = alternate({"x": lambda: None}, 1, 0)
    timed.samples = {
        "slow": [Sample(4.0, 2.0), Sample(6.0, 3.0), Sample(5.0, 9.0)],
        "fast": [Sample(1.0, 1.0), Sample(3.0, 1.0), Sample(2.0, 1.0)],
    }
    assert timed.median("slow") == 5.0 and timed.median("slow", "cpu") == 3.0
    assert timed.spread("fast") == (1.0, 3.0)
    assert timed.ratio("slow", "fast") == 2.5
    assert timed.ratio("slow", "fast", clock="cpu") == 3.0
    row = timed.summary(per=2.0, unit="ms")["slow"]
    assert row["wall_ms"] == 2500.0 and row["cpu_max_ms"] == 4500.0 and row["runs"] == 3.0


def test_cpu_clock_counts_work_not_sleep():
    import time

    timed = alternate({"sleep": lambda: time.sleep(0.05)}, 1, 0)
    sample = timed.samples["sleep"][0]
    assert sample.wall_s >= 0.05 > sample.cpu_s


@pytest.mark.parametrize("repeats, warmup", [(0, 1), (2, -1)])
def test_bad_counts_are_refused(repeats, warmup):
    with pytest.raises(ValueError):
        alternate({"a": lambda: None}, repeats, warmup)


def test_a_side_that_times_itself_is_recorded_by_its_own_sample():
    import time

    def side():
        time.sleep(0.03)  # set-up, not timed
        watch = Stopwatch()
        with watch:
            sum(range(1000))
        return watch.sample

    timed = alternate({"self": side}, 2, 0)
    assert all(s.wall_s < 0.03 for s in timed.samples["self"])
    assert timed.results["self"] == timed.samples["self"]


def test_ratio_range_spans_the_rounds_and_holds_the_ratio_of_medians():
    timed = alternate({"x": lambda: None}, 1, 0)
    timed.samples = {
        "ours": [Sample(1.1, 1.0), Sample(3.0, 1.2), Sample(1.0, 1.1)],
        "peer": [Sample(1.0, 1.0), Sample(1.0, 1.0), Sample(2.0, 1.0)],
    }
    lo, hi = timed.ratio_range("ours", "peer")
    assert (lo, hi) == (0.5, 3.0)
    assert lo <= timed.ratio("ours", "peer") <= hi
    assert timed.ratio_range("ours", "peer", clock="cpu") == (1.0, 1.2)


@pytest.mark.parametrize("collect", [True, False])
def test_garbage_is_collected_before_every_call_unless_told_not_to(collect):
    import gc

    events: list[str] = []

    def on_gc(phase, info):
        if phase == "start" and info["generation"] == 2:
            events.append("gc")

    gc.callbacks.append(on_gc)
    try:
        sides = {"a": lambda: events.append("a"), "b": lambda: events.append("b")}
        alternate(sides, 2, 0, collect=collect)
    finally:
        gc.callbacks.remove(on_gc)
    calls = [e for e in events if e != "gc"]
    assert calls == ["a", "b", "b", "a"]
    if collect:  # a full collection right before each call
        assert all(events[i - 1] == "gc" for i, e in enumerate(events) if e != "gc")
    else:  # the calls follow each other with no full collection between them
        assert events == calls


def test_summed_adds_the_parts_run_by_run():
    from agentgym.core.timing import Alternated, summed

    one = Alternated(
        {"a": [Sample(1.0, 0.5), Sample(2.0, 1.0)], "b": [Sample(3.0, 3.0), Sample(4.0, 4.0)]},
        {"a": ["a0", "a1"], "b": ["b0", "b1"]},
    )
    two = Alternated(
        {"a": [Sample(10.0, 5.0), Sample(20.0, 10.0)], "b": [Sample(1.0, 1.0), Sample(1.0, 1.0)]},
        {"a": ["A0", "A1"], "b": ["B0", "B1"]},
    )
    total = summed([one, two])
    assert total.samples["a"] == [Sample(11.0, 5.5), Sample(22.0, 11.0)]
    assert total.samples["b"] == [Sample(4.0, 4.0), Sample(5.0, 5.0)]
    assert total.results["a"] == [["a0", "A0"], ["a1", "A1"]]
    assert total.median("a") == 16.5


def test_summed_refuses_parts_that_do_not_line_up():
    from agentgym.core.timing import summed

    with pytest.raises(ValueError):
        summed([])
    with pytest.raises(ValueError):
        summed([alternate({"a": lambda: None}, 2, 0), alternate({"a": lambda: None}, 3, 0)])
    with pytest.raises(ValueError):
        summed([alternate({"a": lambda: None}, 1, 0), alternate({"b": lambda: None}, 1, 0)])


def test_interleave_alternates_call_by_call_and_lets_a_longer_side_go_on_alone():
    from agentgym.core.timing import interleave

    order: list[str] = []

    def call(name, i):
        return lambda: order.append(f"{name}{i}") or i

    calls = {"a": [call("a", i) for i in range(3)], "b": [call("b", i) for i in range(2)]}
    out = interleave(calls, warmup=1)
    assert order == ["a0", "b0", "a0", "b0", "b1", "a1", "a2"]  # warm-ups, then pairs
    assert out["a"][0] == [0, 1, 2] and out["b"][0] == [0, 1]
    assert all(isinstance(s, Sample) for s in out["a"][1]) and len(out["b"][1]) == 2
