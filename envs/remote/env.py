"""``agentgym/Remote-v0``: a Gymnasium env that plays an id hosted by ``agentgym serve``.

    env = gym.make("agentgym/Remote-v0", url="http://127.0.0.1:8766",
                   env_id="agentgym/Search-Menu-Small-v1", split="test")

Every keyword besides ``url``, ``env_id``, ``token``, ``timeout_s`` and ``retries`` is the
hosted env's own (checked by the server, which answers with the env's own message). The
episodes are the local env's byte for byte: observations, actions and ``info`` cross the wire
in a form that keeps their types (:mod:`agentgym.envs.remote.wire`). ``snapshot`` /
``restore``, ``check_answer``, ``oracle_action``, ``set_rng``, ``answer_prefix`` and the split
queries are forwarded, and pickling makes a new session restored from the snapshot.

Failures: a request that never reached the server (connection refused) is retried; one that
may have reached it is retried only where repeating it changes nothing (a seeded reset,
snapshot, restore, queries), never a step. When the server stays unreachable, the call raises
:class:`ServiceUnavailable` after a bounded wait, never hangs; the next ``reset`` opens a new
session if the server is back. An env that raised on the server raises
:class:`RemoteEnvError` here (its session is closed there).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import weakref
from typing import Any

import gymnasium as gym

from agentgym.core.env import AgentEnv
from agentgym.core.errors import (
    AgentGymError,
    BadInput,
    MissingInfoKey,
    ResetNeeded,
    SnapshotMismatch,
    UnknownEnv,
)
from agentgym.envs.remote import wire

__all__ = ["DEFAULT_URL", "RemoteEnv", "RemoteEnvError", "ServiceUnavailable"]

DEFAULT_URL = "http://127.0.0.1:8766"
URL_VARIABLE = "AGENTGYM_ENV_URL"
TOKEN_VARIABLE = "AGENTGYM_SERVE_TOKEN"


class ServiceUnavailable(BadInput):
    """The env service cannot be reached (or lost the session): a clear error, never a hang."""


class RemoteEnvError(RuntimeError):
    """The hosted env raised; the server closed its session and goes on."""


_USAGE_ERRORS: dict[str, type[Exception]] = {
    "BadInput": BadInput,
    "UnknownEnv": UnknownEnv,
    "ResetNeeded": ResetNeeded,
    "SnapshotMismatch": SnapshotMismatch,
    "MissingInfoKey": MissingInfoKey,
    "NotImplementedError": NotImplementedError,
    "AgentGymError": AgentGymError,
}


def _close_session(client: Any, path: str) -> None:
    """Close a session when its env is garbage-collected (best effort, short timeout)."""
    try:
        client.delete(path, timeout=1.0)
    except Exception:  # the server may be gone; it expires idle sessions itself
        pass
    finally:
        client.close()


class RemoteEnv(AgentEnv[Any, Any]):
    """An env hosted by an agentgym env service, driven over HTTP.

    Attributes:
        url: the service.
        env_id: the hosted id.
    """

    family = "remote"
    forwards_kwargs = True
    _IDEMPOTENT_CALLS = frozenset(
        {"snapshot", "restore", "check_answer", "set_rng", "task_ids", "task_type_of", "render"}
    )

    def __init__(
        self,
        url: str | None = None,
        env_id: str | None = None,
        *,
        token: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        split: str = "train",
        privileged: bool = False,
        max_turns: int | None = None,
        render_mode: str | None = None,
        **env_kwargs: Any,
    ):
        """Open a session on the service at ``url`` hosting ``env_id``.

        Args:
            url: the service (``$AGENTGYM_ENV_URL``, else http://127.0.0.1:8766).
            env_id: the registered id to play there.
            token: bearer token (``$AGENTGYM_SERVE_TOKEN`` if unset).
            timeout_s: the longest wait for one answer.
            retries: attempts after the first on a connection error.
            split: the hosted env's task split.
            privileged: the hosted env adds the privileged info keys.
            max_turns: the hosted env's turn limit (its default if None).
            render_mode: None or "ansi".
            **env_kwargs: the hosted env's own constructor arguments.

        Raises:
            BadInput: no ``env_id``, or the env refused its arguments.
            ServiceUnavailable: the service cannot be reached.
        """
        import httpx

        super().__init__(split=split, privileged=privileged, render_mode=render_mode)
        if not env_id:
            raise BadInput("agentgym/Remote-v0 needs env_id=<the id to play on the server>")
        self.url = (url or os.environ.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")
        self.env_id = str(env_id)
        self.retries = max(0, int(retries))
        token = token or os.environ.get(TOKEN_VARIABLE) or None
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(float(timeout_s), connect=5.0),
            transport=httpx.HTTPTransport(retries=0),
        )
        self._kwargs: dict[str, Any] = {"split": split, "privileged": privileged, **env_kwargs}
        if max_turns is not None:
            self._kwargs["max_turns"] = max_turns
        if render_mode is not None:
            self._kwargs["render_mode"] = render_mode
        self._session: str | None = None
        self._finalizer: Any = None
        self._open()

    # ------------------------------------------------------------------ the session
    def _open(self) -> None:
        """Create a session and mirror the hosted env's description."""
        answer = self._request(
            "POST", "/v1/sessions", {"env_id": self.env_id, "kwargs": self._kwargs}, retry=False
        )
        self._session = answer["session"]
        about = answer["env"]
        self.observation_space = wire.decode_space(about["observation_space"])
        self.action_space = wire.decode_space(about["action_space"])
        self.max_turns = about["max_turns"]
        self.supports_snapshot = about["supports_snapshot"]  # type: ignore[misc]
        self.has_oracle = about["has_oracle"]
        self.domain = about["domain"]  # type: ignore[misc]
        self.metadata = wire.decode(about["metadata"])
        self._data_hash = about["data_hash"]
        self._methods = frozenset(about["methods"])
        if about.get("domains"):
            self.domains = list(about["domains"])
        if "answer_prefix" in self._methods:
            self.answer_prefix = functools.partial(self._call, "answer_prefix")
        if self._turn_key is not None:
            self._call("set_rng", self._turn_key)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _close_session, self._client, f"/v1/sessions/{self._session}"
        )
        self._finalizer.atexit = False

    @property
    def session(self) -> str | None:
        """The server's session id (None once it is lost)."""
        return self._session

    def _path(self, op: str) -> str:
        if self._session is None:
            raise ServiceUnavailable(
                f"the session on {self.url} is gone (server restarted or unreachable); "
                "reset() opens a new one"
            )
        return f"/v1/sessions/{self._session}/{op}"

    def _request(self, method: str, path: str, payload: Any, *, retry: bool) -> Any:
        """One request; retried on connection errors (on any transport error if ``retry``)."""
        import httpx

        content = wire.dumps(payload) if payload is not None else None
        delay = 0.1
        failure: Exception = ConnectionError("no attempt made")
        for attempt in range(self.retries + 1):
            try:
                response = self._client.request(
                    method, path, content=content, headers={"content-type": "application/json"}
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                failure = e  # it never reached the server: always safe to repeat
            except httpx.TransportError as e:
                if not retry:  # it may have been carried out: repeating could do it twice
                    return self._lost(e)
                failure = e
            else:
                return self._answer(response)
            if attempt < self.retries:
                time.sleep(delay)
                delay *= 3
        return self._lost(failure)

    def _lost(self, failure: Exception) -> Any:
        self._session = None
        raise ServiceUnavailable(
            f"env service at {self.url} unreachable ({type(failure).__name__}: {failure})"
        ) from None

    def _answer(self, response: Any) -> Any:
        if response.status_code == 200:
            return wire.loads(response.content)
        try:
            err = response.json()["error"]
            kind, message = str(err["type"]), str(err["message"])
        except Exception:
            kind, message = "HTTP", f"{response.status_code}: {response.text[:200]}"
        if kind == "UnknownSession":
            self._session = None
            raise ServiceUnavailable(f"{self.url}: {message}; reset() opens a new session")
        if kind in ("EnvError", "Timeout"):
            self._session = None
            raise RemoteEnvError(f"{self.env_id} on {self.url}: {message}")
        if kind == "Unauthorized":
            raise BadInput(f"{self.url} refused the request: {message} (--token)")
        error = _USAGE_ERRORS.get(kind)
        if error is not None:
            raise error(message)
        raise RemoteEnvError(f"{self.url} answered {kind}: {message}")

    def _op(self, op: str, payload: dict[str, Any], *, retry: bool) -> Any:
        answer = self._request("POST", self._path(op), payload, retry=retry)
        state = answer["state"]
        self._task_id, self._turn, self._done = state["task_id"], state["turn"], state["done"]
        if state.get("max_turns") is not None:
            self.max_turns = state["max_turns"]
        return answer["result"]

    def _call(self, method: str, *args: Any) -> Any:
        payload = {"method": method, "args": list(args)}
        return self._op("call", payload, retry=method in self._IDEMPOTENT_CALLS)

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode on the server (opening a new session if the old one is gone)."""
        gym.Env.reset(self, seed=seed)
        payload = {"seed": seed, "options": options}
        # A seeded reset is a fresh start: repeating it, or making it on a new session,
        # gives the same episode.
        if self._session is None:
            self._open()
        try:
            obs, info = self._op("reset", payload, retry=seed is not None)
        except ServiceUnavailable:
            if seed is None:
                raise
            self._open()
            obs, info = self._op("reset", payload, retry=True)
        self._last_obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One step on the server (never repeated: a step is not idempotent)."""
        obs, reward, terminated, truncated, info = self._op("step", {"action": action}, retry=False)
        self._last_obs = obs
        return obs, reward, terminated, truncated, info

    def render(self) -> Any:
        """The hosted env's ``render()``."""
        return self._call("render")

    def close(self) -> None:
        """Close the session on the server (if it is still reachable) and the connection."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._session = None

    # ------------------------------------------------------------------ forwarded methods
    def task_ids(self, split: str | None = None) -> list[str]:
        """The hosted env's task ids of ``split``."""
        return list(self._call("task_ids", split))

    def task_type_of(self, task_id: str) -> str:
        """The hosted env's task type of ``task_id``."""
        return str(self._call("task_type_of", task_id))

    def _has_task(self, task_id: str) -> bool:
        return any(task_id in self.task_ids(s) for s in ("train", "val", "test"))

    def check_answer(self, text: str) -> float:
        """The hosted env's ``check_answer``."""
        if "check_answer" not in self._methods:
            raise NotImplementedError(f"{self.env_id} has no gold answer")
        return float(self._call("check_answer", text))

    def oracle_action(self) -> Any:
        """The hosted env's scripted expert action."""
        if "oracle_action" not in self._methods:
            raise NotImplementedError(f"{self.env_id} has no oracle")
        return self._call("oracle_action")

    def set_rng(self, key: int | None) -> None:
        """Key the hosted env's per-turn randomness.

        The key is also kept here: a session opened again (after the server restarted) gets
        it before its first reset, as a local env keeps its key across resets.
        """
        self._turn_key = None if key is None else int(key)
        if self._session is None:
            return  # the next reset opens a session and keys it
        with contextlib.suppress(ServiceUnavailable):  # lost: the next reset keys a new one
            self._call("set_rng", self._turn_key)

    def snapshot(self) -> bytes:
        """The hosted env's snapshot (agentgym's own JSON format, never a pickle)."""
        if not self.supports_snapshot:
            raise NotImplementedError(f"{self.env_id} does not support snapshots")
        data = self._call("snapshot")
        if not isinstance(data, bytes):
            raise RemoteEnvError(f"{self.url} sent a snapshot that is not bytes")
        return data

    def restore(self, snapshot: bytes) -> None:
        """Restore a snapshot of the same id into the hosted env."""
        if not isinstance(snapshot, bytes):
            raise SnapshotMismatch("not an agentgym snapshot: expected bytes")
        self._call("restore", snapshot)

    @property
    def data_hash(self) -> str:
        """The hosted env's data hash."""
        return str(self._data_hash)

    def __repr__(self) -> str:
        """``RemoteEnv(env_id @ url)``."""
        return f"RemoteEnv({self.env_id} @ {self.url})"
