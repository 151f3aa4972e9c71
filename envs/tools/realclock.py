"""Real-clock mode: tool calls and the agent's writing really sleep, for measuring wall time.

The virtual timeline (:mod:`agentgym.envs.tools.scheduler`) still decides what each
observation holds, so transcripts are the same in both modes; this clock only makes the time
pass. Every virtual millisecond sleeps ``scale`` real milliseconds. A synchronous call sleeps
in the step; an asynchronous one sleeps on a worker thread after the calls it must follow
(conflicting ones) have finished, and the env blocks on a future only when the virtual
timeline delivers its result. Snapshots carry the virtual timeline only: a restored episode's
earlier calls count as finished.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor, wait


class RealClock:
    """Sleeps virtual durations (ms) times ``scale``, calls on a thread pool."""

    def __init__(self, scale: float, workers: int = 16):
        """Sleep ``scale`` real ms per virtual ms; run at most ``workers`` calls at once."""
        self.scale = scale
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._running: dict[str, Future[None]] = {}

    def sleep(self, ms: float) -> None:
        """Let ``ms`` virtual milliseconds pass for real."""
        if ms > 0:
            time.sleep(ms * self.scale / 1e3)

    def submit(self, future_id: str, latency_ms: float, after: list[str]) -> None:
        """Start a call that sleeps ``latency_ms`` once the futures in ``after`` are done."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="tool-call")
        blockers = [self._running[i] for i in after if i in self._running]
        self._running[future_id] = self._pool.submit(self._call, latency_ms, blockers)

    def _call(self, latency_ms: float, blockers: list[Future[None]]) -> None:
        wait(blockers)
        self.sleep(latency_ms)

    def join(self, future_ids: list[str]) -> None:
        """Block until the named calls have finished (unknown ids count as finished)."""
        wait([self._running.pop(i) for i in future_ids if i in self._running])

    def reset(self) -> None:
        """Wait for every running call, then forget them (a new episode starts)."""
        self.join(list(self._running))
