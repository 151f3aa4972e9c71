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
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentgym.core.canonical import canonical
from agentgym.core.timing import Alternated, Sample, Stopwatch, alternate
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


Timed = tuple[Callable[[Any], object], Callable[[], Any]]
"""A measured call and its untimed set-up: ``fn(setup())``."""


def _alternated(sides: dict[str, Timed], repeats: int) -> Alternated:
    """Every side ``repeats`` times, alternating the order round by round (one warm-up round).

    Each call is ``fn(setup())`` with only ``fn`` timed, on wall and CPU clocks; what the
    set-up made is closed after, untimed (a database connection: closing the last one
    checkpoints the WAL, work that no side's measure holds).
    """

    def side(fn: Callable[[Any], object], setup: Callable[[], Any]) -> Callable[[], Sample]:
        def call() -> Sample:
            arg = setup()
            with Stopwatch() as watch:
                fn(arg)
            if hasattr(arg, "close"):
                arg.close()
            return watch.sample

        return call

    return alternate({n: side(*t) for n, t in sides.items()}, repeats=repeats, warmup=1)


def _none() -> None:
    return None


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


def _submit_rows(folder: Path, doc: dict[str, Any], raw: bytes, repeats: int) -> list[dict]:
    """Rows for parse, each check, storage and the whole submit, in seconds."""
    check_submission(doc)  # warm caches (schema, env data hash) as a long-lived server has them
    n = len(doc["episodes"])
    fresh = functools.partial(_fresh_db, folder)
    body = zlib.compress(canonical(doc), ZLIB_LEVEL)
    whole = _alternated(
        {
            "submit": (lambda lb: lb.submit(doc), fresh),
            "json.loads": (lambda _: json.loads(raw), _none),
        },
        repeats,
    )
    # storage as submit does it: content hash, compression, one transaction
    store = _alternated(
        {
            "storage": (lambda lb: lb._insert(doc, "bench", canonical(doc)), fresh),
            "raw": (lambda c: _raw_blob_insert(c, body), functools.partial(_raw_db, folder)),
        },
        repeats,
    )
    checks = _alternated(
        {
            **{c.__name__: (functools.partial(_apply, c, doc), _none) for c in CHECKS},
            "validation": (lambda _: check_submission(doc), _none),
        },
        repeats,
    )
    rows = [_ms_row("json.loads (peer)", whole, "json.loads", "parse only")]
    for check in CHECKS:
        rows.append(
            _ms_row(f"validate: {check.__name__}", checks, check.__name__, "part of validation")
        )
    return [
        *rows,
        _ms_row("validation (all checks)", checks, "validation", f"{n} episodes"),
        _ms_row(
            "storage (canonical JSON, hash, compress, 1 transaction)",
            store,
            "storage",
            f"{len(body) >> 10} KiB stored",
        ),
        _ms_row(
            "raw sqlite blob insert (peer)", store, "raw", "same blob, no hashing or compression"
        ),
        _ms_row("submit (validation + storage)", whole, "submit", "fresh database each time"),
    ]


def _ms_row(measure: str, timed: Alternated, side: str, note: str) -> dict[str, Any]:
    """One table row: the side's median milliseconds on both clocks, with its runs' range."""
    wall, cpu = timed.spread(side), timed.spread(side, "cpu")
    return {
        "measure": measure,
        "ms": round(timed.median(side) * 1000, 2),
        "cpu_ms": round(timed.median(side, "cpu") * 1000, 2),
        "ms_range": [round(wall[0] * 1000, 2), round(wall[1] * 1000, 2)],
        "cpu_ms_range": [round(cpu[0] * 1000, 2), round(cpu[1] * 1000, 2)],
        "runs": len(timed.samples[side]),
        "note": note,
    }


def _render_rows(folder: Path, render: Render, submissions: int, repeats: int) -> list[dict]:
    """Fill a database with ``submissions`` small files and time ``render`` against rows()."""
    lb = _fresh_db(folder)
    for i in range(submissions):
        doc = synthetic_results(5, root_seed=1000 + i, success_rate=float(i % 10) / 10)
        if i == 0:
            check_submission(doc)  # the rest are made the same way; store them directly
        lb._insert(doc, f"agent {i}", canonical(doc))
    timed = _alternated(
        {"render": (lambda _: render(lb), _none), "rows": (lambda _: lb.rows(), _none)}, repeats
    )
    note = f"{submissions} submissions"
    return [
        _ms_row("page render", timed, "render", note),
        _ms_row("Leaderboard.rows() (peer)", timed, "rows", note),
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
    episodes, submissions, repeats = (1_000, 100, 2) if quick else (10_000, 1_000, 5)
    doc = synthetic_results(episodes)
    raw = json.dumps(doc, indent=1).encode()  # as eval writes it
    with tempfile.TemporaryDirectory(prefix="agentgym-bench-") as tmp:
        rows = _submit_rows(Path(tmp), json.loads(raw), raw, repeats)
        if render is not None:
            rows += _render_rows(Path(tmp), render, submissions, repeats)
    ratios = _ratios(rows, render is not None)
    _print(console, rows, ratios, episodes)
    return {"part": "leaderboard", "rows": rows, "ratios": ratios}


def _ratios(rows: list[dict], rendered: bool) -> dict[str, float]:
    """Each measure over its peer's, from the medians, on wall time and on CPU time."""
    pairs = {
        "submit / json.loads": ("submit (validation + storage)", "json.loads (peer)"),
        "storage / raw blob insert": (
            "storage (canonical JSON, hash, compress, 1 transaction)",
            "raw sqlite blob insert (peer)",
        ),
    }
    if rendered:
        pairs["page render / rows()"] = ("page render", "Leaderboard.rows() (peer)")
    by_measure = {r["measure"]: r for r in rows}
    ratios = {}
    for name, (ours, peer) in pairs.items():
        for key, suffix in (("ms", ""), ("cpu_ms", " (CPU)")):
            below = max(by_measure[peer][key], 1e-3)
            ratios[name + suffix] = round(by_measure[ours][key] / below, 1)
    return ratios


def _print(console: Console, rows: list[dict], ratios: dict[str, float], episodes: int) -> None:
    table = Table(
        *("measure", "ms", "range", "CPU ms", "range (CPU)", "note"),
        title=f"leaderboard: submit a {episodes}-episode file (medians of alternating runs)",
    )
    for r in rows:
        (lo, hi), (cpu_lo, cpu_hi) = r["ms_range"], r["cpu_ms_range"]
        table.add_row(
            r["measure"],
            f"{r['ms']:.2f}",
            f"{lo:.2f} … {hi:.2f}",
            f"{r['cpu_ms']:.2f}",
            f"{cpu_lo:.2f} … {cpu_hi:.2f}",
            r["note"],
        )
    for name, ratio in ratios.items():
        table.add_row(name, f"{ratio:.1f}x", "", "", "", "ratio of medians")
    console.print(table)
