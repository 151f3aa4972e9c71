"""``agentgym serve``: env instances of any registered id behind an HTTP API (FastAPI).

A client creates a session (an env made from an id and kwargs) and drives it with ``reset``,
``step`` and the env's other methods (``snapshot``, ``restore``, ``check_answer``,
``oracle_action``, ...). ``agentgym/Remote-v0`` (:mod:`agentgym.envs.remote.env`) is that
client, a Gymnasium env whose episodes are the local env's, byte for byte.

Routes (JSON bodies in the wire form of :mod:`agentgym.envs.remote.wire`):

* ``POST /v1/sessions`` ``{"env_id", "kwargs"}`` → ``{"session", "env": description}``;
* ``POST /v1/sessions/{id}/{op}`` with ``op`` one of ``reset``, ``step``, ``call``;
* ``DELETE /v1/sessions/{id}``;
* ``GET /healthz`` (alive), ``GET /readyz`` (an env of each served id was made once),
  ``GET /metrics`` (sessions, steps, step latency percentiles, errors).

Sessions are isolated (an unguessable id each, one env each, one request at a time each),
closed after ``idle_timeout_s`` without a request, and a call that runs past
``step_timeout_s`` is answered with an error and closes its session. An env that raises
anything but agentgym's own usage errors (:class:`~agentgym.core.errors.AgentGymError`:
a bad argument, a step before reset, a foreign snapshot) has its session closed and the
error sent to the client; the server goes on. Binding an address other than loopback needs a
bearer token, and with a token set every request without it is refused (401).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentgym.core.errors import BadInput
from agentgym.envs.remote import wire
from agentgym.envs.remote.service import Limits, Service, ServiceError

__all__ = ["DEFAULT_PORT", "Limits", "Service", "create_app", "serve"]

DEFAULT_PORT = 8766
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_VARIABLE = "AGENTGYM_SERVE_TOKEN"


# ---------------------------------------------------------------------- HTTP
def create_app(service: Service, token: str | None = None, check_readiness: bool = True) -> Any:
    """The FastAPI app over ``service``; every request must carry ``token`` when one is set.

    Args:
        service: the sessions and env calls.
        token: the bearer token required on every request (None: no token).
        check_readiness: make one env of each served id in the background at start-up
            (``/readyz`` answers 503 until that is done).
    """

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap(service))
        if check_readiness:
            threading.Thread(target=service.check_readiness, daemon=True).start()
        else:
            service.readiness_done = True
        try:
            yield
        finally:
            reaper.cancel()
            service.close_all()

    app = FastAPI(title="agentgym env service", lifespan=lifespan, docs_url=None, redoc_url=None)
    http = _Http(service, token)
    app.middleware("http")(http.guard)
    app.exception_handler(ServiceError)(http.service_error)
    _probe_routes(app, service)
    _session_routes(app, http)
    return app


def _error(status: int, kind: str, message: str) -> Response:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


class _Http:
    """What the routes share: the token check, body limits, env calls on worker threads."""

    def __init__(self, service: Service, token: str | None):
        self.service, self.token, self.limits = service, token, service.limits
        self.limiter = anyio.CapacityLimiter(self.limits.threads)

    async def guard(self, request: Request, call_next: Callable[[Request], Any]) -> Response:
        """Refuse a request without the token, or one that declares a body over the limit."""
        if self.token is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                self.service.metrics.error("unauthorized")
                return _error(401, "Unauthorized", "a valid bearer token is required")
        declared = request.headers.get("content-length")
        limit = self.limits.max_request_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            self.service.metrics.error("too_large")
            return _error(413, "TooLarge", f"request over {limit} bytes")
        response: Response = await call_next(request)
        return response

    async def service_error(self, _: Request, e: Exception) -> Response:
        """A :class:`ServiceError` as its JSON answer."""
        assert isinstance(e, ServiceError)
        return _error(e.status, e.kind, e.message)

    async def body_of(self, request: Request) -> Any:
        """The request's wire body (413 past the limit, even without a declared length)."""
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > self.limits.max_request_bytes:
                too_large = f"request over {self.limits.max_request_bytes} bytes"
                raise ServiceError(413, "TooLarge", too_large)
        try:
            return wire.loads(bytes(data) or b"{}")
        except BadInput as e:
            raise ServiceError(400, "BadInput", str(e)) from None

    async def in_thread(self, fn: Callable[[], Any], timeout: float, session_id: str) -> Any:
        """``fn()`` on a worker thread; past ``timeout`` the session is closed (504)."""
        try:
            with anyio.fail_after(timeout):
                return await anyio.to_thread.run_sync(
                    fn, abandon_on_cancel=True, limiter=self.limiter
                )
        except TimeoutError:
            self.service.close(session_id)
            self.service.metrics.error("timeout")
            raise ServiceError(
                504, "Timeout", f"the env took longer than {timeout:g} s; session closed"
            ) from None

    def answer(self, payload: Any) -> Response:
        """``payload`` in the wire form (500 if the env returned what the wire cannot carry)."""
        try:
            return Response(wire.dumps(payload), media_type="application/json")
        except BadInput as e:
            self.service.metrics.error("encode")
            return _error(500, "EnvError", f"the env returned what the wire cannot carry: {e}")


def _probe_routes(app: Any, service: Service) -> None:
    @app.get("/healthz")
    async def healthz() -> Response:
        return JSONResponse({"ok": True})

    @app.get("/readyz")
    async def readyz() -> Response:
        failed = {k: v for k, v in service.readiness.items() if v is not None}
        ready = service.readiness_done and not failed
        body = {"ready": ready, "checked": len(service.readiness), "failed": failed}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        doc = service.metrics.snapshot(len(service))
        doc["limits"] = asdict(service.limits)
        return JSONResponse(doc)


def _session_routes(app: Any, http: _Http) -> None:
    service, limits = http.service, http.limits

    @app.post("/v1/sessions")
    async def create(request: Request) -> Response:
        body = await http.body_of(request)
        if not isinstance(body, dict):
            raise ServiceError(400, "BadInput", "expected {'env_id': str, 'kwargs': {...}}")
        session_id = secrets.token_urlsafe(16)

        def make_one() -> dict[str, Any]:
            env_id, kwargs = body.get("env_id"), body.get("kwargs") or {}
            session, description = service.create(env_id, kwargs, session_id)
            return {"session": session.id, "env": description}

        return http.answer(await http.in_thread(make_one, limits.create_timeout_s, session_id))

    @app.post("/v1/sessions/{session_id}/{op}")
    async def operate(session_id: str, op: str, request: Request) -> Response:
        session = service.get(session_id)
        body = await http.body_of(request)
        session.busy += 1
        try:
            result = await http.in_thread(
                lambda: service.run(session, op, body), limits.step_timeout_s, session_id
            )
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()
        return http.answer(result)

    @app.delete("/v1/sessions/{session_id}")
    async def delete(session_id: str) -> Response:
        closed = await anyio.to_thread.run_sync(service.close, session_id, limiter=http.limiter)
        return JSONResponse({"closed": closed})


async def _reap(service: Service) -> None:
    """Close idle sessions, checking a few times per idle timeout."""
    period = max(0.05, min(5.0, service.limits.idle_timeout_s / 4))
    while True:
        await asyncio.sleep(period)
        service.expire()


def resolve_token(host: str, token: str | None) -> str | None:
    """The bearer token to require: ``token``, else ``$AGENTGYM_SERVE_TOKEN``.

    Raises:
        BadInput: ``host`` is not a loopback address and no token is set.
    """
    token = token or os.environ.get(TOKEN_VARIABLE) or None
    if host not in LOOPBACK and not token:
        raise BadInput(
            f"binding {host} exposes the envs beyond this machine: set a bearer token with "
            f"--token or {TOKEN_VARIABLE}"
        )
    return token


def serve(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    served: Sequence[str] | None = None,
    limits: Limits | None = None,
    on_start: Callable[[str], None] | None = None,
) -> None:
    """Run the service until interrupted (uvicorn, one process).

    Args:
        host: the interface to bind; loopback unless a token is set.
        port: the port (0: a free one, announced through ``on_start``).
        token: bearer token (else ``$AGENTGYM_SERVE_TOKEN``); required off loopback.
        served: the ids to serve (every registered id if None).
        limits: session and request limits.
        on_start: called with the service's URL once it listens.
    """
    import socket

    import uvicorn

    token = resolve_token(host, token)
    service = Service(served, limits)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    # without it every answer waits out the client's delayed ACK (44 ms instead of 1.3 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        raise BadInput(f"cannot bind {host}:{port}: {e.strerror or e}") from None
    sock.listen(2048)  # connections wait in the backlog from the moment the URL is announced
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        create_app(service, token), log_level="warning", access_log=False, timeout_keep_alive=75
    )
    server = uvicorn.Server(config)
    if on_start is not None:
        on_start(f"http://{shown}:{bound}")
    server.run(sockets=[sock])


@contextlib.contextmanager
def serve_in_thread(
    service: Service | None = None,
    token: str | None = None,
    check_readiness: bool = False,
) -> Any:
    """A running service on a free port of 127.0.0.1, in a background thread of this process.

    For tests and benchmarks: ``with serve_in_thread() as url: ...``; the server stops (and
    closes its sessions) when the block ends.

    Yields:
        The service's URL.
    """
    import socket

    import uvicorn

    service = Service() if service is None else service
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # see serve()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(service, token, check_readiness), log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the env service did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def serve_command(
    host: str,
    port: int,
    token: str | None,
    served: list[str] | None,
    max_sessions: int,
    idle_timeout: float,
    step_timeout: float,
    max_request_mb: float,
) -> None:
    """``agentgym serve``: check the arguments, announce the URL, serve until interrupted."""
    for name, value in (
        ("--max-sessions", max_sessions),
        ("--idle-timeout", idle_timeout),
        ("--step-timeout", step_timeout),
        ("--max-request-mb", max_request_mb),
    ):
        if value <= 0:
            raise BadInput(f"{name} must be positive, got {value}")
    if not 0 <= port <= 65535:
        raise BadInput(f"--port must be in 0..65535, got {port}")
    limits = Limits(
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout,
        step_timeout_s=step_timeout,
        max_request_bytes=int(max_request_mb * (1 << 20)),
    )
    what = ", ".join(served) if served else "every registered id"
    serve(
        host,
        port,
        token,
        served,
        limits,
        on_start=lambda url: print(f"serving {what} at {url} (Ctrl-C to stop)", flush=True),
    )


def spawn(env_ids: Sequence[str]) -> tuple[subprocess.Popen[str], str]:
    """``agentgym serve --port 0`` for ``env_ids`` in a child process, once it listens.

    Returns:
        The process (the caller stops it) and the URL it announced.

    Raises:
        RuntimeError: the server exited or printed something else first.
    """
    args = [sys.executable, "-m", "agentgym.cli", "serve", "--port", "0"]
    for env_id in env_ids:
        args += ["--env", env_id]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " at http://" not in line:
        proc.kill()
        raise RuntimeError(f"agentgym serve did not start: {line!r}")
    return proc, line.split(" at ")[1].split()[0]
