"""The shop's web app without a browser: URLs that spell states, forms, escaping, headers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import agentgym
from agentgym.agents.builtin import OracleAgent, RandomAgent
from agentgym.envs.web.shop.app import Session, ShopSite, parse_state, state_token, state_url
from agentgym.envs.web.shop.catalog import Catalog, catalog, generate_products, make_goal
from agentgym.envs.web.shop.pages import ShopState

EVIL = "<script>alert(1)</script>"


def _states(agent: Any, seed: int) -> list[ShopState]:
    env = agentgym.make("agentgym/Shop-Small-v0")
    obs, info = env.reset(seed=seed)
    agent.reset("app", seed)
    if hasattr(agent, "bind"):
        agent.bind(env.unwrapped)
    seen = []
    while True:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        seen.append(replace(env.unwrapped._state, options=dict(env.unwrapped._state.options)))
        if terminated or truncated:
            return seen


@pytest.mark.parametrize("agent_class", [OracleAgent, RandomAgent])
def test_every_state_round_trips_through_its_url(agent_class: type) -> None:
    cat = catalog("small")
    for seed in range(5):
        for state in _states(agent_class(), seed):
            if state.page == "done":
                assert state_url(state) == "/done" and parse_state("done", "", cat) is None
                continue
            path, _, query = state_url(state).partition("?")
            assert parse_state(path, query, cat) == state, state_url(state)


@pytest.mark.parametrize(
    "url",
    [
        "/results?page=1",  # no query
        "/results?q=socks&page=0",
        "/results?q=socks&page=99",
        "/results?q=socks&page=x",
        "/item/NOPE?q=socks&page=1",
        "/item/{asin}?q=socks&page=1&colour=red",
        "/item/{asin}?q=socks&page=1&color=no-such-colour",
        "/item/{asin}/manual?q=socks&page=1",
        "/nowhere",
        "/?q=socks",
    ],
)
def test_urls_that_are_no_page_parse_to_none(url: str) -> None:
    cat = catalog("small")
    asin = next(p.asin for p in cat.products if dict(p.options).get("color"))
    path, _, query = url.format(asin=asin).partition("?")
    assert parse_state(path, query, cat) is None


def _client(session: Session) -> tuple[TestClient, str]:
    shop = ShopSite()
    return TestClient(shop.app), shop.add(session)


def _evil_session() -> Session:
    products = generate_products(30, seed=5)
    products[0] = replace(products[0], title=f"{EVIL} & <b>co</b>")
    cat = Catalog(products, name="evil-app", seed=5, n_goals=1)
    goal = replace(make_goal(np.random.default_rng(1), products[0]), instruction=f"buy {EVIL}")
    state = ShopState(page="item", query="x", page_no=1, asin=products[0].asin)
    return Session(catalog=cat, goal=goal, state=state)


def test_pages_escape_markup_and_send_a_strict_policy() -> None:
    session = _evil_session()
    client, sid = _client(session)
    asin = session.state.asin
    response = client.get(f"/s/{sid}/item/{asin}?q=x&page=1")
    assert response.status_code == 200
    html = response.text
    assert EVIL not in html and "<b>co</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;co&lt;/b&gt;" in html
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-page-url"] == f"/s/{sid}/item/{asin}?q=x&page=1"


def test_a_form_from_another_state_is_refused() -> None:
    session = _evil_session()
    client, sid = _client(session)
    before = session.state.key()
    stale = state_token(ShopState())
    response = client.post(f"/s/{sid}/act", content=f"key={stale}&bid=b1")
    assert response.status_code == 409 and "out of date" in response.text
    assert session.state.key() == before and session.error is not None
    response = client.post(f"/s/{sid}/act", content=f"key={state_token(session.state)}&bid=b1")
    assert response.status_code == 200 and session.state.page == "search"  # Back to Search
    assert session.error is None and response.headers["x-page-url"] == f"/s/{sid}/"


def test_unknown_sessions_and_files_are_not_found() -> None:
    client, _ = _client(_evil_session())
    assert client.get("/s/nobody/").status_code == 404
    assert client.post("/s/nobody/act", content="bid=b1").status_code == 404
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/shop.js").headers["content-type"].startswith("text/javascript")
