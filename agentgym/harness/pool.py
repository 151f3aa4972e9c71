"""Warm worker pools: started once, reused by every run until closed.

Two kinds with one interface, :class:`Pool` (``run(units)`` yields each episode's outcome as
it ends; ``close()``; a context manager):

* :class:`LocalPool` plays in this process;
* :class:`ProcessPool` keeps ``workers`` spawned processes, each with the package imported,
  and hands them one unit at a time, so spawning and importing are paid once per pool, not
  once per evaluation.

Every worker keeps the envs it builds (:class:`~agentgym.harness.worker.EnvCache`) for the
pool's life and builds each unit's agent fresh, so a record does not depend on which worker
played it, how many there are, or what they played before.

A worker process that dies (killed, out of memory, a crash in native code) is replaced: the
episode it was playing is recorded as errored (``WorkerDied``), and the rest of its unit goes
back to the queue, so the run goes on.

    with ProcessPool(workers=2) as pool:
        for step in range(10):
            evaluate(ckpt(step), [env_id], seeds=20, pool=pool)  # the same two processes
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from multiprocessing.util import Finalize
from types import TracebackType

from agentgym.core.errors import AgentGymError, BadInput
from agentgym.harness.episode import errored_record
from agentgym.harness.worker import EnvCache, Outcome, Unit, iter_unit

POOL_BACKENDS = ("local", "process")
"""The backends a warm pool runs on (Ray keeps its own workers; see ``runner.ray_session``)."""


class Pool:
    """Workers that play units of episodes, kept until :meth:`close` (or the ``with`` ends).

    Attributes:
        workers: how many units it plays at once.
        startup_s: seconds it took to start (spawning and importing; 0 in this process).
    """

    workers: int = 1
    startup_s: float = 0.0

    @property
    def pids(self) -> list[int]:
        """The process id of each worker."""
        raise NotImplementedError

    def run(self, units: Iterable[Unit]) -> Iterator[Outcome]:
        """Play ``units``; yield each episode's outcome as soon as it ends (in no fixed order)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the workers and close their envs; idempotent."""
        raise NotImplementedError

    def __enter__(self) -> Pool:
        """The pool itself."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the pool."""
        self.close()


class LocalPool(Pool):
    """Units played one after another in this process, on envs kept between them."""

    def __init__(self) -> None:
        """No process to start: the envs are built as units need them."""
        self._envs = EnvCache()
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """This process's id."""
        return [os.getpid()]

    def run(self, units: Iterable[Unit]) -> Iterator[Outcome]:
        """Play ``units`` in order, yielding each episode's outcome as it ends.

        Raises:
            RuntimeError: the pool is closed.
        """
        if self._closed:
            raise RuntimeError("the pool is closed")
        for unit in units:
            yield from iter_unit(unit, self._envs)

    def close(self) -> None:
        """Close the kept envs; idempotent."""
        self._closed = True
        self._envs.close()


@dataclass
class _Worker:
    """The parent's view of one worker process: its pipe, and the unit it is playing."""

    process: BaseProcess
    conn: Connection
    ready: bool = False
    unit: Unit | None = None
    played: int = 0  # episodes of ``unit`` received so far


class ProcessPool(Pool):
    """``workers`` spawned processes kept warm between runs (see the module's docstring).

    ``spawn``: workers must not inherit threads (torch, faiss) or locks from the parent. A
    worker sees the parent's ``sys.path`` and environment as they were when it started.
    """

    def __init__(self, workers: int) -> None:
        """Start the workers and wait until each has imported the package.

        Raises:
            BadInput: ``workers`` is below 1.
            AgentGymError: a worker died before it was ready.
        """
        if workers < 1:
            raise BadInput(f"--workers must be at least 1, got {workers}")
        self.workers = workers
        self._context = get_context("spawn")
        self._running = False
        start = time.perf_counter()
        self._slots = [self._spawn() for _ in range(workers)]
        # registered at once: an interpreter that exits with the pool open still stops them
        self._finalizer = Finalize(self, _shutdown, args=(self._slots,), exitpriority=10)
        for slot in self._slots:
            self._await_ready(slot)
        self.startup_s = time.perf_counter() - start

    @property
    def pids(self) -> list[int]:
        """The process id of each worker (a replaced worker's successor in its place)."""
        return [int(slot.process.pid or 0) for slot in self._slots]

    def run(self, units: Iterable[Unit]) -> Iterator[Outcome]:
        """Play ``units`` on the workers, one unit per idle worker, outcomes as they arrive.

        A run left unfinished (an exception, Ctrl-C, the caller stops reading) kills the
        workers still busy with it; the next run starts their successors, so it starts clean.

        Raises:
            RuntimeError: the pool is closed, or another run on it is still going.
            Exception: what a unit raised outside its episodes (the env or agent could not
                be built), as the in-process backend would raise it.
        """
        if not self._finalizer.still_active():
            raise RuntimeError("the pool is closed")
        if self._running:
            raise RuntimeError("a pool plays one run at a time")
        self._running = True
        todo = deque(units)
        for i, slot in enumerate(self._slots):
            if slot.conn.closed:  # retired by an unfinished run
                self._slots[i] = self._spawn()
        try:
            while todo or any(slot.unit is not None for slot in self._slots):
                self._dispatch(todo)
                ready = wait([o for s in self._slots for o in (s.conn, s.process.sentinel)])
                for slot in list(self._slots):
                    if slot.conn in ready or slot.process.sentinel in ready:
                        yield from self._receive(slot, todo)
        finally:
            self._running = False
            for slot in self._slots:
                if slot.unit is not None:
                    _retire(slot, kill=True)

    def close(self) -> None:
        """Ask every worker to stop, wait for it (kill it if it hangs); idempotent."""
        self._finalizer()

    def _spawn(self) -> _Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(child,), name="agentgym-worker")
        process.start()
        child.close()  # the parent's copy: EOF reaches the parent when the worker exits
        return _Worker(process, parent)

    def _await_ready(self, slot: _Worker) -> None:
        try:
            kind, _ = slot.conn.recv()
        except (EOFError, OSError):
            slot.process.join()
            code = slot.process.exitcode
            raise AgentGymError(
                f"a harness worker died while starting (exit code {code})"
            ) from None
        slot.ready = kind == "ready"

    def _dispatch(self, todo: deque[Unit]) -> None:
        """Hand the next units to the idle workers."""
        for slot in self._slots:
            if todo and slot.ready and slot.unit is None:
                unit = todo.popleft()
                try:
                    slot.conn.send(unit)
                except OSError:  # died while idle: its death is handled when seen
                    todo.appendleft(unit)
                    continue
                slot.unit, slot.played = unit, 0

    def _receive(self, slot: _Worker, todo: deque[Unit]) -> Iterator[Outcome]:
        """Everything ``slot`` has sent; then, if it has died, its replacement."""
        gone = False
        while True:
            try:
                if not slot.conn.poll():
                    break
                kind, payload = slot.conn.recv()
            except (EOFError, OSError):
                gone = True  # the worker has exited; what it sent before is read already
                break
            if kind == "ready":
                slot.ready = True
            elif kind == "episode":
                slot.played += 1
                yield payload
            elif kind == "done":
                slot.unit = None
            elif kind == "raise":
                slot.unit = None
                raise payload
        if not gone and slot.process.is_alive():
            return
        slot.process.join()
        if not slot.ready:
            self._replace(slot, kill=False)
            code = slot.process.exitcode
            raise AgentGymError(f"a harness worker died while starting (exit code {code})")
        lost = _lost_episode(slot, todo)
        self._replace(slot, kill=False)
        if lost is not None:
            yield lost

    def _replace(self, slot: _Worker, *, kill: bool) -> None:
        """Put a freshly spawned worker in ``slot``'s place (killing ``slot`` first if asked)."""
        _retire(slot, kill=kill)
        self._slots[self._slots.index(slot)] = self._spawn()


def _retire(slot: _Worker, *, kill: bool) -> None:
    """Reap ``slot``'s worker (killed first if asked) and close its pipe."""
    if kill and slot.process.is_alive():
        slot.process.kill()
    slot.process.join()
    slot.conn.close()
    slot.unit, slot.ready = None, False


def _lost_episode(slot: _Worker, todo: deque[Unit]) -> Outcome | None:
    """The errored outcome of the episode a dead worker was playing; its unit's rest re-queued."""
    unit = slot.unit
    if unit is None or slot.played >= len(unit.episodes):
        return None
    episode, seed = unit.episodes[slot.played]
    rest = unit.episodes[slot.played + 1 :]
    if rest:
        todo.appendleft(replace(unit, episodes=rest))
    why = f"WorkerDied: the worker process {slot.process.pid} exited with code "
    record = errored_record(unit.env_id, unit.run, episode, seed, why + str(slot.process.exitcode))
    return record, ([] if unit.transcripts else None)


def _shutdown(slots: list[_Worker]) -> None:
    """Stop ``slots``' workers: ask, wait a little, then terminate and kill what remains."""
    for slot in slots:
        with contextlib.suppress(OSError):  # already gone
            slot.conn.send(None)
    for slot in slots:
        slot.process.join(timeout=5)
        if slot.process.is_alive():
            slot.process.kill()
            slot.process.join()
        slot.conn.close()


class _ParentGone(Exception):
    """The parent's end of the pipe is closed: nobody is left to report to."""


def _send(conn: Connection, message: tuple[str, object]) -> None:
    try:
        conn.send(message)
    except OSError as e:  # BrokenPipeError, ConnectionResetError
        raise _ParentGone from e


def _serve(conn: Connection) -> None:
    """A worker's life: report ready, then play each unit sent until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    envs = EnvCache()
    try:
        _send(conn, ("ready", os.getpid()))
        while True:
            try:
                unit = conn.recv()
            except (EOFError, OSError):  # the parent has gone
                return
            if unit is None:
                return
            try:
                for outcome in iter_unit(unit, envs):
                    _send(conn, ("episode", outcome))
            except _ParentGone:
                raise
            except Exception as e:
                _send(conn, ("raise", _portable(e)))
            else:
                _send(conn, ("done", None))
    except _ParentGone:
        return
    finally:
        envs.close()


def _portable(error: Exception) -> Exception:
    """``error`` if it survives pickling, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def open_pool(backend: str = "local", workers: int = 1) -> Pool:
    """A started pool: :class:`LocalPool` for ``"local"``, :class:`ProcessPool` for ``"process"``.

    Raises:
        BadInput: another backend, or ``workers`` below 1.
    """
    if workers < 1:
        raise BadInput(f"--workers must be at least 1, got {workers}")
    if backend == "local":
        return LocalPool()
    if backend == "process":
        return ProcessPool(workers)
    raise BadInput(f"a warm pool runs on {' or '.join(POOL_BACKENDS)}, not {backend!r}")
