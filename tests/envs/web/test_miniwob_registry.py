"""MiniWoB++ ids and the action parser: no browser needed."""

import subprocess
import sys

import gymnasium as gym
import pytest

from agentgym.envs.web.miniwob import camel, env_id
from agentgym.envs.web.miniwob.actions import parse
from agentgym.envs.web.miniwob.oracle import SOLVERS
from agentgym.envs.web.miniwob.tasks import EXCLUDED, TASKS
from agentgym.registry import env_ids, env_info, env_note, make

REQUIRED_ORACLES = {
    "click-button",
    "click-link",
    "enter-text",
    "login-user",
    "click-checkboxes",
    "choose-list",
    "focus-text",
    "click-dialog",
    "click-tab",
    "enter-password",
}


def test_every_task_miniwob_registers_has_an_id_or_a_reason():
    import miniwob  # noqa: F401  (registers miniwob's own ids with gymnasium)

    shipped = {
        i.removeprefix("miniwob/").removesuffix("-v1")
        for i in gym.registry
        if i.startswith("miniwob/")
    }
    assert shipped == set(TASKS)
    ours = {i for i in env_ids("web") if i.startswith("agentgym/MiniWoB-")}
    assert ours == {env_id(t) for t in TASKS if t not in EXCLUDED}
    assert len(ours) == 106 and all(len(reason) > 20 for reason in EXCLUDED.values())


def test_ids_are_camel_case_and_name_their_task():
    assert camel("click-tab-2-easy") == "ClickTab2Easy"
    assert env_id("click-button") == "agentgym/MiniWoB-ClickButton-v0"
    info = env_info("agentgym/MiniWoB-ClickButton-v0")
    assert info.family == "web" and info.kwargs == {"task": "click-button"}


def test_tasks_without_a_solver_say_no_oracle():
    assert set(SOLVERS) >= REQUIRED_ORACLES and not set(SOLVERS) & set(EXCLUDED)
    for task in TASKS:
        if task in EXCLUDED:
            continue
        info, note = env_info(env_id(task)), env_note(env_id(task))
        assert ("no oracle" in info.description) == (task not in SOLVERS), task
        assert note == ("no oracle" if task not in SOLVERS else "oracle: scripted solver")


def test_registration_does_not_import_miniwob():
    code = "import sys, agentgym; agentgym.env_ids(); print('miniwob' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("click(5)", "click(5)"),
        ("  CLICK( [7] ) ", "click(7)"),
        ("click(ref=3)", "click(3)"),
        ('type(4, "Hello, world")', 'type(4, "Hello, world")'),
        ("type(4, 'single')", 'type(4, "single")'),
        ("type(4, plain words)", 'type(4, "plain words")'),
        ('type(4, "say \\"hi\\"")', 'type(4, "say \\"hi\\"")'),
        ('press("Enter")', 'press("<Enter>")'),
        ("press(<tab>)", 'press("<Tab>")'),
        ('press("C-a")', 'press("C-a")'),
        ("press(x)", 'press("x")'),
        ("wait()", "wait()"),
    ],
)
def test_actions_parse_to_their_canonical_text(text, canonical):
    action, error = parse(text)
    assert error is None and action is not None
    assert action.text == canonical
    assert parse(action.text)[0] == action


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "click",
        "click()",
        "click(five)",
        "type(5)",
        'type(5, "")',
        'type(x, "a")',
        'type(5, "tab\\there")',
        'press("F13")',
        'press("A-<F4>")',
        "wait(3)",
        "scroll(3)",
        "x" * 100_000,
        None,
        3,
    ],
)
def test_bad_actions_are_refused_with_a_reason(bad):
    action, error = parse(bad)
    assert action is None
    assert isinstance(error, str) and error and len(error) < 400


def test_a_missing_browser_is_a_clear_error(monkeypatch, tmp_path):
    from agentgym.envs.web.browser import BrowserMissing

    monkeypatch.setenv("MINIWOB_CHROME_BINARY", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("MINIWOB_CHROMEDRIVER", str(tmp_path / "no-chromedriver"))
    env = make("agentgym/MiniWoB-ClickButton-v0")
    with pytest.raises(BrowserMissing, match="apt-get install -y chromium chromium-driver"):
        env.reset(seed=0)
    env.close()
