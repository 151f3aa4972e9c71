"""bench text: the tables' shape on a smoke run (speeds are measured, never asserted)."""

import io

from rich.console import Console

from agentgym.bench import run_bench


def test_quick_run_compares_both_engines_with_their_stock_envs():
    console = Console(file=io.StringIO(), width=200)
    doc = run_bench("text", console, quick=True)
    assert [r["env"] for r in doc["alfworld"]] == ["ALFWorld-Small", "ALFWorld-Standard"]
    assert [r["env"] for r in doc["textworld"]] == ["TextWorld-Small", "TextWorld-Medium"]
    # both sides played the same commands and every observation agreed with AlfredTWEnv's
    assert all(r["agreement"] == 1.0 and r["steps"] > 0 for r in doc["alfworld"])
    assert all(r["env_steps_per_s"] > 0 and r["peer_steps_per_s"] > 0 for r in doc["textworld"])
    for r in doc["textworld"]:  # alternating repeated runs, both clocks, per side
        timing = r["timing_ms_per_step"]
        assert set(timing) == {"ours", "textworld.gym"}
        assert all(t["runs"] == r["repeats"] >= 2 and t["cpu_ms"] > 0 for t in timing.values())
        for key, span in (("overhead", "overhead_range"), ("overhead_cpu", "overhead_cpu_range")):
            lo, hi = r[span]
            assert lo - 1e-4 <= r[key] <= hi + 1e-4  # medians lie within the rounds
    for r in doc["alfworld"]:  # engine, env and the stock env in the same rounds
        timing = r["timing_ms_per_step"]
        assert set(timing) == {"engine", "env", "AlfredTWEnv"}
        assert all(t["runs"] == r["repeats"] >= 2 and t["cpu_ms"] > 0 for t in timing.values())
        for key in ("ratio", "ratio_cpu"):
            lo, hi = r[f"{key}_range"]
            assert lo - 1e-3 <= r[key] <= hi + 1e-3
    assert {r["env"] for r in doc["generation"]} == {
        "ALFWorld-Small",
        "ALFWorld-Standard",
        "TextWorld-Small",
        "TextWorld-Medium",
    }
    assert set(doc["ratios"]) == {
        "ALFWorld-Small_vs_AlfredTWEnv",
        "ALFWorld-Standard_vs_AlfredTWEnv",
        "TextWorld-Small_vs_textworld.gym",
        "TextWorld-Medium_vs_textworld.gym",
    }
    assert "ALFWorld against AlfredTWEnv" in console.file.getvalue()
