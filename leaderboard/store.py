"""The leaderboard's SQLite store: one row per submission, one per (submission, env).

The database lives at ``$AGENTGYM_HOME/leaderboard.db`` unless a path is given. It runs in
WAL mode, so pages read while a submit writes, and with a busy timeout, so concurrent
submitters queue instead of failing. A submit is one transaction: a process killed halfway
leaves no trace of it. The whole results document is kept (zlib-compressed canonical JSON) so
that ``agentgym verify`` can replay its episodes later.

A submission is stored once: a results file whose :func:`validate.result_hash` (its canonical
JSON without the episodes' wall-clock ``seconds``) is already stored is refused with
:class:`AlreadySubmitted`, which names the entry that holds it.

A (submission, env) row keeps the columns that rank it (``n``, ``mean``, ``ci_low``,
``ci_high``) and the env's whole summary as JSON, so a statistic added to
:data:`agentgym.harness.stats.STATISTICS` needs no new column.

The schema is versioned with ``PRAGMA user_version``: :data:`MIGRATIONS` lists one function
per version, and opening a database applies the missing ones in order, each in its own
transaction. Append a function to change the schema; never edit one that has shipped.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentgym.core.canonical import canonical
from agentgym.core.errors import BadInput
from agentgym.core.paths import home
from agentgym.harness.results import EnvSummary, ResultsDoc
from agentgym.harness.stats import summary_fields
from agentgym.leaderboard.validate import (
    AlreadySubmitted,
    check_submission,
    content_hash,
    result_hash,
)

DB_NAME = "leaderboard.db"
BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another one to commit before giving up."""
MAX_NAME = 200
DOCUMENT_ENCODING = "zlib+json"
ZLIB_LEVEL = 3  # 2x faster than the default 6 on results files, 8% larger

Migration = Callable[[sqlite3.Connection], None]


# ---------------------------------------------------------------------------- migrations


def _v1_tables(conn: sqlite3.Connection) -> None:
    """Submissions, their documents and their per-env results."""
    conn.execute(
        """CREATE TABLE submissions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            submitted_at TEXT NOT NULL,
            content_hash TEXT NOT NULL UNIQUE,
            agent_name TEXT NOT NULL,
            agent_spec TEXT NOT NULL,
            checkpoint_sha256 TEXT,
            envs TEXT NOT NULL,
            split TEXT NOT NULL,
            root_seed INTEGER NOT NULL,
            seeds INTEGER NOT NULL,
            episodes_per_seed INTEGER NOT NULL,
            bootstrap_seed INTEGER NOT NULL,
            bootstrap_reps INTEGER NOT NULL
        )"""
    )
    # Documents apart, so that listing never pages through megabytes of episodes.
    conn.execute(
        """CREATE TABLE documents (
            submission_id INTEGER PRIMARY KEY REFERENCES submissions (id) ON DELETE CASCADE,
            encoding TEXT NOT NULL,
            body BLOB NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE results (
            submission_id INTEGER NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
            env_id TEXT NOT NULL,
            n INTEGER NOT NULL,
            mean REAL NOT NULL,
            iqm REAL NOT NULL,
            ci_low REAL NOT NULL,
            ci_high REAL NOT NULL,
            by_task_type TEXT NOT NULL,
            PRIMARY KEY (submission_id, env_id)
        )"""
    )
    conn.execute("CREATE INDEX results_by_env ON results (env_id, mean DESC, ci_low DESC)")


def _v2_verification(conn: sqlite3.Connection) -> None:
    """What ``agentgym verify`` found: NULL (never verified), 1 or 0, with a note."""
    conn.execute("ALTER TABLE submissions ADD COLUMN verified INTEGER")
    conn.execute("ALTER TABLE submissions ADD COLUMN verify_note TEXT")
    conn.execute("ALTER TABLE submissions ADD COLUMN verified_at TEXT")


def _v3_ascii_content_hash(conn: sqlite3.Connection) -> None:
    """Content hashes recomputed from the stored documents.

    Up to version 2 the hash was that of UTF-8 canonical JSON; it is now that of the one
    canonical JSON (ASCII, :func:`agentgym.core.canonical.canonical`), which differs for a
    document with non-ASCII text. Without this, such a document could be submitted twice.
    """
    stored = conn.execute("SELECT submission_id, encoding, body FROM documents").fetchall()
    for submission_id, encoding, body in stored:
        digest = content_hash(_decode(submission_id, encoding, body))
        conn.execute(
            "UPDATE submissions SET content_hash = ? WHERE id = ?", (digest, submission_id)
        )


def _v4_summary_json(conn: sqlite3.Connection) -> None:
    """Results keep their ranking columns and the whole summary as JSON.

    Version 3 had one column per statistic (``iqm``) plus ``by_task_type``; the summary JSON
    is rebuilt from exactly those columns, so a submission's detail does not change.
    """
    conn.execute(
        """CREATE TABLE results_v4 (
            submission_id INTEGER NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
            env_id TEXT NOT NULL,
            n INTEGER NOT NULL,
            mean REAL NOT NULL,
            ci_low REAL NOT NULL,
            ci_high REAL NOT NULL,
            summary TEXT NOT NULL,
            PRIMARY KEY (submission_id, env_id)
        )"""
    )
    old = conn.execute(
        "SELECT submission_id, env_id, n, mean, iqm, ci_low, ci_high, by_task_type FROM results"
    ).fetchall()
    for sid, env_id, n, mean, iqm, low, high, by_task_type in old:
        summary = {"n": n, "mean": mean, "iqm": iqm, "ci_low": low, "ci_high": high}
        summary["by_task_type"] = json.loads(by_task_type)
        conn.execute(
            "INSERT INTO results_v4 VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, env_id, n, mean, low, high, json.dumps(summary)),
        )
    conn.execute("DROP TABLE results")
    conn.execute("ALTER TABLE results_v4 RENAME TO results")
    conn.execute("CREATE INDEX results_by_env ON results (env_id, mean DESC, ci_low DESC)")


def _v5_result_hash(conn: sqlite3.Connection) -> None:
    """Each submission's :func:`validate.result_hash`, computed from its stored document.

    Two runs of one evaluation differ only in their timings, so their content hashes differ;
    the result hash makes the second a duplicate. It is not unique: a database may hold
    such pairs from before, and keeps both.
    """
    conn.execute("ALTER TABLE submissions ADD COLUMN result_hash TEXT")
    stored = conn.execute("SELECT submission_id, encoding, body FROM documents").fetchall()
    for submission_id, encoding, body in stored:
        digest = result_hash(_decode(submission_id, encoding, body))
        conn.execute("UPDATE submissions SET result_hash = ? WHERE id = ?", (digest, submission_id))
    conn.execute("CREATE INDEX submissions_by_result ON submissions (result_hash)")


MIGRATIONS: tuple[Migration, ...] = (
    _v1_tables,
    _v2_verification,
    _v3_ascii_content_hash,
    _v4_summary_json,
    _v5_result_hash,
)
"""``MIGRATIONS[i]`` brings a database from ``user_version`` i to i + 1."""
SCHEMA_VERSION = len(MIGRATIONS)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` around the block.

    Takes the write lock up front (waiting up to the busy timeout); rolls back on any
    exception.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: Path | str = "the database") -> int:
    """Apply the missing migrations, one transaction each; safe with concurrent openers.

    Returns:
        The schema version the database is at afterwards (:data:`SCHEMA_VERSION`).

    Raises:
        BadInput: the database was written by a newer agentgym.
    """
    while (version := _user_version(conn)) < SCHEMA_VERSION:
        with _transaction(conn):
            if _user_version(conn) != version:  # another process migrated meanwhile
                continue
            MIGRATIONS[version](conn)
            conn.execute(f"PRAGMA user_version = {version + 1:d}")  # PRAGMA takes no parameter
    if version > SCHEMA_VERSION:
        raise BadInput(
            f"{path} has leaderboard schema version {version}, newer than this agentgym's "
            f"{SCHEMA_VERSION}: upgrade agentgym or use another --db"
        )
    return version


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed), configure and migrate a leaderboard database.

    Raises:
        BadInput: the path cannot be opened as a database, or is from a newer agentgym.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are the explicit BEGIN/COMMIT of _transaction.
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
    except (sqlite3.DatabaseError, OSError) as e:
        raise BadInput(f"cannot open the leaderboard database {path}: {e}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000):d}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL: consistent after any crash
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn, path)
    except sqlite3.DatabaseError as e:
        conn.close()
        raise BadInput(f"cannot open the leaderboard database {path}: {e}") from None
    except BaseException:
        conn.close()
        raise
    return conn


# ---------------------------------------------------------------------------- inserts


def _insert_submission(
    conn: sqlite3.Connection, doc: Mapping[str, Any], name: str, digests: tuple[str, str]
) -> int:
    """One row of ``submissions``; ``digests`` are the content and the result hash."""
    agent = doc["agent"]
    cursor = conn.execute(
        """INSERT INTO submissions (name, submitted_at, content_hash, result_hash, agent_name,
            agent_spec, checkpoint_sha256, envs, split, root_seed, seeds, episodes_per_seed,
            bootstrap_seed, bootstrap_reps)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            name,
            _now(),
            *digests,
            agent["name"],
            agent["spec"],
            agent.get("checkpoint_sha256"),
            json.dumps(doc["envs"]),
            doc["split"],
            doc["root_seed"],
            _seeds(doc),
            doc["episodes_per_seed"],
            doc["bootstrap"]["seed"],
            doc["bootstrap"]["reps"],
        ),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _insert_document(conn: sqlite3.Connection, submission_id: int, body: bytes) -> None:
    conn.execute(
        "INSERT INTO documents (submission_id, encoding, body) VALUES (?, ?, ?)",
        (submission_id, DOCUMENT_ENCODING, body),
    )


def _insert_results(
    conn: sqlite3.Connection, submission_id: int, aggregates: Mapping[str, EnvSummary]
) -> None:
    """One row per env: its ranking columns and its summary as JSON."""
    conn.executemany(
        """INSERT INTO results (submission_id, env_id, n, mean, ci_low, ci_high, summary)
        VALUES (?, ?, ?, ?, ?, ?, ?)""",
        [
            (
                submission_id,
                env_id,
                summary["n"],
                summary["mean"],
                summary["ci_low"],
                summary["ci_high"],
                json.dumps(_stored_summary(summary)),
            )
            for env_id, summary in sorted(aggregates.items())
        ],
    )


def _stored_summary(summary: EnvSummary) -> dict[str, Any]:
    """The fields of a submitted summary that the board keeps, in summary order.

    Every field of :func:`agentgym.harness.stats.summary_fields` (checked against the
    episodes before storing; statistics as floats, as the ranking columns hold them), the
    interval's ``ci_method`` where the file names it, and ``by_task_type`` as submitted.
    """
    values: dict[str, Any] = dict(summary)
    kept = {f: values[f] if f == "n" else float(values[f]) for f in summary_fields()}
    if "ci_method" in values:
        kept["ci_method"] = values["ci_method"]
    return {**kept, "by_task_type": values.get("by_task_type", {})}


def _decode(submission_id: int, encoding: str, body: bytes) -> ResultsDoc:
    """A stored document from its row of ``documents`` (it passed the checks when stored).

    Raises:
        BadInput: an encoding this version does not know.
    """
    if encoding != DOCUMENT_ENCODING:
        raise BadInput(f"submission #{submission_id} is stored as {encoding!r}, unknown here")
    doc: ResultsDoc = json.loads(zlib.decompress(body))
    return doc


def _seeds(doc: Mapping[str, Any]) -> int:
    """Runs per env: the file's ``seeds``, or (older files) the number of runs played."""
    return int(doc.get("seeds") or 1 + max(ep["run"] for ep in doc["episodes"]))


def _sha256(data: bytes) -> str:
    """:func:`validate.content_hash` of the document whose canonical JSON is ``data``."""
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _verified(value: int | None) -> bool | None:
    return None if value is None else bool(value)


# ---------------------------------------------------------------------------- the store


def default_path() -> Path:
    """The database ``agentgym submit`` and ``agentgym leaderboard`` use without ``--db``."""
    return home() / DB_NAME


class Leaderboard:
    """A local leaderboard database.

    Args:
        path: the SQLite file; default ``$AGENTGYM_HOME/leaderboard.db``.

    One instance may be shared by threads (calls are serialised); processes open their own.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        """Open (creating and migrating if needed) the database at ``path``."""
        self.path = Path(path) if path is not None else default_path()
        self._conn = connect(self.path)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        """``Leaderboard('path')``."""
        return f"Leaderboard({str(self.path)!r})"

    def __enter__(self) -> Leaderboard:
        """The store itself; it closes at the end of the ``with`` block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the connection."""
        self.close()

    def close(self) -> None:
        """Close the connection (the instance is unusable afterwards)."""
        self._conn.close()

    # ------------------------------------------------------------------ writing

    def submit(self, doc: Mapping[str, Any], *, name: str | None = None) -> int:
        """Check a results document and store it in one transaction.

        Args:
            doc: a parsed results document (see :func:`validate.load_submission`).
            name: the name shown on the board; default the agent's name.

        Returns:
            The new submission id.

        Raises:
            AlreadySubmitted: the same result (by :func:`validate.result_hash`: whatever the
                file's formatting and timings) is stored already; it names that entry.
            BadSubmission: the document fails a check.
            BadInput: an empty or overlong name.
        """
        identity = result_hash(doc)
        with self._lock:  # cheap, so before the checks; repeated inside the transaction
            self._refuse_duplicate(identity)
        check_submission(doc)
        return self._insert(doc, _clean_name(name, doc), canonical(doc), identity)

    def _insert(
        self, doc: Mapping[str, Any], name: str, data: bytes, identity: str | None = None
    ) -> int:
        """Store a checked document given its canonical JSON ``data`` (half of :meth:`submit`).

        ``identity`` is its :func:`validate.result_hash`, computed when not given.
        """
        digests = (_sha256(data), identity or result_hash(doc))
        body = zlib.compress(data, ZLIB_LEVEL)
        with self._lock, _transaction(self._conn):
            self._refuse_duplicate(digests[1])
            submission_id = _insert_submission(self._conn, doc, name, digests)
            _insert_document(self._conn, submission_id, body)
            _insert_results(self._conn, submission_id, doc["aggregates"])
        return submission_id

    def _refuse_duplicate(self, identity: str) -> None:
        """Raise :class:`AlreadySubmitted` (naming the first) if ``identity`` is stored."""
        row = self._conn.execute(
            "SELECT id, name FROM submissions WHERE result_hash = ? ORDER BY id LIMIT 1",
            (identity,),
        ).fetchone()
        if row is not None:
            raise AlreadySubmitted(row[0], row[1])

    def set_verified(self, submission_id: int, ok: bool, note: str) -> None:
        """Record the outcome of ``agentgym verify``.

        Raises:
            BadInput: no such submission.
        """
        with self._lock, _transaction(self._conn):
            cursor = self._conn.execute(
                "UPDATE submissions SET verified = ?, verify_note = ?, verified_at = ? "
                "WHERE id = ?",
                (int(bool(ok)), note, _now(), submission_id),
            )
            if cursor.rowcount == 0:
                raise self._unknown(submission_id)

    # ------------------------------------------------------------------ reading

    def rows(self, env_id: str | None = None) -> list[dict[str, Any]]:
        """The board: one row per (submission, env), ranked within each env.

        Ranking is by mean descending, then ``ci_low`` descending, then id. ``tied`` says
        that the row's 95% interval overlaps the leader's (the leader itself is not tied).

        Args:
            env_id: only this env's rows; default every env, in env id order.

        Returns:
            JSON-able dicts ``{id, name, env_id, agent, mean, ci_low, ci_high, n, rank,
            tied, verified}``; ``agent`` is the agent's spec, ``verified`` is None until
            ``agentgym verify`` ran.
        """
        query = """SELECT s.id, s.name, r.env_id, s.agent_spec, r.mean, r.ci_low, r.ci_high,
                r.n, s.verified
            FROM results AS r JOIN submissions AS s ON s.id = r.submission_id"""
        args: tuple[Any, ...] = ()
        if env_id is not None:
            query += " WHERE r.env_id = ?"
            args = (env_id,)
        query += " ORDER BY r.env_id, r.mean DESC, r.ci_low DESC, s.id"
        with self._lock:
            fetched = self._conn.execute(query, args).fetchall()
        out: list[dict[str, Any]] = []
        leader: dict[str, Any] = {}
        for sid, name, env, agent, mean, low, high, n, verified in fetched:
            if not out or out[-1]["env_id"] != env:
                leader, rank = {"ci_low": low, "ci_high": high}, 1
            else:
                rank = out[-1]["rank"] + 1
            out.append(
                {
                    "id": sid,
                    "name": name,
                    "env_id": env,
                    "agent": agent,
                    "mean": mean,
                    "ci_low": low,
                    "ci_high": high,
                    "n": n,
                    "rank": rank,
                    "tied": rank > 1 and low <= leader["ci_high"] and high >= leader["ci_low"],
                    "verified": _verified(verified),
                }
            )
        return out

    def detail(self, submission_id: int) -> dict[str, Any]:
        """Everything the board knows about one submission, except its episodes.

        Returns:
            ``{id, name, submitted_at, content_hash, agent: {name, spec, checkpoint_sha256},
            envs, split, root_seed, seeds, episodes_per_seed, bootstrap: {seed, reps},
            aggregates: {env_id: {n, mean, iqm, ci_low, ci_high, ci_method?, by_task_type}},
            verified, verify_note, verified_at}``.

        Raises:
            BadInput: no such submission.
        """
        with self._lock:
            self._conn.row_factory = sqlite3.Row
            try:
                s = self._conn.execute(
                    "SELECT * FROM submissions WHERE id = ?", (submission_id,)
                ).fetchone()
                results = self._conn.execute(
                    "SELECT * FROM results WHERE submission_id = ? ORDER BY env_id",
                    (submission_id,),
                ).fetchall()
            finally:
                self._conn.row_factory = None
        if s is None:
            raise self._unknown(submission_id)
        return {
            "id": s["id"],
            "name": s["name"],
            "submitted_at": s["submitted_at"],
            "content_hash": s["content_hash"],
            "agent": {
                "name": s["agent_name"],
                "spec": s["agent_spec"],
                "checkpoint_sha256": s["checkpoint_sha256"],
            },
            "envs": json.loads(s["envs"]),
            "split": s["split"],
            "root_seed": s["root_seed"],
            "seeds": s["seeds"],
            "episodes_per_seed": s["episodes_per_seed"],
            "bootstrap": {"seed": s["bootstrap_seed"], "reps": s["bootstrap_reps"]},
            "aggregates": {r["env_id"]: json.loads(r["summary"]) for r in results},
            "verified": _verified(s["verified"]),
            "verify_note": s["verify_note"],
            "verified_at": s["verified_at"],
        }

    def document(self, submission_id: int) -> ResultsDoc:
        """The results document as submitted (episodes included), for ``agentgym verify``.

        Raises:
            BadInput: no such submission.
        """
        with self._lock:
            row = self._conn.execute(
                "SELECT encoding, body FROM documents WHERE submission_id = ?", (submission_id,)
            ).fetchone()
        if row is None:
            raise self._unknown(submission_id)
        return _decode(submission_id, *row)

    def env_ids(self) -> list[str]:
        """The env ids that have at least one submission, sorted."""
        with self._lock:
            fetched = self._conn.execute(
                "SELECT DISTINCT env_id FROM results ORDER BY env_id"
            ).fetchall()
        return [env_id for (env_id,) in fetched]

    def _unknown(self, submission_id: int) -> BadInput:
        return BadInput(
            f"no submission #{submission_id} in {self.path}: `agentgym leaderboard` lists them"
        )


def _clean_name(name: str | None, doc: Mapping[str, Any]) -> str:
    """The board name: given or the agent's, stripped, 1 to ``MAX_NAME`` characters."""
    chosen = (doc["agent"]["name"] if name is None else name).strip()
    if not chosen or len(chosen) > MAX_NAME:
        raise BadInput(f"--name must have 1 to {MAX_NAME} characters, got {len(chosen)}")
    return chosen
