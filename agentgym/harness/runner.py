"""Running episodes: the backends that play units of work.

Every backend plays the same units with the same worker function
(:func:`agentgym.harness.worker.iter_unit`), and an episode's record depends only on
(env, agent, seed), so the backends give identical records except ``seconds``. The local and
process backends run on a :class:`~agentgym.harness.pool.Pool`: a caller that evaluates more
than once opens one with :func:`~agentgym.harness.pool.open_pool` and passes it to every
call; otherwise each call starts its own and closes it at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from agentgym.core.errors import BadInput
from agentgym.harness.pool import Pool, open_pool
from agentgym.harness.worker import Outcome, Unit, iter_unit, run_unit

BACKENDS = ("local", "process", "ray")

__all__ = ["BACKENDS", "Outcome", "Unit", "execute", "iter_unit", "ray_session", "run_unit"]


def execute(
    units: list[Unit],
    *,
    backend: str = "local",
    workers: int = 1,
    address: str | None = None,
    pool: Pool | None = None,
) -> Iterator[Outcome]:
    """Run ``units`` and yield each episode's outcome as soon as its backend returns it.

    Args:
        units: the work.
        backend: "local", "process" or "ray"; ignored when ``pool`` is given.
        workers: processes (process backend) or CPUs of a local Ray; ignored with ``pool``.
        address: address of an existing Ray cluster.
        pool: a started pool to play on, left open afterwards.

    Raises:
        BadInput: an unknown backend, or ``workers`` below 1.
    """
    if backend not in BACKENDS:
        raise BadInput(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if workers < 1:
        raise BadInput(f"--workers must be at least 1, got {workers}")
    if not units:
        return
    if pool is not None:
        yield from pool.run(units)
    elif backend == "ray":
        yield from _ray(units, workers, address)
    else:  # a pool for this call alone: no more processes than units
        with open_pool(backend, min(workers, len(units))) as own:
            yield from own.run(units)


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
