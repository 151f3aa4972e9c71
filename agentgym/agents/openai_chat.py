"""An agent backed by an OpenAI-compatible chat endpoint (``openai:URL#model``).

Works with the OpenAI API and with local servers that speak the same protocol (vLLM,
llama.cpp, SGLang, TGI, Ollama). The spec names the server's base URL and the model::

    openai:http://127.0.0.1:8000/v1#qwen2.5-7b

The API key comes from ``OPENAI_API_KEY``; local servers that need none get ``"EMPTY"``.
The ``openai`` package is imported only when an agent is built (``pip install openai``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from agentgym.core.errors import AgentGymError, BadInput

PREFIX = "openai:"
SYSTEM_PROMPT = "You are an agent in a text environment. Reply with exactly one action."
ADMISSIBLE_HINT = "Choose one of the listed actions and reply with its text."
_NUMBER = re.compile(r"[0-9]+")


class EndpointError(AgentGymError, RuntimeError):
    """The chat endpoint failed: unreachable, an HTTP error after retries, or a timeout."""


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``openai:URL#model`` into ``(base_url, model)``.

    The model is everything after the first ``#``, so model names may contain ``/``.

    Raises:
        BadInput: the spec lacks the prefix or the ``#``, the model is empty, or the URL is
            not an ``http``/``https`` URL with a host.
    """
    usage = "expected openai:URL#model, e.g. openai:http://127.0.0.1:8000/v1#qwen2.5-7b"
    if not spec.startswith(PREFIX):
        raise BadInput(f"not an openai agent spec {spec!r}: {usage}")
    url, sep, model = spec[len(PREFIX) :].partition("#")
    url, model = url.strip(), model.strip()
    if not sep:
        raise BadInput(f"agent spec {spec!r} names no model (no '#'): {usage}")
    if not model:
        raise BadInput(f"agent spec {spec!r} has an empty model name after '#': {usage}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadInput(f"agent spec {spec!r} needs an http:// or https:// URL: {usage}")
    return url, model


def load_openai_agent(spec: str) -> OpenAIChatAgent:
    """Build the agent for ``openai:URL#model`` with default settings.

    Raises:
        BadInput: a malformed spec.
        ImportError: the ``openai`` package is not installed.
    """
    base_url, model = parse_spec(spec)
    return OpenAIChatAgent(base_url, model)


def observation_text(observation: Any) -> str:
    """The observation as message text: strings as they are, other values as JSON."""
    if isinstance(observation, str):
        return observation
    try:
        return json.dumps(observation, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(observation)


def user_message(observation: Any, info: dict[str, Any]) -> str:
    """The user message for one turn: the observation, plus the admissible actions if hidden.

    The admissible actions are appended when the env lists them in ``info`` but the
    observation text does not show them all.
    """
    text = observation_text(observation)
    admissible = info.get("admissible_actions")
    if admissible and not all(str(a) in text for a in admissible):
        listing = "\n".join(f"- {a}" for a in admissible)
        text = f"{text}\n\nAdmissible actions:\n{listing}"
    return text


def map_reply(reply: str, info: dict[str, Any]) -> Any:
    """Turn the model's reply into an action.

    The stripped reply is matched case-insensitively against ``info["admissible_actions"]``
    (the listed item's own text is returned); else a bare number becomes an ``int`` when the
    env has ``info["action_mask"]``; else the stripped reply passes through unchanged and the
    env judges it.
    """
    text = reply.strip()
    key = text.casefold()
    for item in info.get("admissible_actions") or ():
        if str(item).strip().casefold() == key:
            return item
    if info.get("action_mask") is not None and _NUMBER.fullmatch(text):
        return int(text)
    return text


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as e:
        raise ImportError("the openai agent needs the openai package: pip install openai") from e
    return openai


class OpenAIChatAgent:
    """Plays one episode as one chat with an OpenAI-compatible endpoint.

    The conversation is a system prompt, then each observation as a user message and each
    reply as an assistant message; ``reset`` starts a new one. Requests are deterministic as
    far as the server allows: temperature 0 and the episode seed as ``seed``.

    Context window: requests carry the system prompt, the first turn pair (the first
    observation and the reply to it, pinned so that roles keep alternating), the last
    ``max_history`` turn pairs and the current observation.

    Args:
        base_url: the server's base URL, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server knows.
        max_tokens: the reply length limit per turn, in tokens.
        timeout: seconds to wait for one request.
        max_retries: retries of a failed request (connection errors, 408/429/5xx), with the
            client's exponential backoff.
        max_history: turn pairs kept besides the first (at least 0).
        api_key: the key; defaults to ``OPENAI_API_KEY`` or ``"EMPTY"``.

    Raises:
        ImportError: the ``openai`` package is not installed.
        BadInput: a setting out of range.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        max_tokens: int = 256,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_history: int = 20,
        api_key: str | None = None,
    ) -> None:
        """Check the settings and start with no conversation (arguments: see the class)."""
        _import_openai()  # fail at load time, not in the first episode
        if max_tokens < 1 or timeout <= 0 or max_retries < 0 or max_history < 0:
            raise BadInput(
                "openai agent: max_tokens >= 1, timeout > 0, max_retries >= 0 and "
                "max_history >= 0 are required"
            )
        self.base_url, self.model = base_url, model
        self.name = model
        self.max_tokens, self.timeout = max_tokens, timeout
        self.max_retries, self.max_history = max_retries, max_history
        self._api_key = api_key
        self._client: Any = None
        self._seed: int | None = None
        self._system: str | None = None
        self._history: list[dict[str, str]] = []
        self.tokens_used = 0

    @classmethod
    def from_spec(cls, spec: str, **settings: Any) -> OpenAIChatAgent:
        """Build from ``openai:URL#model``; ``settings`` are the constructor's keywords."""
        base_url, model = parse_spec(spec)
        return cls(base_url, model, **settings)

    # -- the Agent protocol -------------------------------------------------------------

    def reset(self, env_id: str, seed: int) -> None:
        """Start a new conversation; ``seed`` becomes the request seed of the episode."""
        self._seed = int(seed)
        self._system = None
        self._history = []
        self.tokens_used = 0

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        """Send the observation, return the reply mapped to an action (see ``map_reply``).

        Raises:
            EndpointError: the server could not be reached, answered with an HTTP error
                after the retries, or timed out (a one-line message).
            RuntimeError: ``act`` before ``reset``.
        """
        if self._seed is None:
            raise RuntimeError("the openai agent needs reset(env_id, seed) before act()")
        if self._system is None:
            self._system = system_prompt(info)
        user = {"role": "user", "content": user_message(observation, info)}
        reply = self._complete([*self.messages(), user])
        self._history += [user, {"role": "assistant", "content": reply}]
        return map_reply(reply, info)

    # -- conversation ---------------------------------------------------------------------

    @property
    def history(self) -> list[dict[str, str]]:
        """The whole conversation of the episode so far, without the system prompt."""
        return [dict(m) for m in self._history]

    def messages(self) -> list[dict[str, str]]:
        """The context sent before the next observation.

        That is the system prompt, the first turn pair and the last ``max_history`` turn pairs.
        """
        system = [{"role": "system", "content": self._system or SYSTEM_PROMPT}]
        pairs = len(self._history) // 2
        if pairs <= self.max_history + 1:
            return system + self._history
        recent = self._history[len(self._history) - 2 * self.max_history :]
        return system + self._history[:2] + recent

    # -- transport ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP client (a later ``act`` opens a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __getstate__(self) -> dict[str, Any]:
        """The agent's attributes for pickling, without the HTTP client."""
        state = dict(self.__dict__)
        state["_client"] = None  # HTTP clients do not pickle; a worker opens its own
        return state

    def _get_client(self) -> Any:
        if self._client is None:
            openai = _import_openai()
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self._api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                timeout=self.timeout,
                max_retries=self.max_retries,
            )
        return self._client

    def _complete(self, messages: Sequence[dict[str, str]]) -> str:
        """One chat completion; returns the reply text and counts its tokens."""
        openai = _import_openai()
        try:
            response = self._get_client().chat.completions.create(
                model=self.model,
                messages=list(messages),
                temperature=0,
                seed=self._seed,
                max_tokens=self.max_tokens,
            )
        except openai.OpenAIError as e:
            raise EndpointError(self._describe(e, openai)) from e
        if not response.choices:
            raise EndpointError(f"{self._where()}: the response has no choices")
        usage = getattr(response, "usage", None)
        self.tokens_used += int(getattr(usage, "completion_tokens", 0) or 0)
        return response.choices[0].message.content or ""

    def _where(self) -> str:
        return f"chat endpoint {self.base_url} (model {self.model})"

    def _describe(self, error: Exception, openai: Any) -> str:
        """One line saying what went wrong, without bodies that span pages."""
        tries = f"after {self.max_retries} retries" if self.max_retries else "no retries"
        if isinstance(error, openai.APITimeoutError):
            what = f"timed out after {self.timeout:g} s ({tries})"
        elif isinstance(error, openai.APIConnectionError):
            cause = _one_line(str(error.__cause__ or error))
            what = f"cannot connect ({tries}): {cause}"
        elif isinstance(error, openai.APIStatusError):
            what = f"HTTP {error.status_code} ({tries}): {_one_line(_status_detail(error))}"
        else:
            what = f"{type(error).__name__}: {_one_line(str(error))}"
        return f"{self._where()}: {what}"


def system_prompt(info: dict[str, Any]) -> str:
    """The generic system prompt, with the hint to pick a listed action where the env lists them.

    The hint is added when ``info`` has ``info["admissible_actions"]``.
    """
    if info.get("admissible_actions"):
        return f"{SYSTEM_PROMPT} {ADMISSIBLE_HINT}"
    return SYSTEM_PROMPT


def _status_detail(error: Any) -> str:
    """The server's own error message where its body follows the OpenAI error shape."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)
    text = getattr(getattr(error, "response", None), "text", "") or ""
    return text or str(error)


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
