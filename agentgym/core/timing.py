"""Timing two or more sides fairly: alternating runs, repeated, medians with their spread.

A single pass per side, always in the same order, swings with the host (a neighbour process,
CPU frequency, cache state) and favours whichever side runs second or first. Every bench
that compares sides measures them the same way here:

* runs alternate: round ``r`` takes the sides in the given order when ``r`` is even and in
  reverse when it is odd, so drift hits every side alike;
* each run is timed on two clocks, wall time (``perf_counter``) and this process's CPU time
  (``process_time``: user + system of every thread, not of child processes), since CPU time
  is what a loaded host does not inflate;
* garbage is collected (untimed) before every run, so no side pays for a collection that
  another side's garbage made due;
* a side's figure is the median over its runs, reported with the min and max.

    timed = alternate({"ours": run_ours, "peer": run_peer}, repeats=5, warmup=1)
    timed.ratio("peer", "ours")                 # median wall(peer) / median wall(ours)
    timed.ratio("peer", "ours", clock="cpu")    # the same on CPU time
    timed.summary()                             # JSON-ready medians and spreads per side

A side that must set up before the part worth timing (open a game, register an env) times
that part itself and returns its :class:`Sample`; :func:`alternate` then records it instead
of the whole call (see :class:`Stopwatch`).

A workload made of parts (games, episodes) can alternate part by part, so that the sides'
runs of a part are seconds apart at most, and the parts' runs then add up round by round:

    rounds = summed([alternate({"ours": ours(g), "peer": peer(g)}, 5) for g in games])
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Clock = Literal["wall", "cpu"]


@dataclass(frozen=True)
class Sample:
    """One timed run: seconds of wall time and of this process's CPU time."""

    wall_s: float
    cpu_s: float

    def on(self, clock: Clock) -> float:
        """The seconds on ``clock``."""
        return self.wall_s if clock == "wall" else self.cpu_s


class Stopwatch:
    """Wall and CPU seconds summed over the ``with`` blocks it times.

    A side opens each game outside the block and plays it inside, then returns
    :attr:`sample`, which :func:`alternate` records for that side.
    """

    def __init__(self) -> None:
        """Start at zero."""
        self.wall_s = self.cpu_s = 0.0
        self._wall0 = self._cpu0 = 0.0

    def __enter__(self) -> Stopwatch:
        """Start timing a block."""
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        """Add the block's seconds."""
        self.wall_s += time.perf_counter() - self._wall0
        self.cpu_s += time.process_time() - self._cpu0

    @property
    def sample(self) -> Sample:
        """The seconds timed so far."""
        return Sample(self.wall_s, self.cpu_s)


def timed(fn: Callable[[], Any]) -> tuple[Any, Sample]:
    """Call ``fn()`` once; returns its result and the :class:`Sample` it took."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = fn()
    return result, Sample(time.perf_counter() - wall0, time.process_time() - cpu0)


@dataclass
class Alternated:
    """The samples of :func:`alternate`, per side, in the order they were taken."""

    samples: dict[str, list[Sample]] = field(default_factory=dict)
    results: dict[str, list[Any]] = field(default_factory=dict)
    """What each side's function returned, per run (the warm-up runs excluded)."""

    def median(self, side: str, clock: Clock = "wall") -> float:
        """The median seconds of ``side`` on ``clock``."""
        return float(statistics.median(s.on(clock) for s in self.samples[side]))

    def spread(self, side: str, clock: Clock = "wall") -> tuple[float, float]:
        """``(min, max)`` seconds of ``side`` on ``clock``."""
        values = [s.on(clock) for s in self.samples[side]]
        return min(values), max(values)

    def ratio(self, numerator: str, denominator: str, clock: Clock = "wall") -> float:
        """``median(numerator) / median(denominator)`` on ``clock`` (inf when the latter is 0)."""
        below = self.median(denominator, clock)
        return self.median(numerator, clock) / below if below > 0 else float("inf")

    def ratio_range(
        self, numerator: str, denominator: str, clock: Clock = "wall"
    ) -> tuple[float, float]:
        """``(min, max)`` over the rounds of ``numerator / denominator``, round by round.

        The ratio of the medians (:meth:`ratio`) always lies in this range; a wide range says
        the host, not the sides, moved the figures.
        """
        pairs = zip(self.samples[numerator], self.samples[denominator], strict=True)
        values = [a.on(clock) / b.on(clock) if b.on(clock) > 0 else float("inf") for a, b in pairs]
        return min(values), max(values)

    def summary(self, per: float = 1.0, unit: str = "s") -> dict[str, dict[str, float]]:
        """JSON-ready figures per side: median, min and max on both clocks, divided by ``per``.

        ``per``: the count one figure is for (calls, steps...), so ``per=calls`` with
        ``unit="ms"`` gives milliseconds per call. ``unit``: ``"s"``, ``"ms"`` or ``"us"``.
        """
        scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit] / per
        out: dict[str, dict[str, float]] = {}
        for side in self.samples:
            row: dict[str, float] = {"runs": float(len(self.samples[side]))}
            clocks: tuple[Clock, ...] = ("wall", "cpu")
            for clock in clocks:
                lo, hi = self.spread(side, clock)
                row[f"{clock}_{unit}"] = round(self.median(side, clock) * scale, 6)
                row[f"{clock}_min_{unit}"] = round(lo * scale, 6)
                row[f"{clock}_max_{unit}"] = round(hi * scale, 6)
            out[side] = row
        return out


def summed(parts: Sequence[Alternated]) -> Alternated:
    """The parts' runs added up round by round: run ``r`` of a side is its run ``r`` of every part.

    ``results[side][r]`` lists that side's results of round ``r``, part by part.

    Raises:
        ValueError: no parts, or parts that differ in their sides or their number of runs.
    """
    if not parts:
        raise ValueError("summed needs at least one part")
    shape = {side: len(runs) for side, runs in parts[0].samples.items()}
    if any({side: len(runs) for side, runs in p.samples.items()} != shape for p in parts):
        raise ValueError("summed needs parts with the same sides and runs")
    out = Alternated()
    for side, runs in shape.items():
        columns = [[p.samples[side][r] for p in parts] for r in range(runs)]
        out.samples[side] = [
            Sample(sum(s.wall_s for s in col), sum(s.cpu_s for s in col)) for col in columns
        ]
        out.results[side] = [[p.results[side][r] for p in parts] for r in range(runs)]
    return out


def alternate(
    sides: Mapping[str, Callable[[], Any]],
    repeats: int = 5,
    warmup: int = 1,
    collect: bool = True,
) -> Alternated:
    """Run every side ``warmup + repeats`` times, alternating the order round by round.

    Round ``r`` calls the sides in the mapping's order when ``r`` is even and in reverse when
    it is odd; the first ``warmup`` rounds are run and discarded (imports, caches, JIT). A
    side that returns a :class:`Sample` has timed itself: that sample is recorded (and the
    result kept is the sample too). ``collect``: a full garbage collection, untimed, before
    every call (a side still pays for collections its own garbage makes due while it runs).

    Raises:
        ValueError: no sides, or ``repeats`` < 1 or ``warmup`` < 0.
    """
    if not sides:
        raise ValueError("alternate needs at least one side")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    names = list(sides)
    out = Alternated({n: [] for n in names}, {n: [] for n in names})
    for r in range(warmup + repeats):
        for name in names if r % 2 == 0 else reversed(names):
            if collect:
                gc.collect()
            result, sample = timed(sides[name])
            if isinstance(result, Sample):
                sample = result
            if r >= warmup:
                out.samples[name].append(sample)
                out.results[name].append(result)
    return out


def interleave(
    calls: Mapping[str, Sequence[Callable[[], Any]]], warmup: int = 0
) -> dict[str, tuple[list[Any], list[Sample]]]:
    """Per side, each call's result and :class:`Sample`, the sides' calls interleaved.

    For many short calls (one query each): call ``i`` of every side runs before call ``i + 1``
    of any, the sides in the mapping's order for even ``i`` and in reverse for odd ``i``, so
    drift on the host hits every side alike. A side may hold fewer calls than another; past
    its last, the others go on alone. First each side's first ``warmup`` calls run, untimed.
    """
    names = list(calls)
    for name in names:
        for call in calls[name][:warmup]:
            call()
    out: dict[str, tuple[list[Any], list[Sample]]] = {n: ([], []) for n in names}
    for i in range(max((len(c) for c in calls.values()), default=0)):
        for name in names if i % 2 == 0 else names[::-1]:
            if i < len(calls[name]):
                result, sample = timed(calls[name][i])
                out[name][0].append(result)
                out[name][1].append(sample)
    return out
