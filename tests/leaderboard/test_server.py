"""The leaderboard's web page through FastAPI's TestClient (no browser, no socket).

Most tests read a small in-memory stand-in for the store (same methods as
``agentgym.leaderboard.store.Leaderboard``); the last ones submit real results files to the
real store.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agentgym.core.errors import BadInput
from agentgym.leaderboard.server import SECURITY_HEADERS, create_app

ENV = "agentgym/Search-Menu-Small-v0"
OTHER = "agentgym/Tools-Ecommerce-v0"
EVIL = "<script>alert(1)</script>"
EVIL_SPEC = 'evil.mod:Agent"><img src=x onerror=alert(2)>'


def _row(sid: int, name: str, env: str, mean: float, rank: int, **kw: Any) -> dict[str, Any]:
    row = {
        "id": sid,
        "name": name,
        "env_id": env,
        "agent": kw.get("agent", name),
        "mean": mean,
        "ci_low": max(mean - 0.1, 0.0),
        "ci_high": min(mean + 0.1, 1.0),
        "n": 20,
        "rank": rank,
        "tied": kw.get("tied", False),
        "verified": kw.get("verified"),
    }
    return row


class FakeLeaderboard:
    """The store's read API over fixed rows (rows are returned in a shuffled order, so the
    page must sort them itself)."""

    def __init__(self) -> None:
        self._rows = [
            _row(3, "random", ENV, 0.0, 4, verified=False),
            _row(1, "oracle", ENV, 1.0, 1, verified=True),
            _row(4, EVIL, ENV, 0.25, 2, agent=EVIL_SPEC),
            _row(2, "heuristic", ENV, 0.125, 3, tied=True),
            _row(5, "tool oracle", OTHER, 0.9, 1),
        ]

    def rows(self, env_id: str | None = None) -> list[dict[str, Any]]:
        return [dict(r) for r in self._rows if env_id is None or r["env_id"] == env_id]

    def env_ids(self) -> list[str]:
        return sorted({r["env_id"] for r in self._rows})

    def detail(self, submission_id: int) -> dict[str, Any]:
        row = next((r for r in self._rows if r["id"] == submission_id), None)
        if row is None:
            raise BadInput(f"no submission {submission_id}")
        agg = {"n": 20, "mean": row["mean"], "iqm": row["mean"], "ci_low": row["ci_low"]}
        agg["ci_high"] = row["ci_high"]
        return {
            "id": row["id"],
            "name": row["name"],
            "submitted_at": "2025-01-01T00:00:00Z",
            "content_hash": "c0ffee" * 10,
            "agent": {"name": row["name"], "spec": row["agent"], "checkpoint_sha256": "ab" * 32},
            "envs": [
                {
                    "id": row["env_id"],
                    "version": 0,
                    "kwargs": {"path": "</td><script>alert(3)</script>"},
                    "data_hash": "d" * 64,
                }
            ],
            "split": "test",
            "root_seed": 7,
            "seeds": 20,
            "episodes_per_seed": 1,
            "bootstrap": {"seed": 7, "reps": 2000},
            "aggregates": {
                row["env_id"]: {
                    **agg,
                    "by_task_type": {
                        "bridge": dict(agg, n=12),
                        "<b>odd type</b>": dict(agg, n=8),
                    },
                }
            },
            "verified": row["verified"],
            "verify_note": "10 sampled episodes replayed <i>fine</i>",
        }


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(FakeLeaderboard()))


def _names_in_order(html: str) -> list[str]:
    """Display names of the ranking table's rows, in document order (still escaped)."""
    body = html.split('id="ranking"', 1)[1]
    return re.findall(r'<a class="name" href="/submission/\d+">(.*?)</a>', body)


def test_index_lists_envs_with_their_leader(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert f'href="/env/{ENV}"' in r.text and f'href="/env/{OTHER}"' in r.text
    assert '<a class="name" href="/submission/1">oracle</a>' in r.text
    assert '<a class="name" href="/submission/5">tool oracle</a>' in r.text
    assert "random" not in r.text  # only leaders are listed


def test_env_page_rows_in_rank_order(client: TestClient) -> None:
    r = client.get(f"/env/{ENV}")
    assert r.status_code == 200
    assert _names_in_order(r.text) == [
        "oracle",
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "heuristic",
        "random",
    ]
    assert "tool oracle" not in r.text  # another env's row
    assert '<script src="/static/sort.js" defer></script>' in r.text
    assert r.text.count('class="ci-range" style="left: ') == 4
    assert 'style="left: 100.00%"' in r.text  # the oracle's mean tick
    assert "badge-ok" in r.text and "badge-bad" in r.text and "badge-none" in r.text


def test_user_strings_are_escaped(client: TestClient) -> None:
    for url in (f"/env/{ENV}", "/submission/4"):
        html = client.get(url).text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url
        assert "<script>alert(" not in html, url
        assert "<img" not in html, url
    escaped_spec = "evil.mod:Agent&#34;&gt;&lt;img src=x onerror=alert(2)&gt;"
    assert escaped_spec in client.get(f"/env/{ENV}").text
    detail = client.get("/submission/4").text
    assert escaped_spec in detail
    assert "&lt;/td&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in detail  # env kwargs
    assert "&lt;b&gt;odd type&lt;/b&gt;" in detail and "<b>odd" not in detail  # task type
    assert "&lt;i&gt;fine&lt;/i&gt;" in detail  # verification note


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for url in ("/", f"/env/{ENV}", "/submission/1", "/api/rows", "/static/sort.js", "/nope"):
        r = client.get(url)
        for name, value in SECURITY_HEADERS.items():
            assert r.headers[name] == value, (url, name)
    assert "script-src 'self';" in SECURITY_HEADERS["Content-Security-Policy"]


def test_submission_page_shows_the_details(client: TestClient) -> None:
    r = client.get("/submission/2")
    assert r.status_code == 200
    html = r.text
    for text in ("heuristic", "ab" * 32, "d" * 64, "c0ffee" * 10, "2000 repetitions", "test"):
        assert text in html, text
    assert '<code class="agent-spec">heuristic</code>' in html
    assert "20 runs × 1 episode per run" in html
    assert ">bridge<" in html  # per-task-type table
    assert "&lt;i&gt;fine&lt;/i&gt;" in html  # the verification note


@pytest.mark.parametrize(
    "url",
    [
        "/env/agentgym/Nope-v0",
        "/env/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/submission/999",
        "/submission/abc",
        "/api/rows?env=agentgym/Nope-v0",
        "/nowhere",
    ],
)
def test_unknown_things_are_404(client: TestClient, url: str) -> None:
    r = client.get(url)
    assert r.status_code == 404
    assert "<script>alert(" not in r.text


def test_read_only(client: TestClient) -> None:
    for method in ("post", "put", "delete"):
        assert getattr(client, method)(f"/env/{ENV}").status_code == 405
        assert getattr(client, method)("/api/rows").status_code == 405


def test_api_rows_is_the_store_rows(client: TestClient) -> None:
    fake = FakeLeaderboard()
    r = client.get("/api/rows")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == fake.rows()
    assert client.get("/api/rows", params={"env": OTHER}).json() == fake.rows(OTHER)


def test_empty_leaderboard() -> None:
    empty = FakeLeaderboard()
    empty._rows = []
    client = TestClient(create_app(empty))
    r = client.get("/")
    assert r.status_code == 200 and "No submissions yet" in r.text
    assert client.get("/api/rows").json() == []


def test_ci_bar_is_clamped_and_tolerates_odd_values() -> None:
    from agentgym.leaderboard.server import _bar

    assert _bar(0.25, 0.75, 0.5) == {"left": "25.00%", "width": "50.00%", "mean": "50.00%"}
    assert _bar(-1, 2, float("nan")) == {"left": "0.00%", "width": "100.00%", "mean": "0.00%"}
    assert _bar(None, None, None)["width"] == "0.00%"


# ------------------------------------------------------------------- against the real store


def _results(tmp: Path, agent: str, seeds: int, root_seed: int) -> dict[str, Any]:
    from agentgym.harness.evaluate import evaluate

    out = tmp / f"{agent.rsplit(':', 1)[-1]}-{root_seed}.json"
    evaluate(agent, [ENV], seeds=seeds, root_seed=root_seed, out=out)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def real_client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    from agentgym.leaderboard.store import Leaderboard

    tmp = tmp_path_factory.mktemp("lb")
    lb = Leaderboard(tmp / "board.sqlite")
    lb.submit(_results(tmp, "random", 8, 1), name="random")
    lb.submit(_results(tmp, "oracle", 8, 2), name="oracle")
    lb.submit(_results(tmp, "random", 8, 3), name=EVIL)
    return TestClient(create_app(lb))


def test_real_store_pages(real_client: TestClient) -> None:
    rows = real_client.get("/api/rows").json()
    assert {r["name"] for r in rows} == {"random", "oracle", EVIL}
    html = real_client.get(f"/env/{ENV}").text
    names = _names_in_order(html)
    assert names[0] == "oracle" and len(names) == 3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(" not in html
    assert real_client.get("/").status_code == 200
    evil = next(r for r in rows if r["name"] == EVIL)
    detail = real_client.get(f"/submission/{evil['id']}")
    assert detail.status_code == 200
    assert '<code class="agent-spec">random</code>' in detail.text
    assert "<script>alert(" not in detail.text
    assert real_client.get("/submission/12345").status_code == 404


def test_fake_matches_real_row_keys(real_client: TestClient) -> None:
    real = real_client.get("/api/rows").json()[0]
    assert set(real) == set(FakeLeaderboard().rows()[0])
