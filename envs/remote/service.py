"""The env service's sessions, without HTTP: :class:`Service` makes envs and runs their calls.

:mod:`agentgym.envs.remote.server` puts it behind FastAPI routes. A session is one client's
env; a usage error (:class:`~agentgym.core.errors.AgentGymError`) is answered and the
session kept, anything else the env raises closes the session.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentgym.core.errors import AgentGymError, BadInput
from agentgym.envs.remote import wire
from agentgym.registry import env_ids, env_info, make

__all__ = ["CALLS", "Limits", "Metrics", "Service", "ServiceError", "Session", "describe"]


CALLS = frozenset(
    {
        "snapshot",
        "restore",
        "check_answer",
        "oracle_action",
        "set_rng",
        "answer_prefix",
        "task_ids",
        "task_type_of",
        "render",
    }
)
"""The env methods a client may call besides reset and step (nothing else is reachable)."""

OPTIONAL_CALLS = ("check_answer", "answer_prefix", "oracle_action")
"""Methods an env may lack; the session's description says which it has."""


@dataclass(frozen=True)
class Limits:
    """What one server allows.

    Attributes:
        max_sessions: open sessions at once; creating one more is refused (503).
        idle_timeout_s: a session with no request for this long is closed.
        step_timeout_s: a reset, step or call running longer is answered with an error (504)
            and its session closed.
        create_timeout_s: the same for making an env (a Large preset builds for minutes).
        max_request_bytes: larger request bodies are refused (413).
        threads: env calls running at once (each session runs one at a time).
    """

    max_sessions: int = 1024
    idle_timeout_s: float = 600.0
    step_timeout_s: float = 60.0
    create_timeout_s: float = 900.0
    max_request_bytes: int = 8 << 20
    threads: int = 32


class ServiceError(Exception):
    """An error answered to the client: HTTP status, error type name, message."""

    def __init__(self, status: int, kind: str, message: str):
        """Keep the answer's parts."""
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@dataclass
class Session:
    """One client's env."""

    id: str
    env_id: str
    env: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0
    closed: bool = False


def describe(env: Any, env_id: str) -> dict[str, Any]:
    """What a client needs to mirror ``env``: spaces, options, abilities, identity."""
    base = env.unwrapped
    methods = [m for m in OPTIONAL_CALLS if callable(getattr(base, m, None))]
    if "check_answer" in methods:
        try:
            base.check_answer("")
        except NotImplementedError:
            methods.remove("check_answer")
        except Exception:  # it exists; calling it before reset may be what fails
            pass
    domains = getattr(base, "domains", None)
    return {
        "env_id": env_id,
        "observation_space": wire.encode_space(env.observation_space),
        "action_space": wire.encode_space(env.action_space),
        "split": getattr(base, "split", "train"),
        "privileged": bool(getattr(base, "privileged", False)),
        "max_turns": getattr(base, "max_turns", None),
        "render_mode": getattr(base, "render_mode", None),
        "supports_snapshot": bool(getattr(base, "supports_snapshot", False)),
        "has_oracle": bool(getattr(base, "has_oracle", False)),
        "family": getattr(base, "family", ""),
        "domain": getattr(base, "domain", ""),
        "domains": [str(d) for d in domains] if domains else None,
        "data_hash": getattr(base, "data_hash", None),
        "metadata": wire.encode(dict(getattr(base, "metadata", {}))),
        "methods": methods,
    }


def _state(env: Any) -> dict[str, Any]:
    base = env.unwrapped
    return {
        "task_id": getattr(base, "task_id", None),
        "turn": getattr(base, "turn", 0),
        "done": getattr(base, "done", False),
        "max_turns": getattr(base, "max_turns", None),
    }


class Metrics:
    """Counters and the latency of recent steps (thread-safe)."""

    def __init__(self, window: int = 100_000):
        """Empty counters; the last ``window`` step latencies are kept."""
        self._lock = threading.Lock()
        self.started = time.time()
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.step_seconds: deque[float] = deque(maxlen=window)

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to counter ``name``."""
        with self._lock:
            self.counts[name] += n

    def error(self, kind: str) -> None:
        """Count one error of ``kind``."""
        with self._lock:
            self.errors[kind] += 1

    def step(self, seconds: float) -> None:
        """Record one step's latency."""
        with self._lock:
            self.counts["steps"] += 1
            self.step_seconds.append(seconds)

    def snapshot(self, open_sessions: int) -> dict[str, Any]:
        """The metrics as JSON data."""
        with self._lock:
            latencies = np.array(self.step_seconds, dtype=float)
            counts, errors = dict(self.counts), dict(self.errors)
        percentiles = (
            {f"p{q}": round(float(np.percentile(latencies, q)) * 1000, 4) for q in (50, 90, 99)}
            if latencies.size
            else {}
        )
        return {
            "uptime_s": round(time.time() - self.started, 3),
            "sessions_open": open_sessions,
            "sessions_created": counts.get("created", 0),
            "sessions_closed": counts.get("closed", 0),
            "sessions_expired": counts.get("expired", 0),
            "steps": counts.get("steps", 0),
            "resets": counts.get("resets", 0),
            "calls": counts.get("calls", 0),
            "errors": errors,
            "step_latency_ms": {**percentiles, "window": int(latencies.size)},
        }


class Service:
    """The sessions and the env calls behind the HTTP routes (usable without HTTP in tests)."""

    def __init__(self, served: Sequence[str] | None = None, limits: Limits | None = None):
        """Serve ``served`` ids (every registered id if None) within ``limits``."""
        ids = list(served) if served else None
        if ids:
            for env_id in ids:
                env_info(env_id)  # UnknownEnv (BadInput) for an id that does not exist
        self.served: tuple[str, ...] | None = tuple(ids) if ids else None
        self.limits = limits or Limits()
        self.metrics = Metrics()
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self.readiness: dict[str, str | None] = {}
        self.readiness_done = False

    # ------------------------------------------------------------------ sessions
    def __len__(self) -> int:
        """Open sessions."""
        return len(self._sessions)

    def create(
        self, env_id: Any, kwargs: Any, session_id: str | None = None
    ) -> tuple[Session, dict[str, Any]]:
        """Make an env; the new session and its description.

        ``session_id``: the new session's id (a fresh one if None); closing it while the env
        is being made discards the env once made.

        Raises:
            ServiceError: the id is not served (404), the session limit is reached (503), or
                the env refuses its arguments (400).
        """
        if not isinstance(env_id, str) or not isinstance(kwargs, dict):
            raise ServiceError(400, "BadInput", "expected {'env_id': str, 'kwargs': {...}}")
        if self.served is not None and env_id not in self.served:
            raise ServiceError(404, "UnknownEnv", f"{env_id} is not served here")
        try:
            family = env_info(env_id).family
        except AgentGymError as e:
            raise ServiceError(404, type(e).__name__, str(e)) from None
        if family == "remote":
            raise ServiceError(400, "BadInput", "a remote env cannot be served again")
        with self._lock:
            if len(self._sessions) >= self.limits.max_sessions:
                self.metrics.error("session_limit")
                raise ServiceError(
                    503, "Busy", f"session limit reached ({self.limits.max_sessions} open)"
                )
            session = Session(session_id or secrets.token_urlsafe(16), env_id, None)
            session.busy = 1
            self._sessions[session.id] = session
        env: Any = None
        try:
            env = make(env_id, **kwargs)
            description = describe(env, env_id)  # a space the wire cannot describe: refused
        except AgentGymError as e:
            self._drop(session, env)
            raise ServiceError(400, type(e).__name__, str(e)) from None
        except Exception as e:
            self._drop(session, env)
            self.metrics.error("create")
            raise ServiceError(500, type(e).__name__, f"making {env_id} failed: {e}") from None
        session.env = env
        session.busy, session.last_used = 0, time.monotonic()
        self.metrics.count("created")
        if session.closed:  # timed out while the env was being made
            env.close()
        return session, description

    def get(self, session_id: str) -> Session:
        """The open session ``session_id`` (404 if unknown, expired or closed)."""
        session = self._sessions.get(session_id)
        if session is None or session.closed or session.env is None:
            raise ServiceError(404, "UnknownSession", "no such session (closed or expired)")
        return session

    def run(self, session: Session, op: str, body: Any) -> Any:
        """Run ``op`` on the session's env in this thread; the wire-ready result.

        Raises:
            ServiceError: a usage error (400, session kept) or an env that raised (500,
                session closed).
        """
        with session.lock:
            if session.closed:
                raise ServiceError(404, "UnknownSession", "the session was closed")
            start = time.perf_counter()
            try:
                result = self._dispatch(session.env, op, body)
            except ServiceError:
                raise
            except NotImplementedError as e:
                raise ServiceError(501, "NotImplementedError", str(e)) from None
            except AgentGymError as e:
                self.metrics.error("usage")
                raise ServiceError(400, type(e).__name__, str(e)) from None
            except Exception as e:
                self.metrics.error("env")
                self.close(session.id)
                raise ServiceError(
                    500, "EnvError", f"the env raised {type(e).__name__}: {e}; session closed"
                ) from None
            finally:
                session.last_used = time.monotonic()
                if session.closed:  # closed during the call (timed out, or the env raised)
                    with contextlib.suppress(Exception):
                        session.env.close()
            if op == "step":
                self.metrics.step(time.perf_counter() - start)
            return result

    def _dispatch(self, env: Any, op: str, body: Any) -> Any:
        if not isinstance(body, dict):
            raise BadInput("the request body must be an object")
        if op == "reset":
            self.metrics.count("resets")
            obs, info = env.reset(seed=body.get("seed"), options=body.get("options"))
            return {"result": [obs, info], "state": _state(env)}
        if op == "step":
            if "action" not in body:
                raise BadInput("step needs an 'action'")
            result = env.step(body["action"])
            return {"result": list(result), "state": _state(env)}
        if op == "call":
            name, args = body.get("method"), body.get("args", [])
            if name not in CALLS or not isinstance(args, list):
                raise BadInput(f"cannot call {name!r}: callable methods are {sorted(CALLS)}")
            self.metrics.count("calls")
            method = getattr(env.unwrapped, name, None)
            if not callable(method):
                raise NotImplementedError(f"{type(env.unwrapped).__name__} has no {name}()")
            if name == "render":
                method = env.render
            return {"result": method(*args), "state": _state(env)}
        raise ServiceError(404, "UnknownOperation", f"unknown operation {op!r}")

    def close(self, session_id: str) -> bool:
        """Close a session (its env closed once no call is running); False if unknown."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.closed = True
        self.metrics.count("closed")
        if session.env is not None and session.lock.acquire(blocking=False):
            try:
                session.env.close()
            except Exception:  # closing a broken env must not take the server down
                self.metrics.error("close")
            finally:
                session.lock.release()
        return True

    def _drop(self, session: Session, env: Any = None) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)
        session.closed = True
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()

    def expire(self, now: float | None = None) -> int:
        """Close the sessions idle longer than the limit; how many."""
        now = time.monotonic() if now is None else now
        idle = [
            s.id
            for s in list(self._sessions.values())
            if not s.busy and now - s.last_used > self.limits.idle_timeout_s
        ]
        for session_id in idle:
            if self.close(session_id):
                self.metrics.count("expired")
        return len(idle)

    def close_all(self) -> None:
        """Close every session (server shutdown)."""
        for session_id in list(self._sessions):
            self.close(session_id)

    # ------------------------------------------------------------------ readiness
    def check_readiness(self) -> None:
        """Make (and close) one env of each served id, recording which could not be made."""
        for env_id in self.served or env_ids():
            if env_info(env_id).family == "remote":
                continue
            try:
                make(env_id).close()
                self.readiness[env_id] = None
            except Exception as e:
                self.readiness[env_id] = f"{type(e).__name__}: {e}"
        self.readiness_done = True
