"""bench tools: the tables' shape on a smoke run (speeds are measured, never asserted)."""

import io

from rich.console import Console

from agentgym.bench import run_bench


def test_quick_run_reports_calls_async_timing_and_bfcl_scoring():
    console = Console(file=io.StringIO(), width=200)
    doc = run_bench("tools", console, quick=True)
    kinds = {r["kind"] for r in doc["rows"]}
    assert kinds == {"calls", "async", "bfcl"}
    calls = [r for r in doc["rows"] if r["kind"] == "calls"]
    assert {r["env_id"] for r in calls} == {
        "agentgym/Tools-Ecommerce-v0",
        "agentgym/Tools-Accounts-v0",
        "agentgym/Tools-Travel-v0",
    }
    assert all(r["calls"] > 0 and r["ms_per_call"] > 0 for r in calls)
    timing = [r for r in doc["rows"] if r["kind"] == "async"]
    # the oracle wins either way, and async never takes longer than sync
    assert all(r["sync_success"] == r["async_success"] == 1.0 for r in timing)
    assert all(r["async_ms"] <= r["sync_ms"] for r in timing)
    # per-turn futures wait for their whole turn: no faster than the episode's critical path
    assert all(r["critical_path_ms"] <= r["sync_ms"] for r in timing)
    assert all(r["speedup"] <= r["bound"] + 1e-3 for r in timing)
    assert doc["goal"]["success_unchanged"] is True
    scoring = [r for r in doc["rows"] if r["kind"] == "bfcl"]
    assert scoring and all(r["gold_scored_correct"] == r["entries"] for r in scoring)
    assert "env ms/call jsonschema-env/ours Tools-Travel-v0" in doc["ratios"]
