"""Leaderboard speed: submitting a 10,000-episode results file, against peers.

The submit is split into validation (each check) and storage, and measured in the same run
as plain ``json.loads`` of the same file and a raw SQLite insert of the same compressed blob.

The results file is synthesised, not played: the header is the harness's own
(:func:`agentgym.harness.evaluate.header`), the episodes follow the harness's seed plan with
random successes, task types and transcript hashes, and the aggregates come from
:func:`agentgym.harness.stats.aggregate` through :func:`agentgym.harness.evaluate.finish`. It
passes every check exactly as a played file of the same size would; validation cost does not
depend on what the episodes contain.

Page render time with many submissions belongs to the web page; :func:`run` times it when
given a ``render`` callable.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.core.canonical import canonical
from agentgym.harness.evaluate import RunPlan, finish, header
from agentgym.harness.results import EpisodeRecord, ResultsDoc
from agentgym.harness.seeds import episode_seeds
from agentgym.leaderboard.store import ZLIB_LEVEL, Leaderboard
from agentgym.leaderboard.validate import CHECKS, check_submission

ENV_ID = "agentgym/Search-Menu-Small-v0"
TASK_TYPES = ("bridge", "comparison", "compositional")

Render = Callable[[Leaderboard], object]
"""Renders the board's page(s) from a filled database (the web helper's hook)."""


def synthetic_results(seeds: int, root_seed: int = 0, success_rate: float = 0.3) -> ResultsDoc:
    """A valid results document of ``seeds`` runs of one episode on ``ENV_ID``."""
    doc = header(RunPlan("random", (ENV_ID,), seeds, root_seed=root_seed))
    rng = np.random.default_rng(root_seed)
    episodes: list[EpisodeRecord] = []
    for run, (seed,) in enumerate(episode_seeds(root_seed, seeds, 1)):
        steps = int(rng.integers(1, 20))
        episodes.append(
            {
                "env_id": ENV_ID,
                "run": run,
                "episode": 0,
                "seed": seed,
                "task_id": f"q{int(rng.integers(0, 300)):05d}",
                "task_type": TASK_TYPES[int(rng.integers(0, len(TASK_TYPES)))],
                "success": bool(rng.random() < success_rate),
                "return": float(rng.random()),
                "steps": steps,
                "tokens": 0,
                "seconds": round(float(rng.random()) / 100, 6),
                "error": None,
                "transcript_sha256": hashlib.sha256(f"{root_seed}/{run}".encode()).hexdigest(),
            }
        )
    return finish(doc, episodes)


def _apply(check: Callable[[Any], object], doc: Any, _: Any) -> object:
    """``check(doc)``, in the one-argument form :func:`_median_s` times."""
    return check(doc)


def _median_s(
    fn: Callable[[Any], object], repeats: int, setup: Callable[[], Any] = lambda: None
) -> float:
    """Median wall time of ``fn(setup())`` over ``repeats`` calls; ``setup`` is not timed."""
    times = []
    for _ in range(repeats):
        arg = setup()
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fresh_db(folder: Path) -> Leaderboard:
    return Leaderboard(Path(tempfile.mkdtemp(dir=folder)) / "lb.db")


def _raw_db(folder: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(Path(tempfile.mkdtemp(dir=folder)) / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB)")
    return conn


def _raw_blob_insert(conn: sqlite3.Connection, body: bytes) -> None:
    """The peer of storage: one plain transaction inserting the same blob."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO blobs (body) VALUES (?)", (body,))
    conn.execute("COMMIT")
    conn.close()


def _submit_rows(folder: Path, doc: dict[str, Any], raw: bytes, repeats: int) -> list[dict]:
    """Rows for parse, each check, storage and the whole submit, in seconds."""
    check_submission(doc)  # warm caches (schema, env data hash) as a long-lived server has them
    n = len(doc["episodes"])
    timed: list[tuple[str, float, str]] = [
        ("json.loads (peer)", _median_s(lambda _: json.loads(raw), repeats), "parse only"),
    ]
    for check in CHECKS:
        seconds = _median_s(functools.partial(_apply, check, doc), repeats)
        timed.append((f"validate: {check.__name__}", seconds, "part of validation"))
    validation = _median_s(lambda _: check_submission(doc), repeats)
    fresh = lambda: _fresh_db(folder)  # noqa: E731
    # storage as submit does it: content hash, compression, one transaction
    storage = _median_s(lambda lb: lb._insert(doc, "bench", canonical(doc)), repeats, fresh)
    body = zlib.compress(canonical(doc), ZLIB_LEVEL)
    raw_insert = _median_s(lambda c: _raw_blob_insert(c, body), repeats, lambda: _raw_db(folder))
    total = _median_s(lambda lb: lb.submit(doc), repeats, fresh)
    timed += [
        ("validation (all checks)", validation, f"{n} episodes"),
        (
            "storage (canonical JSON, hash, compress, 1 transaction)",
            storage,
            f"{len(body) >> 10} KiB stored",
        ),
        ("raw sqlite blob insert (peer)", raw_insert, "same blob, no hashing or compression"),
        ("submit (validation + storage)", total, "fresh database each time"),
    ]
    return [{"measure": m, "ms": round(s * 1000, 2), "note": note} for m, s, note in timed]


def _render_rows(folder: Path, render: Render, submissions: int, repeats: int) -> list[dict]:
    """Fill a database with ``submissions`` small files and time ``render`` against rows()."""
    lb = _fresh_db(folder)
    for i in range(submissions):
        doc = synthetic_results(5, root_seed=1000 + i, success_rate=float(i % 10) / 10)
        if i == 0:
            check_submission(doc)  # the rest are made the same way; store them directly
        lb._insert(doc, f"agent {i}", canonical(doc))
    render_s = _median_s(lambda _: render(lb), repeats)
    rows_s = _median_s(lambda _: lb.rows(), repeats)
    note = f"{submissions} submissions"
    return [
        {"measure": "page render", "ms": round(render_s * 1000, 2), "note": note},
        {"measure": "Leaderboard.rows() (peer)", "ms": round(rows_s * 1000, 2), "note": note},
    ]


def render_env_page(lb: Leaderboard) -> Any:
    """GET the env page through the web app (in process, no socket): the page a person opens."""
    from fastapi.testclient import TestClient

    from agentgym.leaderboard.server import create_app

    response = TestClient(create_app(lb)).get(f"/env/{ENV_ID}")
    response.raise_for_status()
    return response


def run(
    console: Console, quick: bool = False, render: Render | None = render_env_page
) -> dict[str, Any]:
    """Time submitting a large file and rendering a full board.

    Args:
        console: where to print the table.
        quick: smaller sizes (a smoke run).
        render: renders the page(s) from a filled database; None skips the page.

    Returns:
        The ``bench`` document: submit latency of a 10,000-episode file (1,000 when
        ``quick``) and the env page's render time with 1,000 submissions (100 when
        ``quick``).
    """
    episodes, submissions, repeats = (1_000, 100, 1) if quick else (10_000, 1_000, 3)
    doc = synthetic_results(episodes)
    raw = json.dumps(doc, indent=1).encode()  # as eval writes it
    with tempfile.TemporaryDirectory(prefix="agentgym-bench-") as tmp:
        rows = _submit_rows(Path(tmp), json.loads(raw), raw, repeats)
        if render is not None:
            rows += _render_rows(Path(tmp), render, submissions, repeats)
    ms = {r["measure"]: r["ms"] for r in rows}
    ratios = {
        "submit / json.loads": round(
            ms["submit (validation + storage)"] / ms["json.loads (peer)"], 1
        ),
        "storage / raw blob insert": round(
            ms["storage (canonical JSON, hash, compress, 1 transaction)"]
            / ms["raw sqlite blob insert (peer)"],
            1,
        ),
    }
    if render is not None:
        ratios["page render / rows()"] = round(
            ms["page render"] / max(ms["Leaderboard.rows() (peer)"], 1e-3), 1
        )
    _print(console, rows, ratios, episodes)
    return {"part": "leaderboard", "rows": rows, "ratios": ratios}


def _print(console: Console, rows: list[dict], ratios: dict[str, float], episodes: int) -> None:
    table = Table("measure", "ms", "note", title=f"leaderboard: submit a {episodes}-episode file")
    for r in rows:
        table.add_row(r["measure"], f"{r['ms']:.2f}", r["note"])
    for name, ratio in ratios.items():
        table.add_row(name, f"{ratio:.1f}x", "ratio")
    console.print(table)
