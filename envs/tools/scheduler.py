"""Asynchronous, future-based tool calls on a virtual clock (AsyncFC's execution model).

A call returns a future at once. Calls whose resources conflict (one writes a path equal to,
above or below a path the other reads or writes: the read/write state tree) run in the order
they were issued; all others run concurrently. Each call's effect is applied to the backend
when it is issued, in issue order, which is equivalent to running conflicting calls in
order and the rest in any order: the final state always equals the synchronous run's.
Latencies come from a seeded model (:mod:`agentgym.envs.tools.latency`), so an episode's
timeline is deterministic.

Across turns (``overlap="cross"`` in the env): a future outlives the turn that issued it, and
an action waits only for the futures whose results it uses (:func:`data_deps`: a value that
only a still-running call's result holds), and a call only for those it conflicts with.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from agentgym.envs.tools.latency import LatencyModel

__all__ = ["Future", "LatencyModel", "Scheduler", "conflicts", "data_deps"]


def _related(a: str, b: str) -> bool:
    """Whether two resource paths are equal or one lies under the other."""
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return long.startswith(short + "/")


def conflicts(
    reads_a: list[str], writes_a: list[str], reads_b: list[str], writes_b: list[str]
) -> bool:
    """Whether two calls must run in issue order: one writes what the other touches."""
    return any(_related(w, p) for w in writes_a for p in [*reads_b, *writes_b]) or any(
        _related(w, p) for w in writes_b for p in reads_a
    )


@dataclass(frozen=True)
class Future:
    """One issued call: when it was issued, started and finished, and its result."""

    id: str
    name: str
    reads: list[str]
    writes: list[str]
    issued: float
    start: float
    finish: float
    result: Any
    ok: bool


def data_deps(used: Any, pending: list[Future], visible: str) -> list[Future]:
    """The pending futures whose results ``used`` (call arguments or a text) takes a value from.

    A value the agent has not been shown (``visible``: the request and the results delivered
    so far) can only have come from a result still on its way: a string or number of
    ``used``'s JSON leaves, or, for a text, any value of a pending result that it quotes.
    Results are the JSON texts the env renders.
    """
    if isinstance(used, str):
        return [
            f
            for f in pending
            if any(v in used and v not in visible for v in _leaves(json.loads(f.result)))
        ]
    values = [v for v in _leaves(used) if v not in visible]
    return [f for f in pending if any(v in f.result for v in values)]


def _leaves(value: Any) -> list[str]:
    """The JSON texts of the strings (unquoted) and numbers in ``value``."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str):
        return [value] if len(value) >= 3 else []
    text = str(value)
    return [text] if isinstance(value, int | float) and len(text) >= 3 else []


class Scheduler:
    """The futures of one episode on a virtual clock (``now``, in ms)."""

    def __init__(self) -> None:
        """Start with no futures and the clock at 0 ms."""
        self.now = 0.0
        self.futures: list[Future] = []
        self.delivered: set[str] = set()

    def submit(
        self,
        name: str,
        reads: list[str],
        writes: list[str],
        latency_ms: float,
        result: Any,
        ok: bool = True,
    ) -> Future:
        """Issue a call at ``now``.

        It starts when every earlier conflicting call has finished and takes ``latency_ms``.
        """
        start = max(
            [self.now]
            + [f.finish for f in self.futures if conflicts(f.reads, f.writes, reads, writes)]
        )
        future = Future(
            id=f"f{len(self.futures) + 1}",
            name=name,
            reads=list(reads),
            writes=list(writes),
            issued=self.now,
            start=start,
            finish=round(start + latency_ms, 3),
            result=result,
            ok=ok,
        )
        self.futures.append(future)
        return future

    def advance(self, ms: float) -> None:
        """Let ``ms`` of virtual time pass (the agent thinking)."""
        self.now = round(self.now + ms, 3)

    def pending(self) -> list[Future]:
        """Issued futures whose results have not been delivered, in issue order."""
        return [f for f in self.futures if f.id not in self.delivered]

    def collect(self, wait: str = "none") -> list[Future]:
        """Deliver the results finished by ``now``, in (finish, issue) order.

        ``wait``: "none" delivers what is ready; "any" first waits for the earliest pending one
        when nothing is ready; "all" first waits for every pending one.
        """
        pending = self.pending()
        if pending and wait == "all":
            self.now = max(self.now, max(f.finish for f in pending))
        elif pending and wait == "any" and all(f.finish > self.now for f in pending):
            self.now = min(f.finish for f in pending)
        ready = sorted(
            (f for f in pending if f.finish <= self.now),
            key=lambda f: (f.finish, int(f.id[1:])),
        )
        self.delivered.update(f.id for f in ready)
        return ready

    def state(self) -> dict[str, Any]:
        """JSON-able state for snapshots."""
        return {
            "now": self.now,
            "futures": [asdict(f) for f in self.futures],
            "delivered": sorted(self.delivered, key=lambda i: int(i[1:])),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Scheduler:
        """The scheduler ``state()`` described."""
        out = cls()
        out.now = state["now"]
        out.futures = [Future(**f) for f in state["futures"]]
        out.delivered = set(state["delivered"])
        return out
