"""The openai:URL#model agent against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import pickle
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

import agentgym
from agentgym.agents.openai_chat import (
    ADMISSIBLE_HINT,
    SYSTEM_PROMPT,
    EndpointError,
    OpenAIChatAgent,
    load_openai_agent,
    map_reply,
    parse_spec,
    user_message,
)
from agentgym.agents.protocol import Agent
from agentgym.core.errors import BadInput

MODEL = "fake-model"
MENU_LINE = re.compile(r"^\[\d+\] (.+)$", re.MULTILINE)
LISTED_LINE = re.compile(r"^- (.+)$", re.MULTILINE)


class FakeChatServer:
    """A deterministic ``POST /v1/chat/completions`` on a loopback port.

    Replies with the next scripted reply if any, else with the first menu or listed action
    found in the last user message, else ``"look"``. Records every request it gets.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: list[str] = []
        self.status = 200
        self.delay = 0.0
        self.usage = True
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reply_for(self, body: dict[str, Any]) -> str:
        if self.replies:
            return self.replies.pop(0)
        text = body["messages"][-1]["content"]
        match = MENU_LINE.search(text) or LISTED_LINE.search(text)
        return match.group(1) if match else "look"

    def response(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.status != 200:
            return self.status, {"error": {"message": "the fake server broke", "type": "x"}}
        reply = self.reply_for(body)
        doc: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
        }
        if self.usage:
            n = len(reply.split())
            doc["usage"] = {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n}
        return 200, doc

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append({"path": self.path, "headers": headers, "body": body})
                time.sleep(server.delay)
                if self.path != "/v1/chat/completions":
                    status, doc = 404, {"error": {"message": "not found"}}
                else:
                    status, doc = server.response(body)
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)  # the client may have given up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy may route the loopback requests elsewhere; no real key is sent."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    fake = FakeChatServer()
    fake.thread.start()
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def make_agent(server: FakeChatServer, **settings: Any) -> OpenAIChatAgent:
    return OpenAIChatAgent(server.url, MODEL, max_retries=0, timeout=10, **settings)


def sent(server: FakeChatServer, i: int = -1) -> list[dict[str, str]]:
    return server.requests[i]["body"]["messages"]


# -- specs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:http://127.0.0.1:8000/v1#qwen2.5-7b", ("http://127.0.0.1:8000/v1", "qwen2.5-7b")),
        ("openai:https://api.example/v1#org/model-1", ("https://api.example/v1", "org/model-1")),
    ],
)
def test_parse_spec(spec: str, expected: tuple[str, str]) -> None:
    assert parse_spec(spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "openai:http://127.0.0.1:8000/v1",  # no '#'
        "openai:http://127.0.0.1:8000/v1#",  # empty model
        "openai:http://127.0.0.1:8000/v1#   ",
        "openai:ftp://127.0.0.1/v1#m",  # not http(s)
        "openai:127.0.0.1:8000/v1#m",  # no scheme
        "openai:http://#m",  # no host
        "openai:#m",
        "http://127.0.0.1:8000/v1#m",  # no prefix
    ],
)
def test_malformed_spec_is_bad_input(spec: str) -> None:
    with pytest.raises(BadInput, match="openai:URL#model"):
        parse_spec(spec)
    with pytest.raises(BadInput):
        load_openai_agent(spec)


def test_load_openai_agent_follows_the_protocol() -> None:
    agent = load_openai_agent("openai:http://127.0.0.1:9/v1#m")
    assert isinstance(agent, Agent)
    assert (agent.base_url, agent.model, agent.max_tokens) == ("http://127.0.0.1:9/v1", "m", 256)
    assert (agent.timeout, agent.max_retries, agent.max_history) == (60.0, 2, 20)


def test_missing_openai_package_names_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match="pip install openai"):
        load_openai_agent("openai:http://127.0.0.1:9/v1#m")


def test_importing_agents_does_not_import_openai() -> None:
    code = (
        "import sys, agentgym.agents, agentgym.agents.openai_chat; "
        "assert 'openai' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- conversation and requests -----------------------------------------------------------


def test_messages_and_deterministic_request(server: FakeChatServer) -> None:
    server.replies = ["go north", "take key"]
    agent = make_agent(server)
    agent.reset("agentgym/Fake-v0", 123)
    info = {"admissible_actions": ["go north", "take key"]}
    assert agent.act("[0] go north\n[1] take key", info) == "go north"
    assert agent.act("You are north.\n[0] go north\n[1] take key", info) == "take key"

    system = {"role": "system", "content": f"{SYSTEM_PROMPT} {ADMISSIBLE_HINT}"}
    user1 = {"role": "user", "content": "[0] go north\n[1] take key"}
    assert sent(server, 0) == [system, user1]
    assert sent(server, 1) == [
        system,
        user1,
        {"role": "assistant", "content": "go north"},
        {"role": "user", "content": "You are north.\n[0] go north\n[1] take key"},
    ]
    for request in server.requests:
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["authorization"] == "Bearer EMPTY"
        body = request["body"]
        assert (body["model"], body["temperature"], body["seed"]) == (MODEL, 0, 123)
        assert body["max_tokens"] == 256


def test_plain_system_prompt_and_api_key(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    agent = make_agent(server, max_tokens=17)
    agent.reset("agentgym/Fake-v0", 5)
    agent.act("A dark room.", {})
    assert sent(server)[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert server.requests[-1]["headers"]["authorization"] == "Bearer sk-test-only"
    assert server.requests[-1]["body"]["max_tokens"] == 17


def test_admissible_actions_are_listed_when_the_observation_lacks_them() -> None:
    info = {"admissible_actions": ["open door", "look"]}
    assert user_message("A hall.", info) == "A hall.\n\nAdmissible actions:\n- open door\n- look"
    assert user_message("A hall. Try: open door, look", info) == "A hall. Try: open door, look"
    assert user_message({"b": 1, "a": [2]}, {}) == '{"a": [2], "b": 1}'


def test_history_window_keeps_first_pair_and_last_pairs(server: FakeChatServer) -> None:
    agent = make_agent(server, max_history=2)
    agent.reset("agentgym/Fake-v0", 0)
    for turn in range(1, 7):
        agent.act(f"obs {turn}", {})
    contents = [m["content"] for m in sent(server)]
    assert contents[1:] == ["obs 1", "look", "obs 4", "look", "obs 5", "look", "obs 6"]
    roles = [m["role"] for m in sent(server)]
    assert roles == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert len(agent.history) == 12  # the agent remembers everything; it sends a window


def test_history_window_of_zero(server: FakeChatServer) -> None:
    agent = make_agent(server, max_history=0)
    agent.reset("agentgym/Fake-v0", 0)
    for turn in range(1, 4):
        agent.act(f"obs {turn}", {})
    assert [m["content"] for m in sent(server)][1:] == ["obs 1", "look", "obs 3"]


@pytest.mark.parametrize(
    ("reply", "info", "action"),
    [
        (
            "  SEARCH: orarshire \n",
            {"admissible_actions": ["search: Orarshire"]},
            "search: Orarshire",
        ),
        (
            "Search: Orarshire",
            {"admissible_actions": ["  search: orarshire "]},
            "  search: orarshire ",
        ),
        ("1", {"action_mask": np.array([1, 1], dtype=np.int8)}, 1),
        (" 12 ", {"action_mask": np.array([1, 1], dtype=np.int8)}, 12),
        ("1", {}, "1"),  # no menu: a number is text
        ("1.5", {"action_mask": np.array([1, 1], dtype=np.int8)}, "1.5"),
        ("search: Elsewhere", {"admissible_actions": ["search: Orarshire"]}, "search: Elsewhere"),
        ("  go north\n", {}, "go north"),
        ("", {}, ""),
    ],
)
def test_action_mapping(reply: str, info: dict[str, Any], action: Any) -> None:
    assert map_reply(reply, info) == action
    assert type(map_reply(reply, info)) is type(action)


def test_action_mapping_through_the_server(server: FakeChatServer) -> None:
    server.replies = ["  TAKE KEY ", "0", "dance wildly"]
    agent = make_agent(server)
    agent.reset("agentgym/Fake-v0", 0)
    assert agent.act("x", {"admissible_actions": ["go north", "take key"]}) == "take key"
    assert agent.act("x", {"action_mask": np.ones(3, dtype=np.int8)}) == 0
    assert agent.act("x", {}) == "dance wildly"


def test_tokens_used_and_reset_clears(server: FakeChatServer) -> None:
    server.replies = ["one two three", "four", "five six"]
    agent = make_agent(server)
    assert agent.tokens_used == 0
    agent.reset("agentgym/Fake-v0", 1)
    agent.act("a", {})
    agent.act("b", {})
    assert agent.tokens_used == 4
    agent.reset("agentgym/Fake-v0", 2)
    assert agent.tokens_used == 0 and agent.history == []
    agent.act("c", {})
    assert [m["role"] for m in sent(server)] == ["system", "user"]
    assert server.requests[-1]["body"]["seed"] == 2
    assert agent.tokens_used == 2


def test_tokens_used_is_zero_without_usage(server: FakeChatServer) -> None:
    server.usage = False
    agent = make_agent(server)
    agent.reset("agentgym/Fake-v0", 1)
    assert agent.act("a", {}) == "look"
    assert agent.tokens_used == 0


def test_act_before_reset_raises(server: FakeChatServer) -> None:
    with pytest.raises(RuntimeError, match="reset"):
        make_agent(server).act("a", {})
    assert server.requests == []


def test_agent_pickles_without_its_client(server: FakeChatServer) -> None:
    agent = make_agent(server)
    agent.reset("agentgym/Fake-v0", 1)
    agent.act("a", {})
    copy = pickle.loads(pickle.dumps(agent))
    assert copy.act("b", {}) == "look"
    assert len(copy.history) == 4
    agent.close()
    copy.close()


# -- errors ------------------------------------------------------------------------------


def test_http_500_raises_one_clear_line(server: FakeChatServer) -> None:
    server.status = 500
    agent = make_agent(server)
    agent.reset("agentgym/Fake-v0", 1)
    with pytest.raises(EndpointError) as caught:
        agent.act("a", {})
    message = str(caught.value)
    assert "\n" not in message
    assert "HTTP 500" in message and "the fake server broke" in message
    assert server.url in message and MODEL in message
    assert len(server.requests) == 1  # max_retries=0
    assert agent.history == []  # the failed turn is not half-recorded


def test_closed_port_raises() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = OpenAIChatAgent(f"http://127.0.0.1:{port}/v1", MODEL, max_retries=0, timeout=5)
    agent.reset("agentgym/Fake-v0", 1)
    with pytest.raises(EndpointError, match="cannot connect") as caught:
        agent.act("a", {})
    assert "\n" not in str(caught.value)


def test_timeout_raises(server: FakeChatServer) -> None:
    server.delay = 1.0
    agent = OpenAIChatAgent(server.url, MODEL, max_retries=0, timeout=0.2)
    agent.reset("agentgym/Fake-v0", 1)
    with pytest.raises(EndpointError, match=r"timed out after 0\.2 s"):
        agent.act("a", {})


@pytest.mark.parametrize(
    "settings",
    [{"max_tokens": 0}, {"timeout": 0}, {"max_retries": -1}, {"max_history": -1}],
)
def test_bad_settings_are_bad_input(settings: dict[str, Any]) -> None:
    with pytest.raises(BadInput):
        OpenAIChatAgent("http://127.0.0.1:9/v1", MODEL, **settings)


# -- end to end --------------------------------------------------------------------------


def test_plays_search_menu_against_the_fake_server(server: FakeChatServer) -> None:
    env = agentgym.make("agentgym/Search-Menu-Small-v0")
    agent = load_openai_agent(f"openai:{server.url}#{MODEL}")
    agent.max_retries = 0
    obs, info = env.reset(seed=3)
    agent.reset("agentgym/Search-Menu-Small-v0", 3)
    steps = 0
    for steps in range(1, 5):  # noqa: B007
        action = agent.act(obs, info)
        assert action in info["admissible_actions"]
        obs, _, terminated, truncated, info = env.step(action)
        assert info["action_valid"]
        if terminated or truncated:
            break
    assert len(server.requests) == steps
    assert agent.tokens_used > 0
    assert sent(server)[0]["content"] == f"{SYSTEM_PROMPT} {ADMISSIBLE_HINT}"
    assert all(r["body"]["seed"] == 3 for r in server.requests)
    agent.close()
    env.close()
