"""A statistic added to the harness's table reaches every reader with no other change."""

import copy

import numpy as np
import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from agentgym.harness import results, stats
from agentgym.harness.evaluate import evaluate
from agentgym.harness.report import print_report
from agentgym.leaderboard import validate
from agentgym.leaderboard.server import create_app
from agentgym.leaderboard.store import Leaderboard
from agentgym.leaderboard.validate import BadSubmission, check_submission

MENU = "agentgym/Search-Menu-Small-v0"


def _median(scores: np.ndarray) -> float:
    return float(np.median(scores))


def _clear_caches() -> None:
    results._schema.cache_clear()
    validate._validator.cache_clear()


@pytest.fixture
def with_median(monkeypatch):
    """``median`` appended to the statistics, as one new entry of the table would add it."""
    median = stats.Statistic("median", "median", _median)
    monkeypatch.setattr(stats, "STATISTICS", (*stats.STATISTICS, median))
    _clear_caches()
    yield
    monkeypatch.undo()
    _clear_caches()


def test_a_new_statistic_reaches_report_schema_checks_store_and_page(with_median, tmp_path):
    doc = evaluate("random", [MENU], seeds=6, root_seed=4, out=tmp_path / "r.json")
    summary = doc["aggregates"][MENU]
    assert list(summary) == [
        *("n", "mean", "iqm", "median", "ci_low", "ci_high", "ci_method", "by_task_type")
    ]
    assert summary["median"] == _median(stats.run_scores(doc["episodes"], MENU))

    console = Console(record=True, width=200)
    print_report(console, doc)
    assert "│ median │" in console.export_text().replace("┃", "│")

    schema = results.results_schema()["$defs"]["summary"]
    assert "median" in schema["required"] and "median" in schema["properties"]
    missing = copy.deepcopy(doc)
    del missing["aggregates"][MENU]["median"]
    with pytest.raises(BadSubmission, match="'median' is a required property"):
        check_submission(missing)
    edited = copy.deepcopy(doc)
    edited["aggregates"][MENU]["median"] = 0.5 if summary["median"] != 0.5 else 0.25
    with pytest.raises(BadSubmission, match=f"aggregates of {MENU} disagree .*: median"):
        check_submission(edited)

    lb = Leaderboard(tmp_path / "lb.db")
    sid = lb.submit(doc)
    assert lb.detail(sid)["aggregates"] == doc["aggregates"]
    html = TestClient(create_app(lb)).get(f"/submission/{sid}").text
    assert '<th class="num">IQM</th><th class="num">median</th>' in html


def test_a_submission_stored_before_a_statistic_shows_a_dash(tmp_path, monkeypatch):
    doc = evaluate("random", [MENU], seeds=3, root_seed=5, out=tmp_path / "r.json")
    lb = Leaderboard(tmp_path / "lb.db")
    sid = lb.submit(doc)
    median = stats.Statistic("median", "median", _median)
    monkeypatch.setattr(stats, "STATISTICS", (*stats.STATISTICS, median))
    html = TestClient(create_app(lb)).get(f"/submission/{sid}").text
    assert '<th class="num">median</th>' in html
    assert '<td class="num">–</td>' in html
