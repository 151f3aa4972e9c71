"""verify replays sampled episodes: honest files reproduce, edited transcripts do not."""

import json

import pytest
from clirun import cli

from agentgym.harness.evaluate import evaluate, finish
from agentgym.leaderboard.store import Leaderboard
from agentgym.leaderboard.verify import verify

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture
def board(tmp_path):
    return Leaderboard(tmp_path / "lb.db")


def test_an_honest_submission_is_verified(board):
    doc = evaluate("agentgym.envs.search.agents:MenuHeuristicAgent", [SMALL], seeds=12)
    sid = board.submit(doc)
    result = verify(board, sid, sample=5)
    assert result["verified"] and result["checked"] == 5 and result["differing"] == []
    assert board.detail(sid)["verified"] is True
    assert next(r for r in board.rows() if r["id"] == sid)["verified"] is True


def test_edited_episodes_with_recomputed_aggregates_are_not_reproduced(board):
    doc = evaluate("random", [SMALL], seeds=12)
    forged = dict(doc)
    forged["episodes"] = [dict(e) for e in doc["episodes"]]
    for ep in forged["episodes"]:  # claim every episode succeeded...
        ep["success"], ep["return"] = True, 1.0
    forged = finish(
        {k: v for k, v in forged.items() if k not in ("episodes", "aggregates")}, forged["episodes"]
    )  # ...and recompute the aggregates to match
    forged["episodes"][0]["transcript_sha256"] = "0" * 64  # a forged transcript
    sid = board.submit(forged, name="forged")  # passes every static check
    result = verify(board, sid, sample=12)
    assert not result["verified"]
    keys = {(d["run"], d["episode"]) for d in result["differing"]}
    assert (0, 0) in keys
    assert "not reproduced" in board.detail(sid)["verify_note"]


def test_cli_submit_leaderboard_verify(tmp_path):
    results, db = tmp_path / "r.json", tmp_path / "lb.db"
    assert (
        cli(
            "eval", "--agent", "oracle", "--env", SMALL, "--seeds", "6", "--out", str(results)
        ).returncode
        == 0
    )
    submitted = cli("submit", str(results), "--name", "<b>mine</b>", "--db", str(db))
    assert submitted.returncode == 0, submitted.stderr
    assert "submission 1: rank 1" in submitted.stdout
    again = cli("submit", str(results), "--db", str(db))  # stored once: names the entry
    assert again.returncode == 0, again.stderr
    assert "already submitted as 1 (<b>mine</b>): not stored again" in again.stdout
    rows = json.loads(cli("leaderboard", "--db", str(db), "--json").stdout)
    assert rows == [{**rows[0], "id": 1, "name": "<b>mine</b>", "rank": 1, "verified": None}]
    verified = cli("verify", "1", "--sample", "3", "--db", str(db))
    assert verified.returncode == 0, verified.stderr
    assert json.loads(cli("leaderboard", "--db", str(db), "--json").stdout)[0]["verified"] is True
    assert cli("verify", "99", "--db", str(db)).returncode == 2
