"""The leaderboard's commands, reached by ``agentgym`` through its table of import strings.

Each function does what its ``agentgym`` subcommand promises and prints on
:data:`agentgym.terminal.out`; argument parsing stays in :mod:`agentgym.cli`.
"""

from __future__ import annotations

from pathlib import Path
from shlex import quote
from typing import Any

from rich.markup import escape
from rich.table import Table

from agentgym.leaderboard.server import serve as serve_app
from agentgym.leaderboard.store import Leaderboard, default_path
from agentgym.leaderboard.validate import AlreadySubmitted, load_submission
from agentgym.leaderboard.verify import verify as run_verify
from agentgym.terminal import out, print_json


def submit(results: Path, name: str | None, db: Path | None) -> None:
    """Validate a results file, add it to the leaderboard and print its rank.

    A result stored already is not stored again: the entry that holds it is named instead.
    """
    doc, _ = load_submission(results)
    lb = Leaderboard(db)
    try:
        sid = lb.submit(doc, name=name)
    except AlreadySubmitted as e:
        sid = e.submission_id
        out.print(f"already submitted as {sid} ({escape(e.name)}): not stored again")
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


def publish(db: Path | None, results: dict[str, dict[str, Any]]) -> None:
    """Submit each named results document to the leaderboard at ``db`` and print its board.

    Args:
        db: the database; None for the default one (``agentgym leaderboard``'s).
        results: results documents by the names they get on the board.

    A document stored already is not stored again, so running twice submits nothing twice.
    Ends with the command that shows these envs' board.
    """
    lb = Leaderboard(db)
    for name, doc in results.items():
        try:
            sid = lb.submit(doc, name=name)
            out.print(f"submitted {escape(name)} as {sid}")
        except AlreadySubmitted as e:
            out.print(f"{escape(name)}: already submitted as {e.submission_id} ({escape(e.name)})")
    envs = sorted({env["id"] for doc in results.values() for env in doc["envs"]})
    for env in envs:
        show(env, lb.path, as_json=False)
    default = lb.path.resolve() == default_path().resolve()
    where = "" if default else f" --db {quote(str(lb.path.resolve()))}"
    only = f" --env {quote(envs[0])}" if len(envs) == 1 else ""
    for what, command in (
        ("show this board", f"agentgym leaderboard{only}{where}"),
        ("in a browser", f"agentgym leaderboard serve{where}"),
    ):  # soft_wrap: a long path stays on one line, ready to copy
        out.print(f"{what}: {escape(command)}", highlight=False, soft_wrap=True)
