"""The journal: episode records streamed to disk as they finish.

A run killed at any point resumes with no episode lost or duplicated.

``F.journal`` is JSON Lines: the run's identity first, then one record per line, flushed as
each episode ends. When the run completes, the full results file ``F`` is written atomically
and the journal removed. A half-written last line (a kill mid-write) is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from agentgym.core.errors import BadInput
from agentgym.harness.results import EpisodeRecord


def journal_path(out: Path) -> Path:
    """Where the journal of results file ``out`` lives."""
    return out.with_name(out.name + ".journal")


def transcripts_path(out: Path) -> Path:
    """Where the transcripts of results file ``out`` go (``--transcripts``)."""
    return out.with_name(out.name + ".transcripts.jsonl")


def read_journal(path: Path) -> tuple[dict[str, Any] | None, list[EpisodeRecord]]:
    """The identity and the complete records of a journal (none if it does not exist)."""
    if not path.exists():
        return None, []
    lines = path.read_text().splitlines()
    parsed = []
    for i, line in enumerate(lines):
        try:
            parsed.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:
                break  # killed mid-write: the last record never finished
            raise BadInput(f"{path} is corrupt at line {i + 1}: delete it to start over") from None
    if not parsed:
        return None, []
    identity, records = parsed[0].get("identity"), [p["record"] for p in parsed[1:]]
    return identity, records


class Journal:
    """Appends records to a journal file, one flushed line each."""

    def __init__(self, path: Path, identity: dict[str, Any], records: list[EpisodeRecord]):
        """Start the journal afresh with ``identity`` and the records kept from before."""
        self.path = path
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w") as f:
                f.write(json.dumps({"identity": identity}) + "\n")
                for record in records:
                    f.write(json.dumps({"record": record}) + "\n")
            tmp.replace(path)
            self._file: IO[str] = path.open("a")
        except OSError as e:
            raise BadInput(f"cannot write {path}: {e.strerror or e}") from None

    def append(self, record: EpisodeRecord) -> None:
        """Add one record; it is on disk (in the OS cache) when this returns."""
        self._file.write(json.dumps({"record": record}) + "\n")
        self._file.flush()

    def close(self, *, remove: bool) -> None:
        """Close the file, deleting it once the results file holds everything."""
        self._file.close()
        if remove:
            self.path.unlink(missing_ok=True)
