"""Where the command line prints: one rich console for tables, one JSON writer, and progress.

Progress goes to stderr, so tables and ``--json`` documents on stdout stay clean. Long work
(the warm start, each RL step, evaluations, game generation, index building) reports through
:class:`Progress`: a bar with the time left on a terminal, and plain lines everywhere else
(CI logs, ``tee``, notebooks), where a bar would print nothing until it ends.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console

out = Console(highlight=False)
"""The console every command prints its tables and messages on."""
if not out.is_terminal:  # piped or captured: do not cut ids to 80 columns
    out.width = 160

EVERY = 20.0
"""Seconds between two plain progress lines of one phase at most (a line per minute at least)."""
MODES = ("auto", "bar", "lines", "off")
"""``AGENTGYM_PROGRESS``: auto (a bar on a terminal, else lines), bar, lines or off."""


def print_json(doc: Any) -> None:
    """Write exactly one JSON document on stdout (the ``--json`` contract)."""
    sys.stdout.write(json.dumps(doc, indent=1) + "\n")


def duration(seconds: float) -> str:
    """``75.2`` → ``"1m15s"``; ``3725`` → ``"1h02m"``; under a minute ``"42s"``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Progress of one long phase on stderr: time taken, and an estimate of the time left.

    On a terminal it is a rich bar (when no other bar is showing); elsewhere it writes plain
    lines: one when the phase starts, one at least every :data:`EVERY` seconds while it runs,
    one for each ``advance(..., line=True)`` (an RL step), and one when it ends. The
    environment variable ``AGENTGYM_PROGRESS`` (one of :data:`MODES`) overrides the choice.

    Use it as a context manager, or call :meth:`advance` without one (the first call starts
    it; a phase with no known end, such as games generated on demand, never needs closing).

    Args:
        label: what the phase is ("warm start (SFT)", "eval random on agentgym/...").
        total: units the phase will do; None when unknown (no bar, no estimate).
        unit: the units' name in lines ("steps", "episodes", "games").
        stream: where lines go (default: the current ``sys.stderr``).
        clock: seconds, monotonic (tests pass a fake one).
    """

    _bar_showing = False  # rich draws one live display at a time

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        unit: str = "steps",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """Prepare the phase; nothing is printed until it starts."""
        self.label, self.total, self.unit = label, total, unit
        self.done = 0
        self._stream, self._clock = stream, clock
        self._start: float | None = None
        self._last_line = 0.0
        self._fields = ""
        self._bar: Any = None
        self._mode = "off"

    def chosen_mode(self) -> str:
        """The mode: ``AGENTGYM_PROGRESS`` if set (bar, lines, off), else a bar on a terminal."""
        chosen = os.environ.get("AGENTGYM_PROGRESS", "auto").strip().lower()
        if chosen in ("bar", "lines", "off"):
            return chosen
        return "bar" if self.stream.isatty() else "lines"

    @property
    def stream(self) -> TextIO:
        """The stream lines go to (looked up late, so rich's redirection of stderr applies)."""
        return self._stream or sys.stderr

    def __enter__(self) -> Progress:
        """Start the phase."""
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: Any) -> None:
        """End the phase: the bar goes, one line says how long it took (or that it stopped)."""
        self.close(failed=kind is not None)

    def start(self) -> None:
        """Start the clock and the bar, or write the phase's first line."""
        if self._start is not None:
            return
        self._start = self._last_line = self._clock()
        self._mode = self.chosen_mode()
        if self._mode == "bar" and self.total and not Progress._bar_showing:
            self._bar = _rich_bar(self.label, self.total, self._stream)
            Progress._bar_showing = True
            return
        if self._mode == "bar":  # no end to show, or another bar on screen: lines above it
            self._mode = "lines"
        if self._mode == "lines":
            of = f" ({self.total:,} {self.unit})" if self.total else ""
            self._write(f"{self.label}: started{of}")

    def advance(self, n: int = 1, *, line: bool = False, **fields: float | str) -> None:
        """Count ``n`` units done; ``fields`` (``success=0.42``) are shown beside the count.

        Args:
            n: units done since the last call.
            line: write a plain line now (one per RL step), whatever the time since the last.
            fields: the latest values worth seeing (floats are shown with 3 decimals).
        """
        self.start()
        self.done += n
        self._fields = ", ".join(f"{k} {_fmt(v)}" for k, v in fields.items())
        if self._bar is not None:
            self._bar.update(self._bar.task_ids[0], advance=n, fields=self._fields)
        elif self._mode == "lines" and (line or self._clock() - self._last_line >= EVERY):
            self._write(self.status())

    def status(self) -> str:
        """``label: 340/2,000 steps, nll 0.412, 2m10s elapsed, about 10m35s left``."""
        elapsed = self._clock() - (self._start or self._clock())
        count = f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}"
        parts = [f"{count} {self.unit}"] + ([self._fields] if self._fields else [])
        parts.append(f"{duration(elapsed)} elapsed")
        if self.total and 0 < self.done < self.total:
            parts.append(f"about {duration(elapsed / self.done * (self.total - self.done))} left")
        return f"{self.label}: " + ", ".join(parts)

    def close(self, failed: bool = False) -> None:
        """Remove the bar and write one closing line."""
        if self._start is None:
            return
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
            Progress._bar_showing = False
        if self._mode != "off":
            elapsed = duration(self._clock() - self._start)
            end = "stopped" if failed else "done"
            fields = f" ({self._fields})" if self._fields and not failed else ""
            self._write(f"{self.label}: {end}, {self.done:,} {self.unit} in {elapsed}{fields}")
        self._start = None

    def _write(self, text: str) -> None:
        self._last_line = self._clock()
        self.stream.write(f"agentgym: {text}\n")
        self.stream.flush()


def _fmt(value: float | str) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _rich_bar(label: str, total: int, stream: TextIO | None) -> Any:
    """A started rich bar: label, bar, done/total, latest fields, elapsed and time left."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    console = Console(file=stream) if stream is not None else Console(stderr=True)
    bar = RichProgress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[fields]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    bar.add_task(label, total=total, fields="")
    bar.start()
    return bar
