"""The leaderboard page in headless Chromium: the real server (uvicorn on 127.0.0.1) over a
real store with real results files, driven by Selenium.

Needs ``apt-get install -y chromium chromium-driver`` (CI installs it; a missing browser is a
failure, not a skip). Selenium Manager is never asked for anything: the browser and driver
paths are always given explicitly, and ``SE_OFFLINE`` is set.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromium
import pytest
from chromium import CHROMEDRIVER, CHROMIUM, require_chromium

pytestmark = pytest.mark.browser

ENV = "agentgym/Search-Menu-Small-v0"
HEURISTIC = "agentgym.envs.search.agents:MenuHeuristicAgent"
EVIL = "<script>alert(1)</script>"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# (display name, agent, seeds, root seed): four distinct means (1.0, 0.25, 0.125, 0.0).
SUBMISSIONS = [
    ("oracle", "oracle", 20, 0),
    ("heuristic", HEURISTIC, 40, 0),
    ("random", "random", 20, 1),
    (EVIL, HEURISTIC, 20, 2),
]


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A store holding the four submissions, each from a real ``evaluate`` run."""
    from agentgym.harness.evaluate import evaluate
    from agentgym.leaderboard.store import Leaderboard

    tmp = tmp_path_factory.mktemp("board")
    lb = Leaderboard(tmp / "board.sqlite")
    for i, (name, agent, seeds, root_seed) in enumerate(SUBMISSIONS):
        out = tmp / f"results-{i}.json"
        evaluate(agent, [ENV], seeds=seeds, root_seed=root_seed, out=out)
        lb.submit(json.loads(out.read_text()), name=name)
    return lb


@pytest.fixture(scope="module")
def base_url(board: Any) -> Iterator[str]:
    """The real server in a background thread on a free port of 127.0.0.1."""
    import uvicorn

    from agentgym.leaderboard.server import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # held from here on, so no other process can take the port
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(board), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the leaderboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium with a fresh profile, nothing fetched from the network."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    mp = pytest.MonkeyPatch()
    mp.setenv("SE_OFFLINE", "true")  # belt and braces: Selenium Manager must not download
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    home = tmp_path_factory.mktemp("chromium")
    profile = home / "profile"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1280,800",
    ):
        options.add_argument(flag)
    # Chromium keeps crash reports under $XDG_CONFIG_HOME/chromium whatever the profile.
    env = dict(os.environ, XDG_CONFIG_HOME=str(home / "config"), XDG_CACHE_HOME=str(home / "cache"))
    drv = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER), env=env))
    drv.set_page_load_timeout(30)
    try:
        yield drv
    finally:
        drv.quit()
        mp.undo()
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------------------- helpers


def _open_env_page(driver: Any, base_url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base_url}/env/{ENV}")
    # The sorter is a deferred static script; it marks the table when its handlers are on.
    WebDriverWait(driver, 10).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#ranking[data-sort-ready='1']"))
    )


def _column(driver: Any, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, f"#ranking tbody tr {css}")]


def _click_header(driver: Any, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f"#ranking th[data-key='{key}'] button").click()


def _assert_no_alert(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert  # noqa: B018  (the property raises when no alert is open)


# ---------------------------------------------------------------------------- tests


def test_env_page_rows_in_rank_order(driver: Any, base_url: str, board: Any) -> None:
    _open_env_page(driver, base_url)
    expected = [r["name"] for r in sorted(board.rows(ENV), key=lambda r: (r["rank"], r["id"]))]
    assert expected[0] == "oracle"
    assert _column(driver, "a.name") == expected
    ranks = [int(x) for x in _column(driver, "td.rank")]
    assert ranks == sorted(ranks) and ranks[0] == 1
    means = [float(x) for x in _column(driver, "td.mean")]
    assert means == sorted(means, reverse=True)
    assert driver.title.startswith(ENV)


def test_clicking_headers_resorts(driver: Any, base_url: str, board: Any) -> None:
    _open_env_page(driver, base_url)
    _click_header(driver, "name")
    assert _column(driver, "a.name") == [EVIL, "heuristic", "oracle", "random"]
    _click_header(driver, "name")
    assert _column(driver, "a.name") == ["random", "oracle", "heuristic", EVIL]

    _click_header(driver, "mean")
    by_mean = sorted(board.rows(ENV), key=lambda r: (r["mean"], r["rank"]))
    assert _column(driver, "a.name") == [r["name"] for r in by_mean]
    assert _column(driver, "a.name") == ["random", "heuristic", EVIL, "oracle"]
    means = [float(x) for x in _column(driver, "td.mean")]
    assert means == sorted(means)
    header = driver.find_element("css selector", "#ranking th[data-key='mean']")
    assert header.get_attribute("aria-sort") == "ascending"

    _click_header(driver, "rank")  # another column was sorted last, so rank ascends again
    assert _column(driver, "a.name") == ["oracle", EVIL, "heuristic", "random"]
    _click_header(driver, "rank")
    assert _column(driver, "a.name") == ["random", "heuristic", EVIL, "oracle"]


def test_malicious_name_is_text_and_runs_nothing(driver: Any, base_url: str) -> None:
    from selenium.webdriver.common.by import By

    _open_env_page(driver, base_url)
    _assert_no_alert(driver)
    names = driver.find_elements(By.CSS_SELECTOR, "#ranking a.name")
    assert EVIL in [e.text for e in names]
    assert driver.find_elements(By.CSS_SELECTOR, "#ranking script") == []
    evil_link = next(e for e in names if e.text == EVIL)
    evil_link.click()
    heading = driver.find_element(By.CSS_SELECTOR, "h1 .name")
    assert heading.text == EVIL
    _assert_no_alert(driver)


def test_submission_page_shows_agent_spec(driver: Any, base_url: str, board: Any) -> None:
    from selenium.webdriver.common.by import By

    row = next(r for r in board.rows(ENV) if r["name"] == "heuristic")
    driver.get(f"{base_url}/submission/{row['id']}")
    assert driver.find_element(By.CSS_SELECTOR, "code.agent-spec").text == HEURISTIC
    page = driver.find_element(By.TAG_NAME, "main").text
    assert ENV in page and "test" in page and "40 runs" in page
    assert "bridge" in page or "compositional" in page  # the per-task-type table
    driver.get(f"{base_url}/submission/99999")
    assert "no submission with id 99999" in driver.find_element(By.TAG_NAME, "main").text


def test_index_links_to_the_env_page(driver: Any, base_url: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{base_url}/")
    link = driver.find_element(By.CSS_SELECTOR, "a.env-link")
    assert link.text == ENV
    leader = driver.find_element(By.CSS_SELECTOR, "#envs a.name")
    assert leader.text == "oracle"
    link.click()
    assert driver.current_url == f"{base_url}/env/{ENV}"
    assert len(_column(driver, "a.name")) == len(SUBMISSIONS)


def test_missing_chromium_fails_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(chromium, "CHROMIUM", tmp_path / "no-chromium")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium chromium-driver"):
        require_chromium()


def test_screenshot_of_env_page(driver: Any, base_url: str, tmp_path: Path) -> None:
    _open_env_page(driver, base_url)
    shot = tmp_path / "env_page.png"
    assert driver.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000
