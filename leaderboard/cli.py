"""The leaderboard's commands, reached by ``agentgym`` through its table of import strings.

Each function does what its ``agentgym`` subcommand promises and prints on
:data:`agentgym.terminal.out`; argument parsing stays in :mod:`agentgym.cli`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from agentgym.leaderboard.server import serve as serve_app
from agentgym.leaderboard.store import Leaderboard
from agentgym.leaderboard.validate import load_submission
from agentgym.leaderboard.verify import verify as run_verify
from agentgym.terminal import out, print_json


def submit(results: Path, name: str | None, db: Path | None) -> None:
    """Validate a results file, add it to the leaderboard and print its rank."""
    doc, _ = load_submission(results)
    lb = Leaderboard(db)
    sid = lb.submit(doc, name=name)
    for row in lb.rows():
        if row["id"] == sid:
            out.print(f"submission {sid}: rank {row['rank']} on {row['env_id']}")


def show(env: str | None, db: Path | None, as_json: bool) -> None:
    """Print the submissions ranked per env (a table, or one JSON document)."""
    rows = Leaderboard(db).rows(env)
    if as_json:
        print_json(rows)
        return
    table = Table("env", "rank", "id", "name", "agent", "mean", "95% CI", "n", "tied", "verified")
    for r in rows:
        verified = {None: "", True: "yes", False: "[red]no[/red]"}[r["verified"]]
        table.add_row(
            r["env_id"],
            str(r["rank"]),
            str(r["id"]),
            escape(r["name"]),
            escape(r["agent"]),
            f"{r['mean']:.3f}",
            f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
            str(r["n"]),
            "tied" if r["tied"] else "",
            verified,
        )
    out.print(table)


def serve(db: Path | None, port: int, host: str) -> None:
    """Serve the read-only web page until interrupted."""
    out.print(f"serving http://{host}:{port}/ (Ctrl-C to stop)")
    serve_app(db, port=port, host=host)


def verify(submission_id: int, sample: int, db: Path | None, as_json: bool) -> bool:
    """Replay a sample of a submission's episodes; True when every transcript hash matched."""
    doc = run_verify(Leaderboard(db), submission_id, sample=sample)
    if as_json:
        print_json(doc)
    else:
        out.print(f"submission {submission_id}: {doc['note']}")
    return bool(doc["verified"])


def publish(db: Path, results: dict[str, dict[str, Any]]) -> None:
    """Submit each named results document to a fresh leaderboard at ``db`` and print it.

    Any earlier database at ``db`` is removed first, so running twice submits nothing twice.
    """
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    lb = Leaderboard(db)
    for name, doc in results.items():
        lb.submit(doc, name=name)
    show(None, db, as_json=False)
