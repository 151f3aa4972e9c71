"""bench leaderboard: its rows' shape on a smoke run (speeds are measured, never asserted)."""

import io

from rich.console import Console

from agentgym.leaderboard import bench


def test_quick_run_gives_each_measure_its_median_and_range_on_both_clocks():
    doc = bench.run(Console(file=io.StringIO(), width=200), quick=True, render=None)
    for row in doc["rows"]:
        assert row["runs"] == 2
        for key in ("ms", "cpu_ms"):
            lo, hi = row[f"{key}_range"]
            assert lo <= row[key] <= hi
    assert set(doc["ratios"]) == {
        "submit / json.loads",
        "submit / json.loads (CPU)",
        "storage / raw blob insert",
        "storage / raw blob insert (CPU)",
    }


def test_what_a_side_sets_up_is_closed_after_its_timed_call():
    events: list[str] = []

    class Connection:
        def close(self):
            events.append("close")

    timed = bench._alternated(
        {"insert": (lambda conn: events.append("insert"), Connection)}, repeats=2
    )
    assert len(timed.samples["insert"]) == 2
    assert events == ["insert", "close"] * 3  # the warm-up round and two timed ones
