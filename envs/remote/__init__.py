"""The remote family: ``agentgym/Remote-v0`` plays any registered id hosted by ``agentgym serve``.

The server (:mod:`agentgym.envs.remote.server`) and the client env
(:mod:`agentgym.envs.remote.env`) share the wire form of :mod:`agentgym.envs.remote.wire`.
Both need the ``serve`` extra (FastAPI, uvicorn, httpx).
"""

from __future__ import annotations

from agentgym.registry import register as _register


def register() -> None:
    """Register ``agentgym/Remote-v0`` (idempotent)."""
    _register(
        "agentgym/Remote-v0",
        "agentgym.envs.remote.env:RemoteEnv",
        family="remote",
        description="Any registered id played on an `agentgym serve` env service (url=, env_id=)",
    )
