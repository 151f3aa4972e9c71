"""MiniWoB++ envs in headless Chromium: checker, oracles, bad actions, determinism, cleanup.

Needs ``apt-get install -y chromium chromium-driver`` (a missing browser is a failure, not a
skip).
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromium import require_chromium

from agentgym.checker import check_agent_env, transcript_digest
from agentgym.core.errors import ResetNeeded, SnapshotMismatch
from agentgym.envs.web.miniwob import env_id
from agentgym.envs.web.miniwob.oracle import SOLVERS
from agentgym.registry import make

pytestmark = pytest.mark.browser

LOGIN = "agentgym/MiniWoB-LoginUser-v0"
BUTTON = "agentgym/MiniWoB-ClickButton-v0"


@pytest.fixture(scope="module")
def button() -> Iterator[Any]:
    """One click-button env (one browser) for the tests that only need some page."""
    require_chromium()
    env = make(BUTTON)
    yield env
    env.close()


# ---------------------------------------------------------------------- processes
def _browser_pids() -> set[int]:
    """This process's descendants that are chromedriver or Chromium processes."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rpartition(")")[2].split()[1]), []).append(int(entry))
    found, todo = set(), [os.getpid()]
    while todo:
        for pid in children.get(todo.pop(), []):
            todo.append(pid)
            try:
                if Path(f"/proc/{pid}/comm").read_text().startswith("chrom"):
                    found.add(pid)
            except OSError:
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _all_gone(pids: set[int]) -> bool:
    """Whether every pid has exited, polling for a few seconds (Chromium exits in stages)."""
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(_alive(p) for p in pids)


def test_browser_starts_on_first_reset_is_reused_and_close_leaves_no_process():
    require_chromium()
    before = _browser_pids()
    env = make("agentgym/MiniWoB-FocusText-v0")
    assert _browser_pids() == before  # nothing starts with the env
    env.reset(seed=0)
    mine = _browser_pids() - before
    assert len(mine) >= 2  # chromedriver and Chromium
    env.reset(seed=1)
    assert _browser_pids() - before == mine  # the same browser serves every reset
    env.close()
    assert _all_gone(mine)
    with pytest.raises(ResetNeeded):
        env.step("wait()")  # the episode ended with its browser
    env.reset(seed=2)  # a closed env starts a browser again
    again = _browser_pids() - before
    assert again and not again & mine
    env.close()
    assert _all_gone(again)


def test_interpreter_exit_leaves_no_process():
    require_chromium()
    # the child lists its own browser processes with this module's helper, then exits
    # without close(): the env's finalizer must quit the browser at exit
    code = (
        "import json, os\nfrom pathlib import Path\nimport agentgym\n"
        + inspect.getsource(_browser_pids)
        + "env = agentgym.make('agentgym/MiniWoB-FocusText-v0')\nenv.reset(seed=0)\n"
        + "print(json.dumps(sorted(_browser_pids())))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    pids = set(json.loads(out.stdout.splitlines()[-1]))
    assert len(pids) >= 2
    assert _all_gone(pids)


# ---------------------------------------------------------------------- checker and oracles
def test_checker_passes_on_a_task_with_an_oracle():
    require_chromium()
    report = check_agent_env(LOGIN)
    assert len(report.results) >= 12
    assert report.ok, report.failures()


def test_checker_skips_the_oracle_of_a_task_without_one():
    require_chromium()
    only = ["oracle_wins", "pickle_mid_episode", "snapshot_restore", "standard_info_keys"]
    report = check_agent_env("agentgym/MiniWoB-BookFlight-v0", only=only)
    assert report.ok, report.failures()
    oracle = next(r for r in report.results if r.name == "oracle_wins")
    assert oracle.detail == "no oracle: nothing to check"
    env = make("agentgym/MiniWoB-BookFlight-v0")
    env.reset(seed=0)
    assert env.unwrapped.has_oracle is False
    with pytest.raises(NotImplementedError, match="has no oracle"):
        env.unwrapped.oracle_action()
    env.close()


@pytest.mark.parametrize("task", sorted(SOLVERS))
def test_oracle_wins(task):
    require_chromium()
    env = make(env_id(task), split="test")
    try:
        for seed in range(3):
            env.reset(seed=seed)
            while True:
                obs, reward, term, trunc, info = env.step(env.unwrapped.oracle_action())
                assert info["action_valid"], obs
                if term or trunc:
                    break
            assert info["won"] and reward == 1.0, (task, seed, obs)
            assert "The episode is over: reward 1.00 (success)" in obs
    finally:
        env.close()


# ---------------------------------------------------------------------- actions and outcomes
BAD = [
    ("unparsable", "open the door"),
    ("unknown ref", "click(999)"),
    ("unknown ref typed into", 'type(999, "a")'),
    ("bad key", 'press("F13")'),
    ("empty text", "type(4, '')"),
    ("not text", 3),
    ("none", None),
]


@pytest.mark.parametrize(("name", "action"), BAD, ids=[b[0] for b in BAD])
def test_bad_actions_cost_a_turn_and_change_nothing(button, name, action):
    obs, info = button.reset(seed=4)
    obs2, reward, term, trunc, info2 = button.step(action)
    assert info2["action_valid"] is False
    assert obs2.startswith("Invalid action: ") and obs2.endswith(obs)
    assert (reward, term, trunc) == (0.0, False, False)
    assert info2["state_key"] == info["state_key"] and button.unwrapped.turn == 1


def test_a_wrong_button_ends_the_episode_with_miniwobs_reward(button):
    for seed in range(20):
        obs, info = button.reset(seed=seed)
        target = dict(_fields(button))["target"]
        view = button.unwrapped._current()
        wrong = [el for el in view.listed() if el.tag == "button" and el.text != target]
        if wrong:
            break
    obs, reward, term, trunc, info = button.step(f"click({wrong[0].ref})")
    assert (reward, term, trunc, info["won"]) == (-1.0, True, False, False)
    assert info["action_valid"] and "reward -1.00 (failure)" in obs
    assert info["reward_components"] == {"raw_reward": -1.0} and info["admissible_actions"] == []


def _fields(env: Any) -> list[tuple[str, str]]:
    from agentgym.envs.web.miniwob.oracle import fields_of

    return fields_of(env.unwrapped.task, env.unwrapped._current().utterance)


def test_observation_lists_elements_with_refs_and_clicks(button):
    obs, info = button.reset(options={"task_id": "click-button-00000"})  # miniwob's seed 0
    lines = obs.splitlines()
    assert lines[0] == 'Task: Click on the "okay" button.' and lines[1] == "Page:"
    assert '[5] button "okay"' in lines and '[7] input_text value=""' in lines
    assert info["admissible_actions"] == [f"click({r})" for r in range(4, 10)]
    assert info["task_type"] == "click-button" and info["task_id"].startswith("click-button-")
    assert "action_mask" not in info


def test_menu_mode_clicks_by_index_with_a_mask():
    require_chromium()
    env = make(BUTTON, menu=True)
    try:
        obs, info = env.reset(options={"task_id": "click-button-00000"})
        mask = info["action_mask"]
        assert mask.dtype == np.int8 and mask.shape == (256,) and mask.sum() == 6
        assert "[1] click(5)" in obs
        assert env.step(200)[4]["action_valid"] is False
        obs, reward, term, _, info = env.step(1)  # click(5): the "okay" button
        assert (reward, term, info["won"]) == (1.0, True, True)
        assert info["tool_calls"] == [{"name": "click", "arguments": {"ref": 5}}]
    finally:
        env.close()


def test_typing_and_keys_reach_the_page():
    require_chromium()
    env = make("agentgym/MiniWoB-EnterText-v0")
    try:
        obs, info = env.reset(seed=1)
        obs, *_, info = env.step('type(5, "Jer")')
        assert '#tt value="Jer" (focused)' in obs and info["action_valid"]
        obs, *_ = env.step('press("Backspace")')
        assert '#tt value="Je" (focused)' in obs
        assert env.step("wait()")[4]["action_valid"]
    finally:
        env.close()


def test_animations_settle_before_the_next_observation():
    require_chromium()
    env = make("agentgym/MiniWoB-ClickCollapsible-v0")
    try:
        obs, _ = env.reset(seed=0)
        header = env.unwrapped.oracle_action()
        obs, *_ = env.step(header)  # the accordion's 400 ms animation plays in virtual time
        assert "ui-state-active" in obs and ".ui-accordion-content-active" in obs
    finally:
        env.close()


# ---------------------------------------------------------------------- determinism, snapshots
IDS_FOR_PROCESSES = ["agentgym/MiniWoB-ClickCollapsible-v0", "agentgym/MiniWoB-ChooseDateEasy-v0"]


def test_same_seed_same_transcript_in_another_process():
    require_chromium()
    here = [transcript_digest(i, 7, steps=12) for i in IDS_FOR_PROCESSES]
    code = (
        "import json, sys; from agentgym.checker import transcript_digest;"
        "print(json.dumps([transcript_digest(i, 7, steps=12) for i in json.loads(sys.argv[1])]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(IDS_FOR_PROCESSES)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == here


def test_snapshot_replays_on_a_fresh_env_and_refuses_another_page():
    require_chromium()
    env, fresh = make(LOGIN), make(LOGIN)
    try:
        env.reset(seed=3)
        env.step(env.unwrapped.oracle_action())
        snap = env.unwrapped.snapshot()
        fresh.unwrapped.restore(snap)
        assert fresh.unwrapped.snapshot() == snap
        action = env.unwrapped.oracle_action()
        assert fresh.unwrapped.oracle_action() == action
        assert fresh.step(action)[0] == env.step(action)[0]
        state = json.loads(snap)
        state["state"]["page_sha1"] = "0" * 40
        with pytest.raises(SnapshotMismatch, match="gave another page"):
            fresh.unwrapped.restore(json.dumps(state).encode())
    finally:
        env.close()
        fresh.close()


def test_oracle_recovers_from_a_wrong_value():
    require_chromium()
    env = make(LOGIN, privileged=True)
    try:
        env.reset(seed=5)
        ref = next(el.ref for el in env.unwrapped._current().listed() if el.id == "username")
        *_, info = env.step(f'type({ref}, "wrong")')
        assert 'Expert\'s next action: press("C-a")' in info["privileged_context"]
        while True:
            *_, term, trunc, info = env.step(env.unwrapped.oracle_action())
            if term or trunc:
                break
        # 1 detour, 2 to clear the focused input (select all, delete), 3 to solve
        assert info["won"] and env.unwrapped.turn == 6
    finally:
        env.close()


def test_a_crashed_browser_truncates_the_episode_and_the_next_reset_recovers():
    require_chromium()
    env = make(LOGIN)
    try:
        env.reset(seed=0)
        browser = env.unwrapped._page.browser
        for pid in browser.pids():
            os.kill(pid, signal.SIGKILL)
        obs, reward, term, trunc, info = env.step("wait()")
        assert (reward, term, trunc) == (0.0, False, True)
        assert info["error"].startswith("the browser failed") and obs.startswith("Browser error")
        with pytest.raises(ResetNeeded):
            env.step("wait()")
        obs, info = env.reset(seed=0)  # a new browser, the same episode
        assert obs.startswith("Task: Enter the username") and browser.starts == 2
    finally:
        env.close()
