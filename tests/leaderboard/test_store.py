import copy
import hashlib
import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import zlib
from datetime import datetime
from pathlib import Path

import pytest

from agentgym.core.errors import BadInput
from agentgym.core.paths import home
from agentgym.harness.evaluate import evaluate
from agentgym.harness.stats import aggregate
from agentgym.leaderboard import store
from agentgym.leaderboard.store import SCHEMA_VERSION, Leaderboard
from agentgym.leaderboard.validate import (
    AlreadySubmitted,
    BadSubmission,
    content_hash,
    load_submission,
)

MENU = "agentgym/Search-Menu-Small-v0"
FREE = "agentgym/Search-Free-Small-v0"
ROW_KEYS = {"id", "name", "env_id", "agent", "mean", "ci_low", "ci_high", "n", "rank", "tied"}
ROW_KEYS |= {"verified"}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    """A real results file: the oracle on one env, 10 runs of one episode."""
    out = tmp_path_factory.mktemp("results") / "base.json"
    return evaluate("oracle", [MENU], seeds=10, root_seed=1, out=out)


def with_successes(doc: dict, wins: int, tweak: int = 0) -> dict:
    """A copy in which the first ``wins`` runs succeed, with honest aggregates; ``tweak``
    changes a step count so that equal scores still make a distinct result."""
    doc = copy.deepcopy(doc)
    for ep in doc["episodes"]:
        ep["success"] = ep["run"] < wins
    doc["episodes"][0]["steps"] += tweak
    boot = doc["bootstrap"]
    doc["aggregates"] = aggregate(doc["episodes"], bootstrap_seed=boot["seed"], reps=boot["reps"])
    return doc


def before_ci_method(doc: dict) -> dict:
    """The file as the harness wrote it before ``ci_method``: bootstrap intervals only."""
    boot = doc["bootstrap"]
    doc["aggregates"] = aggregate(
        doc["episodes"], bootstrap_seed=boot["seed"], reps=boot["reps"], exact_if_constant=False
    )
    for env in doc["aggregates"].values():
        for summary in (env, *env["by_task_type"].values()):
            del summary["ci_method"]
    return doc


def run_python(code: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)])


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"child exited early with {proc.returncode}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def counts(db: Path) -> tuple[int, int, int]:
    with sqlite3.connect(db) as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("submissions", "documents", "results")
        )


# ---------------------------------------------------------------------------- submit and read


def test_default_database_lives_in_agentgym_home():
    with Leaderboard() as lb:
        assert lb.path == home() / "leaderboard.db"


def test_rows_rank_per_env_and_mark_ties(base, tmp_path):
    lb = Leaderboard(tmp_path / "lb.db")
    nine = lb.submit(with_successes(base, 9), name="nine")
    none = lb.submit(with_successes(base, 0), name="none")
    eight_a = lb.submit(with_successes(base, 8), name="eight a")
    eight_b = lb.submit(with_successes(base, 8, tweak=1), name="eight b")
    rows = lb.rows()
    assert [r["id"] for r in rows] == [nine, eight_a, eight_b, none]
    assert [r["rank"] for r in rows] == [1, 2, 3, 4]
    assert [r["mean"] for r in rows] == [0.9, 0.8, 0.8, 0.0]
    # the leader is never tied; 0.8 overlaps [ci of 0.9]; 0.0 does not
    assert [r["tied"] for r in rows] == [False, True, True, False]
    assert rows[0]["ci_low"] <= rows[1]["ci_high"]
    assert rows[3]["ci_high"] < rows[0]["ci_low"]
    for r in rows:
        assert set(r) == ROW_KEYS
        assert r["env_id"] == MENU and r["agent"] == "oracle" and r["n"] == 10
        assert r["verified"] is None
    assert json.loads(json.dumps(rows)) == rows
    assert lb.rows(MENU) == rows
    assert lb.rows(FREE) == []
    assert lb.rows("x' OR '1'='1") == []  # parameters, not SQL text


def test_a_file_with_two_envs_gives_one_row_per_env(tmp_path):
    doc = evaluate("random", [MENU, FREE], seeds=3, root_seed=2, out=tmp_path / "two.json")
    lb = Leaderboard(tmp_path / "lb.db")
    sid = lb.submit(doc)
    rows = lb.rows()
    assert [(r["id"], r["env_id"], r["rank"]) for r in rows] == [(sid, FREE, 1), (sid, MENU, 1)]
    assert lb.env_ids() == [FREE, MENU]
    assert [r["env_id"] for r in lb.rows(FREE)] == [FREE]


def test_detail_and_document(base, tmp_path):
    lb = Leaderboard(tmp_path / "lb.db")
    doc = with_successes(base, 7)
    sid = lb.submit(doc)
    d = lb.detail(sid)
    assert d["id"] == sid and d["name"] == "oracle"  # the agent's name by default
    assert datetime.fromisoformat(d["submitted_at"]).utcoffset().total_seconds() == 0
    assert d["content_hash"] == content_hash(doc)
    assert d["agent"] == {"name": "oracle", "spec": "oracle", "checkpoint_sha256": None}
    assert d["envs"] == doc["envs"]
    assert (d["split"], d["root_seed"], d["seeds"], d["episodes_per_seed"]) == ("test", 1, 10, 1)
    assert d["bootstrap"] == doc["bootstrap"]
    assert d["aggregates"] == doc["aggregates"]
    assert d["aggregates"][MENU]["by_task_type"]
    assert (d["verified"], d["verify_note"]) == (None, None)
    assert json.loads(json.dumps(d)) == d
    assert lb.document(sid) == doc
    lb.set_verified(sid, False, "not reproduced: 1 of 10 episodes differ")
    assert lb.rows()[0]["verified"] is False
    assert lb.detail(sid)["verify_note"] == "not reproduced: 1 of 10 episodes differ"
    lb.set_verified(sid, True, "10 sampled episodes replayed to identical transcripts")
    assert lb.rows()[0]["verified"] is True


def test_unknown_ids_and_bad_names(base, tmp_path):
    lb = Leaderboard(tmp_path / "lb.db")
    for call in (lb.detail, lb.document, lambda i: lb.set_verified(i, True, "")):
        with pytest.raises(BadInput, match="no submission #7 in"):
            call(7)
    with pytest.raises(BadInput, match="--name must have 1 to 200 characters"):
        lb.submit(base, name="   ")
    assert counts(lb.path) == (0, 0, 0)


def test_a_result_is_stored_once_and_a_second_submit_names_it(base, tmp_path):
    lb = Leaderboard(tmp_path / "lb.db")
    first = lb.submit(copy.deepcopy(base), name="first")
    with pytest.raises(AlreadySubmitted, match=f"already submitted as #{first} \\(first\\)") as e:
        lb.submit(copy.deepcopy(base), name="again")
    assert (e.value.submission_id, e.value.name) == (first, "first")
    assert isinstance(e.value, BadSubmission)
    assert pickle.loads(pickle.dumps(e.value)).submission_id == first  # crosses processes
    reformatted = tmp_path / "reindented.json"
    reformatted.write_text(json.dumps(dict(reversed(list(base.items()))), indent=7))
    doc, _ = load_submission(reformatted)
    with pytest.raises(AlreadySubmitted, match=f"already submitted as #{first}"):
        lb.submit(doc)
    rerun = copy.deepcopy(base)  # the same evaluation run again: only its timings differ
    for ep in rerun["episodes"]:
        ep["seconds"] += 0.25
    with pytest.raises(AlreadySubmitted, match=f"already submitted as #{first}"):
        lb.submit(rerun)
    assert counts(lb.path) == (1, 1, 1)
    changed = lb.submit(with_successes(base, 10, tweak=1), name="changed")
    assert changed != first and counts(lb.path) == (2, 2, 2)
    assert lb.detail(changed)["name"] == "changed"


def _truncated(doc: dict, tmp_path: Path) -> dict:
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(doc)[:-40])
    return load_submission(path)[0]


def _schema(doc: dict, tmp_path: Path) -> dict:
    doc["episodes"][0]["steps"] = -1
    return doc


def _episode(doc: dict, tmp_path: Path) -> dict:
    doc["episodes"][0]["success"] = not doc["episodes"][0]["success"]
    return doc


def _aggregates(doc: dict, tmp_path: Path) -> dict:
    doc["aggregates"][MENU]["mean"] = 0.5
    return doc


def _version(doc: dict, tmp_path: Path) -> dict:
    doc["envs"][0]["version"] = 3
    return doc


def _data_hash(doc: dict, tmp_path: Path) -> dict:
    doc["envs"][0]["data_hash"] = "f" * 64
    return doc


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (_truncated, "is not valid JSON"),
        (_schema, "breaks the schema at \\$.episodes\\[0\\].steps: -1 is less than"),
        (_episode, f"aggregates of {MENU} disagree with its episodes: mean"),
        (_aggregates, f"aggregates of {MENU} disagree with its episodes: mean is 0.5"),
        (_version, f"records version 3 of {MENU} but this installation's {MENU} is version 0"),
        (_data_hash, f"data of {MENU} differ from this installation's: the file has data_hash f"),
    ],
)
def test_refused_files_store_nothing(base, tmp_path, tamper, message):
    lb = Leaderboard(tmp_path / "lb.db")
    with pytest.raises(BadSubmission, match=message):
        lb.submit(tamper(copy.deepcopy(base), tmp_path))
    assert counts(lb.path) == (0, 0, 0)
    assert lb.rows() == []


# ---------------------------------------------------------------------------- processes

SUBMIT_WHEN_TOLD = """
    import sys, time
    from pathlib import Path
    from agentgym.leaderboard.store import Leaderboard
    from agentgym.leaderboard.validate import load_submission

    results, db, ready, go = sys.argv[1:]
    doc, _ = load_submission(results)
    lb = Leaderboard(db)
    Path(ready).touch()
    while not Path(go).exists():
        time.sleep(0.01)
    lb.submit(doc, name=Path(results).stem)
"""


def test_fifty_concurrent_submitters_store_fifty_rows(tmp_path):
    db, go = tmp_path / "lb.db", tmp_path / "go"
    files = []
    for i in range(50):
        out = tmp_path / f"r{i:02d}.json"
        evaluate("random", [MENU], seeds=2, root_seed=100 + i, out=out)
        files.append(out)
    procs = [
        (run_python(SUBMIT_WHEN_TOLD, f, db, tmp_path / f"{f.stem}.ready", go), f) for f in files
    ]
    try:
        for proc, f in procs:
            wait_for(tmp_path / f"{f.stem}.ready", proc)
        go.touch()  # all 50 submit at once
        codes = [proc.wait(timeout=300) for proc, _ in procs]
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
    assert codes == [0] * 50
    rows = Leaderboard(db).rows()
    assert len(rows) == 50
    assert sorted(r["name"] for r in rows) == sorted(f.stem for f in files)
    assert sorted(r["id"] for r in rows) == list(range(1, 51))
    assert counts(db) == (50, 50, 50)


KILLED_INSIDE_THE_TRANSACTION = """
    import sys, time
    from pathlib import Path
    from agentgym.leaderboard import store
    from agentgym.leaderboard.validate import load_submission

    results, db, ready = sys.argv[1:]
    insert_results = store._insert_results

    def stalled(*args, **kwargs):
        insert_results(*args, **kwargs)  # every row is written, nothing committed
        Path(ready).touch()
        time.sleep(600)

    store._insert_results = stalled
    store.Leaderboard(db).submit(load_submission(results)[0])
"""


def test_a_submitter_killed_mid_transaction_leaves_no_trace(base, tmp_path):
    db, ready = tmp_path / "lb.db", tmp_path / "ready"
    lb = Leaderboard(db)
    kept = lb.submit(with_successes(base, 5))
    victim = with_successes(base, 6)
    (tmp_path / "victim.json").write_text(json.dumps(victim))
    proc = run_python(KILLED_INSIDE_THE_TRANSACTION, tmp_path / "victim.json", db, ready)
    try:
        wait_for(ready, proc)
        assert [r["id"] for r in lb.rows()] == [kept]  # WAL: readers pass the open write
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    lb.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert counts(db) == (1, 1, 1)
    lb = Leaderboard(db)
    assert [r["id"] for r in lb.rows()] == [kept]
    again = lb.submit(victim)  # the write lock died with the process
    assert [r["id"] for r in lb.rows()] == [again, kept]


# ---------------------------------------------------------------------------- migrations

VERSION_1 = [
    """CREATE TABLE submissions (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,
        submitted_at TEXT NOT NULL, content_hash TEXT NOT NULL UNIQUE,
        agent_name TEXT NOT NULL, agent_spec TEXT NOT NULL, checkpoint_sha256 TEXT,
        envs TEXT NOT NULL, split TEXT NOT NULL, root_seed INTEGER NOT NULL,
        seeds INTEGER NOT NULL, episodes_per_seed INTEGER NOT NULL,
        bootstrap_seed INTEGER NOT NULL, bootstrap_reps INTEGER NOT NULL)""",
    """CREATE TABLE documents (submission_id INTEGER PRIMARY KEY
        REFERENCES submissions (id) ON DELETE CASCADE, encoding TEXT NOT NULL,
        body BLOB NOT NULL)""",
    """CREATE TABLE results (submission_id INTEGER NOT NULL
        REFERENCES submissions (id) ON DELETE CASCADE, env_id TEXT NOT NULL,
        n INTEGER NOT NULL, mean REAL NOT NULL, iqm REAL NOT NULL, ci_low REAL NOT NULL,
        ci_high REAL NOT NULL, by_task_type TEXT NOT NULL, PRIMARY KEY (submission_id, env_id))""",
    "CREATE INDEX results_by_env ON results (env_id, mean DESC, ci_low DESC)",
    """INSERT INTO submissions VALUES (1, 'old', '2025-01-01T00:00:00+00:00', 'abc', 'random',
        'random', NULL, '[]', 'test', 0, 2, 1, 0, 2000)""",
    f"""INSERT INTO results VALUES (1, '{MENU}', 2, 0.5, 0.5, 0.0, 1.0, '{{}}')""",
    "PRAGMA user_version = 1",
]


def user_version(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def test_a_version_1_database_is_upgraded_in_place(base, tmp_path):
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        for statement in VERSION_1:
            conn.execute(statement)
    lb = Leaderboard(db)
    assert user_version(db) == SCHEMA_VERSION == 5
    (row,) = lb.rows()
    assert (row["id"], row["name"], row["mean"], row["verified"]) == (1, "old", 0.5, None)
    lb.set_verified(1, True, "checked")
    assert lb.detail(1)["verified"] is True
    assert lb.submit(copy.deepcopy(base)) == 2


VERSION_2 = [
    *VERSION_1[:4],  # the version 1 tables and index, without their rows
    "ALTER TABLE submissions ADD COLUMN verified INTEGER",
    "ALTER TABLE submissions ADD COLUMN verify_note TEXT",
    "ALTER TABLE submissions ADD COLUMN verified_at TEXT",
    "PRAGMA user_version = 2",
]


def version_2_canonical(doc: dict) -> bytes:
    """The canonical JSON of version 2: UTF-8, non-ASCII characters not escaped."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def store_as_version_2(conn: sqlite3.Connection, sid: int, name: str, doc: dict) -> str:
    """Insert ``doc`` as version 2 of the store did; its content hash of then."""
    body = version_2_canonical(doc)
    digest = hashlib.sha256(body).hexdigest()
    agent, boot = doc["agent"], doc["bootstrap"]
    row = [sid, name, "2025-01-01T00:00:00+00:00", digest, agent["name"], agent["spec"]]
    row += [agent["checkpoint_sha256"], json.dumps(doc["envs"]), doc["split"], doc["root_seed"]]
    row += [doc["seeds"], doc["episodes_per_seed"], boot["seed"], boot["reps"], None, None, None]
    conn.execute(f"INSERT INTO submissions VALUES ({', '.join('?' * len(row))})", row)
    conn.execute("INSERT INTO documents VALUES (?, 'zlib+json', ?)", (sid, zlib.compress(body)))
    for env_id, a in sorted(doc["aggregates"].items()):
        row = [sid, env_id, a["n"], a["mean"], a["iqm"], a["ci_low"], a["ci_high"]]
        row.append(json.dumps(a["by_task_type"]))
        conn.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    return digest


def test_a_version_2_database_is_migrated(base, tmp_path):
    """Hashes of non-ASCII documents are recomputed, summaries move into JSON; the board, the
    details and duplicate detection stay as they were."""
    docs = {
        "oráculo ✓": with_successes(base, 9),
        "eight": with_successes(base, 8),
        "eight again": with_successes(base, 8, tweak=1),
        "none": with_successes(base, 0),
    }
    docs = {name: before_ci_method(doc) for name, doc in docs.items()}  # files of that time
    docs["oráculo ✓"]["agent"]["name"] = "oráculo"
    old, fresh = tmp_path / "v2.db", tmp_path / "fresh.db"
    with sqlite3.connect(old) as conn:
        for statement in VERSION_2:
            conn.execute(statement)
        hashes = [store_as_version_2(conn, i, n, d) for i, (n, d) in enumerate(docs.items(), 1)]
    assert hashes[0] != content_hash(docs["oráculo ✓"])  # the case the migration is for
    assert hashes[1] == content_hash(docs["eight"])
    migrated = Leaderboard(old)
    assert user_version(old) == SCHEMA_VERSION
    with sqlite3.connect(old) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(results)")]
    assert columns == ["submission_id", "env_id", "n", "mean", "ci_low", "ci_high", "summary"]
    board = Leaderboard(fresh)
    for name, doc in docs.items():
        board.submit(copy.deepcopy(doc), name=name)
    assert migrated.rows() == board.rows()
    assert [r["tied"] for r in migrated.rows()] == [False, True, True, False]
    for sid, doc in enumerate(docs.values(), 1):
        detail = migrated.detail(sid)
        assert detail["aggregates"] == doc["aggregates"]
        assert detail["content_hash"] == content_hash(doc)
        assert {**detail, "submitted_at": None} == {**board.detail(sid), "submitted_at": None}
        assert migrated.document(sid) == doc
    with pytest.raises(BadSubmission, match="already submitted as #1 \\(oráculo ✓\\)"):
        migrated.submit(copy.deepcopy(docs["oráculo ✓"]))
    assert migrated.submit(with_successes(base, 3)) == 5


def test_a_version_4_database_keeps_every_entry_and_finds_duplicates(base, tmp_path, monkeypatch):
    """Before version 5 a rerun (other timings) was stored again; both entries stay, and
    submitting either once more names the first."""
    rerun = copy.deepcopy(base)
    rerun["episodes"][0]["seconds"] += 1.0
    docs = {"first": copy.deepcopy(base), "rerun": rerun, "three": with_successes(base, 3)}
    db = tmp_path / "v4.db"
    with sqlite3.connect(db) as conn:
        for statement in VERSION_2:
            conn.execute(statement)
        for sid, (name, doc) in enumerate(docs.items(), 1):
            store_as_version_2(conn, sid, name, doc)
    with monkeypatch.context() as m:  # this version's code up to version 4
        m.setattr(store, "MIGRATIONS", store.MIGRATIONS[:4])
        m.setattr(store, "SCHEMA_VERSION", 4)
        Leaderboard(db).close()
    assert user_version(db) == 4
    lb = Leaderboard(db)
    assert user_version(db) == SCHEMA_VERSION
    assert sorted(r["name"] for r in lb.rows()) == ["first", "rerun", "three"]
    assert [lb.document(sid) for sid in (1, 2, 3)] == list(docs.values())
    for doc in (base, rerun):
        with pytest.raises(AlreadySubmitted, match="already submitted as #1 \\(first\\)"):
            lb.submit(copy.deepcopy(doc))
    with pytest.raises(AlreadySubmitted, match="#3 \\(three\\)"):
        lb.submit(with_successes(base, 3))
    assert lb.submit(with_successes(base, 4)) == 4
    assert counts(db) == (4, 4, 4)


def test_a_version_0_file_gets_every_migration(base, tmp_path):
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()
    assert user_version(db) == 0
    Leaderboard(db).submit(copy.deepcopy(base))
    assert user_version(db) == SCHEMA_VERSION


def test_a_failing_migration_rolls_back_alone(tmp_path, monkeypatch):
    db = tmp_path / "lb.db"
    Leaderboard(db).close()

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("migration bug")

    monkeypatch.setattr(store, "MIGRATIONS", (*store.MIGRATIONS, broken))
    monkeypatch.setattr(store, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(RuntimeError, match="migration bug"):
        Leaderboard(db)
    assert user_version(db) == SCHEMA_VERSION
    with sqlite3.connect(db) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert "half_done" not in tables


def test_a_newer_database_is_refused(tmp_path):
    db = tmp_path / "new.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(BadInput, match="schema version 99, newer than this agentgym's 5"):
        Leaderboard(db)


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    db = tmp_path / "not.db"
    db.write_text("hello, this is not SQLite " * 10)
    with pytest.raises(BadInput, match="cannot open the leaderboard database"):
        Leaderboard(db)
