"""The MiniWoB++ bench on tiny settings: its rows' structure (needs headless Chromium)."""

import json
import math
from pathlib import Path

import pytest

from agentgym.envs.web.miniwob.bench import GOAL_STEP_RATIO, bench_miniwob

pytestmark = pytest.mark.browser


def test_bench_rows_are_json_with_both_sides_and_success_rates():
    missing = [p for p in ("/usr/bin/chromium", "/usr/bin/chromedriver") if not Path(p).exists()]
    if missing:
        pytest.fail(f"headless Chromium is needed ({', '.join(missing)} missing)", pytrace=False)
    out = bench_miniwob(["click-button", "choose-date-easy"], steps=2, seeds=1, repeats=1)
    assert json.loads(json.dumps(out)) == out
    first, second = out["rows"]
    assert first["task"] == "click-button" and first["env"] == "agentgym/MiniWoB-ClickButton-v0"
    assert first["steps"] == 2 and first["episodes"] == 2  # click-button ends in one step
    assert set(first["step_ms"]) == {"agentgym", "miniwob", "miniwob_noshot"}
    assert all(v > 0 for v in first["step_ms"].values())
    assert set(first["reset_ms"]) == {"agentgym", "miniwob"}
    assert first["oracle_success"] == 1.0 and 0.0 <= first["random_success"] <= 1.0
    assert second["oracle_success"] is None  # no oracle: random clicks were timed instead
    assert second["steps"] == 2 and 1 <= second["episodes"] <= 2
    assert set(out["ratios"]) == {"miniwob_step_vs_miniwob_noshot", "miniwob_step_vs_miniwob"}
    assert all(math.isfinite(r) and r > 0 for r in out["ratios"].values())
    assert out["goal"]["step_ratio_at_most"] == GOAL_STEP_RATIO
