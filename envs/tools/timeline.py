"""An episode's time: the agent writing, calls running (sync or as futures), virtual or real.

Synchronous: the agent writes its action, then waits for each call in turn. Asynchronous
(``overlap="turn"``): calls are issued as their blocks are written and the turn's
observation gathers them all. Asynchronous across turns (``overlap="cross"``): a future
outlives its turn; an action first waits for the pending futures whose results it uses
(:func:`~agentgym.envs.tools.scheduler.data_deps`), then is written, and its observation
holds whatever has finished by then. The virtual clock (ms) is what ``clock_ms`` reports; a
:class:`~agentgym.envs.tools.realclock.RealClock` makes the same durations really pass.
"""

from __future__ import annotations

from typing import Any

from agentgym.envs.tools.latency import LatencyModel
from agentgym.envs.tools.realclock import RealClock
from agentgym.envs.tools.scheduler import Future, Scheduler, conflicts, data_deps


class Timeline:
    """The clock of one episode (see the module docstring)."""

    def __init__(
        self, model: LatencyModel, async_calls: bool, overlap: str, real: RealClock | None
    ):
        """Start at 0 ms with no calls."""
        self.model = model
        self.overlap = overlap
        self.real = real
        self.scheduler = Scheduler() if async_calls else None
        self.clock = 0.0  # sync mode's virtual ms
        self._turn_start = 0.0
        self._written = 0.0  # ms of the current action written so far (real clock)

    @property
    def now(self) -> float:
        """The virtual time in ms."""
        return self.scheduler.now if self.scheduler is not None else self.clock

    def tick(self, ms: float) -> None:
        """The agent writes for ``ms`` (an action without calls)."""
        if self.scheduler is not None:
            self.scheduler.advance(ms)
        else:
            self.clock = round(self.clock + ms, 3)
        if self.real is not None:
            self.real.sleep(ms)

    def await_used(self, used: Any, visible: str) -> list[Future]:
        """Across turns: wait for the pending futures ``used`` takes values from; delivered."""
        if self.scheduler is None or self.overlap != "cross":
            return []
        needed = data_deps(used, self.scheduler.pending(), visible)
        if not needed:
            return []
        self.scheduler.now = max(self.scheduler.now, max(f.finish for f in needed))
        return self._deliver("none")

    def begin_turn(self, elapsed: float) -> None:
        """An action with calls, ``elapsed`` ms long, starts being written now."""
        self._turn_start, self._written = self.now, 0.0
        if self.real is not None and self.scheduler is None:
            self.real.sleep(elapsed)  # sync: the whole action is written before any call

    def call(
        self,
        name: str,
        paths: tuple[list[str], list[str]],
        latency: float,
        result: str,
        ok: bool,
        end: int,
    ) -> Future | None:
        """Run a call whose block ends at character ``end``; its future when asynchronous."""
        if self.scheduler is None:
            self.clock = round(self.clock + latency, 3)
            if self.real is not None:
                self.real.sleep(latency)
            return None
        issued = self.model.issued_ms(end)
        if self.real is not None:
            self.real.sleep(issued - self._written)
            self._written = issued
        self.scheduler.now = round(self._turn_start + issued, 3)
        future = self.scheduler.submit(name, paths[0], paths[1], latency, result, ok)
        if self.real is not None:
            before = [
                f.id
                for f in self.scheduler.futures[:-1]
                if conflicts(f.reads, f.writes, future.reads, future.writes)
            ]
            self.real.submit(future.id, latency, before)
        return future

    def end_turn(self, elapsed: float) -> list[Future]:
        """The action is written: the futures the observation delivers (async)."""
        if self.scheduler is None:
            self.clock = round(self.clock + elapsed, 3)  # the writing, then each call
            return []
        if self.real is not None:
            self.real.sleep(elapsed - self._written)
        self.scheduler.now = round(self._turn_start + elapsed, 3)
        return self._deliver("all" if self.overlap == "turn" else "none")

    def wait_next(self) -> list[Future]:
        """Across turns, after a wait action: the next results (at least one if pending)."""
        if self.scheduler is None or not self.scheduler.pending():
            return []
        return self._deliver("any")

    def finish(self) -> None:
        """The episode ends: every call finishes first."""
        if self.scheduler is not None:
            self._deliver("all")

    def _deliver(self, wait: str) -> list[Future]:
        assert self.scheduler is not None
        done = self.scheduler.collect(wait=wait)
        if self.real is not None:
            self.real.join([f.id for f in done])
        return done
