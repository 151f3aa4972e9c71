"""The shop's browser mode in headless Chromium: the project's app on 127.0.0.1, driven by
Selenium, against the text mode it must equal.

Needs ``apt-get install -y chromium chromium-driver`` (CI installs it; a missing browser is a
failure, not a skip). Selenium Manager is never asked for anything: the browser and driver
paths are always given explicitly, and ``SE_OFFLINE`` is set.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import chromium
import numpy as np
import pytest
from chromium import require_chromium

import agentgym
from agentgym.agents.builtin import OracleAgent, RandomAgent

pytestmark = pytest.mark.browser

BROWSER_ID = "agentgym/Shop-Browser-Small-v0"
TEXT_ID = "agentgym/Shop-Small-v0"
EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def env() -> Iterator[Any]:
    """One browser env shared by the module's tests (each test resets it)."""
    require_chromium()
    e = agentgym.make(BROWSER_ID)
    try:
        yield e
    finally:
        e.close()


def _our_browser_pids() -> list[int]:
    from agentgym.envs.web.browser import tag_prefix, tagged_pids

    return tagged_pids(tag_prefix())


def _chromium_main(browser: Any) -> int:
    """The pid of the browser's main Chromium process (not a helper, not the driver)."""
    for pid in browser.pids():
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"chromium" in cmdline[0] and not any(a.startswith(b"--type=") for a in cmdline):
            return pid
    raise AssertionError("no Chromium main process found")


# ---------------------------------------------------------------------------- the checker


def test_checker_passes() -> None:
    require_chromium()
    from agentgym.checker import check_agent_env

    report = check_agent_env(BROWSER_ID)
    assert report.ok, report.failures()


# ---------------------------------------------------------------------------- two modes


class NoisyRandom(RandomAgent):
    """The random agent, with a text-mode action that is invalid or odd one time in four."""

    ODD = ("click[no such button]", "search[cotton socks]", "click[buy now]", "search[]", "jump")

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        if self._rng.random() < 0.25:
            return self.ODD[int(self._rng.integers(len(self.ODD)))]
        return super().act(observation, info)


def _trace(env: Any, agent: Any, seed: int) -> list[tuple[Any, ...]]:
    """Per step: reward, termination, validity, state key, page name, admissible actions."""
    base = env.unwrapped
    obs, info = env.reset(seed=seed)
    agent.reset("trace", seed)
    if hasattr(agent, "bind"):
        agent.bind(base)
    steps: list[tuple[Any, ...]] = [(base._state.key(), base.page().name, info["state_key"])]
    while True:
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append(
            (
                action,
                reward,
                terminated,
                truncated,
                info["action_valid"],
                info["won"],
                info["progress"],
                base._state.key(),
                base.page().name,
                info["state_key"],
                info.get("admissible_actions"),
            )
        )
        if terminated or truncated:
            return steps


@pytest.mark.parametrize("agent_class", [OracleAgent, RandomAgent, NoisyRandom])
def test_same_episodes_in_both_modes(env: Any, agent_class: type) -> None:
    text = agentgym.make(TEXT_ID)
    seeds = range(3) if agent_class is OracleAgent else range(4)
    for seed in seeds:
        browser_steps = _trace(env, agent_class(), seed)
        text_steps = _trace(text, agent_class(), seed)
        assert browser_steps == text_steps, f"seed {seed}: the modes differ"
        if agent_class is OracleAgent:
            assert browser_steps[-1][1] == 1.0


def test_same_episodes_in_both_modes_with_the_menu() -> None:
    require_chromium()
    browser, text = agentgym.make(BROWSER_ID, menu=True), agentgym.make(TEXT_ID, menu=True)
    try:
        assert browser.action_space == text.action_space
        for seed in range(3):
            assert _trace(browser, RandomAgent(), seed) == _trace(text, RandomAgent(), seed)
        obs, info = browser.reset(seed=0)
        assert "Actions:\n[0] search[" in obs and info["action_mask"].dtype == np.int8
        assert _play_oracle(browser, seed=0)[0]
    finally:
        browser.close()


# ---------------------------------------------------------------------------- actions


def test_browser_actions_search_open_and_go_back(env: Any) -> None:
    base = env.unwrapped
    obs, info = env.reset(seed=3)
    assert obs.startswith("URL: /\n") and "[b1] textbox 'Search'" in obs
    query = base.goal.search
    obs, _, _, _, info = env.step(f"fill('b1', {query!r})")
    assert info["action_valid"] and f"value={query!r}" in obs
    assert base._state.page == "search"
    obs, _, _, _, info = env.step("press('b1', 'Enter')")
    assert info["action_valid"] and base._state.page == "results" and base._state.query == query
    results_key, results_obs = base._state.key(), obs
    first = next(line for line in obs.splitlines() if line.startswith("[b3] button"))
    obs, _, _, _, info = env.step("click('b3')")
    assert info["action_valid"] and base._state.page == "item"
    assert base._state.asin in first and obs.startswith(f"URL: /item/{base._state.asin}?")
    obs, _, _, _, info = env.step("go_back()")
    assert info["action_valid"] and base._state.key() == results_key and obs == results_obs
    obs, _, _, _, info = env.step("go_back()")
    assert info["action_valid"] and base._state.page == "search"
    obs, _, _, _, info = env.step("go_back()")
    assert not info["action_valid"] and "no earlier page" in obs


def test_scroll_moves_the_viewport_not_the_state(env: Any) -> None:
    base = env.unwrapped
    env.reset(seed=4)
    env.step(f"search[{base.goal.search}]")
    key = base._state.key()
    _, _, _, _, info = env.step("scroll('down')")
    assert info["action_valid"] and base._scroll > 0 and base._state.key() == key
    _, _, _, _, info = env.step("scroll('up')")
    assert info["action_valid"] and base._scroll == 0


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("click('b99')", "no element 'b99'"),
        ("fill('b2', 'socks')", "b2 is a button, not a textbox"),
        ("press('b1', 'Escape')", "Enter key"),
        ("scroll('left')", "'up' or 'down'"),
        ("click(b1)", "quoted strings"),
        ("fill('b1')", "takes 2 argument"),
        ("click('b1'", "cannot read"),
        ("click('b1', 'b2')", "takes 1 argument"),
        ("search[" + "x" * 600 + "]", "too long"),
        ("search[]", "empty query"),
        ("click[Next >]", "no button"),
        ("goto('http://example.com')", "invalid action"),
        (None, "invalid action"),
        (3, "invalid action"),
        ("", "invalid action"),
    ],
)
def test_bad_actions_are_invalid_observations(env: Any, action: Any, message: str) -> None:
    obs0, _ = env.reset(seed=5)
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["action_valid"] is False and reward == 0.0 and not terminated and not truncated
    assert obs.startswith("Invalid action:") and message in obs.splitlines()[0]
    # The page is as it was; a request the site refused shows its reason as an alert.
    page = [line for line in obs.splitlines()[1:] if not line.startswith("alert ")]
    assert page == obs0.splitlines()
    assert env.unwrapped._state.page == "search" and env.unwrapped._history == []


# ---------------------------------------------------------------------------- determinism


def test_observation_holds_no_session_port_or_timing(env: Any) -> None:
    from agentgym.envs.web.shop.app import site

    base = env.unwrapped
    obs, _ = env.reset(seed=6)
    obs2, *_ = env.step(base.oracle_action())
    port = str(site().server.port)
    for text in (obs, obs2):
        assert base._sid not in text and port not in text and "127.0.0.1" not in text


def test_snapshot_carries_typed_text_and_history(env: Any) -> None:
    base = env.unwrapped
    env.reset(seed=7)
    env.step(f"search[{base.goal.search}]")
    env.step("click('b3')")
    env.step("go_back()")
    env.step("click('b4')")
    snap = base.snapshot()
    follow = ["go_back()", "click[Back to Search]", "fill('b1', 'blue socks')"]
    fresh = agentgym.make(BROWSER_ID)
    try:
        fresh.unwrapped.restore(snap)
        assert fresh.unwrapped.snapshot() == snap
        for action in follow:
            a = env.step(action)
            b = fresh.step(action)
            assert json.dumps(a[:4]) == json.dumps(b[:4])
            assert a[4]["state_key"] == b[4]["state_key"]
        snap2 = base.snapshot()  # a filled box travels in the snapshot
        fresh.unwrapped.restore(snap2)
        a = env.step("press('b1', 'Enter')")
        b = fresh.step("press('b1', 'Enter')")
        assert a[0] == b[0] and "q=blue+socks" in a[0]
    finally:
        fresh.close()


# ---------------------------------------------------------------------------- escaping


def test_markup_in_titles_and_instructions_is_text(env: Any) -> None:
    from agentgym.envs.web.browser import listing
    from agentgym.envs.web.shop.app import Session, site
    from agentgym.envs.web.shop.catalog import Catalog, generate_products, make_goal
    from agentgym.envs.web.shop.pages import ShopState

    products = generate_products(40, seed=3)
    products[0] = replace(products[0], title=f"{EVIL} <b>bold</b> & co")
    cat = Catalog(products, name="evil", seed=3, n_goals=1)
    goal = make_goal(np.random.default_rng(0), products[0])
    goal = replace(goal, instruction=f"buy {EVIL} now")
    state = ShopState(page="item", query="x", page_no=1, asin=products[0].asin)
    session = Session(catalog=cat, goal=goal, state=state)
    sid = site().add(session)
    browser = env.unwrapped.browser
    env.reset(seed=0)  # the browser is up
    page = browser.open(site().url(sid, f"/item/{products[0].asin}?q=x&page=1"))
    text = listing(page)
    assert f"StaticText '{EVIL} <b>bold</b> & co'" in text
    assert f"StaticText 'Instruction: buy {EVIL} now'" in text
    scripts = browser.call(
        "execute_script", "return document.querySelectorAll('main script, b').length"
    )
    assert scripts == 0
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.driver.switch_to.alert  # noqa: B018  (the property raises when no alert is open)
    env.unwrapped._synced = False  # the shared env's page was replaced: load it again


# ---------------------------------------------------------------------------- lifecycle


def test_close_leaves_no_browser_process() -> None:
    require_chromium()
    gc.collect()  # browsers of envs dropped by earlier tests end now, not during this test
    before = _our_browser_pids()
    e = agentgym.make(BROWSER_ID)
    assert _our_browser_pids() == before  # started lazily
    e.reset(seed=0)
    browser = e.unwrapped.browser
    mine = browser.pids()
    home = browser._h.home
    assert len(mine) >= 3 and set(mine) <= set(_our_browser_pids())
    assert _chromium_main(browser) in mine and Path(home).is_dir()
    e.reset(seed=1)
    assert browser.starts == 1  # reused across resets
    e.close()
    assert _our_browser_pids() == before and not Path(home).exists()


def test_exit_without_close_leaves_no_browser_process() -> None:
    require_chromium()
    code = (
        f"import agentgym; e = agentgym.make({BROWSER_ID!r}); e.reset(seed=0); "
        "print(e.unwrapped.browser._h.home, flush=True)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    home = out.stdout.strip().splitlines()[-1]
    from agentgym.envs.web.browser import tagged_pids

    deadline = time.monotonic() + 5
    while tagged_pids(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tagged_pids(home) == [] and not Path(home).exists()


def test_killed_browser_ends_the_episode_and_reset_recovers() -> None:
    require_chromium()
    e = agentgym.make(BROWSER_ID)
    try:
        base = e.unwrapped
        e.reset(seed=1)
        old = base.browser.pids()
        os.kill(_chromium_main(base.browser), signal.SIGKILL)
        obs, reward, terminated, truncated, info = e.step(base.oracle_action())
        assert truncated and not terminated and reward == 0.0
        assert info["action_valid"] is False and "browser failed" in info["error"]
        assert obs.startswith("Browser error:")
        assert not set(old) & set(_our_browser_pids())  # the dead browser is cleaned away
        with pytest.raises(agentgym.core.errors.ResetNeeded):
            e.step(base.oracle_action())
        won, _, _ = _play_oracle(e, seed=1)
        assert won and base.browser.starts == 2
    finally:
        e.close()


def test_hung_page_ends_the_episode_and_reset_recovers(monkeypatch: pytest.MonkeyPatch) -> None:
    require_chromium()
    from agentgym.envs.web.shop import app

    e = agentgym.make(BROWSER_ID, timeout_s=1.5)
    try:
        e.reset(seed=2)
        real = app.render_html

        def hang(*args: Any, **kwargs: Any) -> str:
            time.sleep(3.0)
            return real(*args, **kwargs)

        monkeypatch.setattr(app, "render_html", hang)
        _, _, terminated, truncated, info = e.step(e.unwrapped.oracle_action())
        assert truncated and not terminated and "error" in info
        monkeypatch.setattr(app, "render_html", real)
        with urllib.request.urlopen(app.site().server.url + "/static/shop.css", timeout=30):
            pass  # the site answers again once the hung request is over
        won, _, _ = _play_oracle(e, seed=2)
        assert won and e.unwrapped.browser.starts == 2
    finally:
        e.close()


def test_a_page_limit_shorter_than_a_start_still_starts_and_then_binds() -> None:
    """A first renderer on a busy machine can take longer than a page may (CI once failed a
    1.5 s limit at start): the start has its own allowance, and the page limit binds after."""
    require_chromium()
    from agentgym.envs.web.browser import Browser, BrowserConfig

    browser = Browser(BrowserConfig(timeout_s=0.001))
    try:
        browser.start()
        assert browser.starts == 1
        assert browser.driver.timeouts.page_load == browser.driver.timeouts.script == 0.001
    finally:
        browser.close()


def _play_oracle(e: Any, seed: int) -> tuple[bool, dict[str, Any], int]:
    from agentgym.checker.checks import play

    return play(e, OracleAgent(), seed=seed)


def test_missing_chromium_fails_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentgym.envs.web.browser import Browser, BrowserConfig, BrowserMissing

    with pytest.raises(BrowserMissing, match="apt-get install -y chromium chromium-driver"):
        Browser(BrowserConfig(chromium=str(tmp_path / "no-chromium"))).start()
    monkeypatch.setattr(chromium, "CHROMIUM", tmp_path / "no-chromium")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium chromium-driver"):
        require_chromium()


# ---------------------------------------------------------------------------- extras


def test_screenshot_in_info() -> None:
    require_chromium()
    e = agentgym.make(BROWSER_ID, screenshot=True)
    try:
        _, info = e.reset(seed=0)
        shot = info["screenshot"]
        assert shot.shape == (768, 1024, 3) and shot.dtype == np.uint8
        assert shot.min() < 128 < shot.max()  # text on a background, not a blank image
        _, _, _, _, info = e.step(e.unwrapped.oracle_action())
        assert info["screenshot"].shape == shot.shape and not np.array_equal(
            info["screenshot"], shot
        )
    finally:
        e.close()


def test_bench_browser_reports_its_numbers() -> None:
    require_chromium()
    from agentgym.envs.web.shop.bench_browser import bench_browser

    out = bench_browser(steps=12)
    json.dumps(out)
    for agent in ("oracle", "random"):
        assert out[agent]["steps"] == 12 and out[agent]["steps_per_s"] > 0
        assert out[agent]["reset_ms"] > 0 and out[agent]["text_steps_per_s"] > 0
    assert out["browser_start_s"] > 0 and out["browser_processes"] >= 3
    assert out["browser_pss_mb"] > 0 and out["browser_rss_mb"] >= out["browser_pss_mb"]
