"""Running episodes: work units, the worker function and the three backends.

A unit is one run (its M episodes) of one env. Every backend runs the same worker function
on the same units, and an episode's record depends only on (env, agent, seed), so the
backends give identical records except ``seconds``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from agentgym.agents import load_agent
from agentgym.core.errors import BadInput
from agentgym.harness.episode import run_episode
from agentgym.harness.results import EpisodeRecord
from agentgym.registry import make

BACKENDS = ("local", "process", "ray")


@dataclass(frozen=True)
class Unit:
    """One run of one env: the episodes (index, seed) still to play."""

    env_id: str
    run: int
    episodes: tuple[tuple[int, int], ...]
    agent_spec: str
    split: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    transcripts: bool = False


# What a worker returns per episode: its record and, if asked, its transcript.
Outcome = tuple[EpisodeRecord, list[Any] | None]


def run_unit(unit: Unit) -> list[Outcome]:
    """Play a unit's episodes with a fresh env and agent (the worker function)."""
    return list(iter_unit(unit))


def iter_unit(unit: Unit) -> Iterator[Outcome]:
    """Play a unit's episodes one by one, yielding each as it ends."""
    env = make(unit.env_id, split=unit.split, **unit.env_kwargs)
    agent = load_agent(unit.agent_spec)
    try:
        for episode, seed in unit.episodes:
            steps: list[Any] | None = [] if unit.transcripts else None
            record = run_episode(
                env,
                agent,
                env_id=unit.env_id,
                run=unit.run,
                episode=episode,
                seed=seed,
                transcript=steps,
            )
            yield record, steps
    finally:
        env.close()


def execute(
    units: list[Unit], *, backend: str = "local", workers: int = 1, address: str | None = None
) -> Iterator[Outcome]:
    """Run ``units`` and yield each episode's outcome as soon as its backend returns it."""
    if backend not in BACKENDS:
        raise BadInput(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if workers < 1:
        raise BadInput(f"--workers must be at least 1, got {workers}")
    if backend == "local" or not units:
        for unit in units:
            yield from iter_unit(unit)
    elif backend == "process":
        yield from _process(units, workers)
    else:
        yield from _ray(units, workers, address)


def _process(units: list[Unit], workers: int) -> Iterator[Outcome]:
    # spawn: workers must not inherit threads (torch, faiss) or locks from the parent.
    context = get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: set[Future[list[Outcome]]] = {pool.submit(run_unit, u) for u in units}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield from future.result()
        finally:
            for future in pending:
                future.cancel()


def _ray(units: list[Unit], workers: int, address: str | None) -> Iterator[Outcome]:
    with ray_session(workers if workers > 1 else os.cpu_count(), address) as ray:
        remote = ray.remote(run_unit)
        pending = [remote.remote(u) for u in units]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield from ray.get(ref)


_SHORT_TMP = "/tmp" if sys.platform == "darwin" else None
"""Where a local Ray's folder goes: macOS's per-user temp folder is too deep for sockets."""


@contextlib.contextmanager
def ray_session(num_cpus: int | None = None, address: str | None = None) -> Iterator[Any]:
    """Ray for the block: the cluster at ``address``, or a local Ray on ``num_cpus`` cores.

    A Ray the caller started already is used as it is and left running. A local Ray started
    here keeps its session files (sockets, logs) in a fresh temporary folder, removed after
    ``ray.shutdown()``, instead of Ray's default ``/tmp/ray``, which nothing cleans.

    Yields:
        The ``ray`` module.

    Raises:
        BadInput: Ray is not installed.
    """
    # Token auth would write ~/.ray/auth_token; a local cluster needs none.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        import ray
    except ImportError:
        raise BadInput("--backend ray needs Ray: pip install 'agentgym[ray]'") from None
    if ray.is_initialized():
        yield ray
        return
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": 40,  # logging.ERROR
    }
    with contextlib.ExitStack() as stack:
        if address:
            ray.init(address=address, **options)
        else:  # short: Ray's socket paths inside it must stay under 107 characters
            temp = tempfile.mkdtemp(prefix="agentgym-ray-", dir=_SHORT_TMP)
            stack.callback(shutil.rmtree, temp, ignore_errors=True)
            ray.init(num_cpus=num_cpus, _temp_dir=temp, **options)
        stack.callback(ray.shutdown)  # first, then the folder
        yield ray
