"""The ALFWorld explorer without privileged knowledge: its goal parsing, and what it reaches.

Games are generated on first use (about 0.15 s each on the small preset); the tests play the
test split's first tasks of each type, and 30 seeds through the harness.
"""

import pytest

from agentgym.envs.text import alfworld_gen as gen
from agentgym.envs.text.alfworld_env import ALFWorldEnv
from agentgym.envs.text.alfworld_explorer import ExplorerAgent, Goal, kind_of, parse_goal
from agentgym.harness.evaluate import evaluate

SMALL = "agentgym/ALFWorld-Small-v0"
KINDS = {
    "pick_and_place_simple": "place",
    "look_at_obj_in_light": "light",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "two",
}


class _Watched(dict):
    """An info dict that records every key the agent reads."""

    def __init__(self, info):
        super().__init__(info)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def __iter__(self):
        self.read.add("<every key>")
        return super().__iter__()

    def keys(self):
        self.read.add("<every key>")
        return super().keys()

    def items(self):
        self.read.add("<every key>")
        return super().items()

    def values(self):
        self.read.add("<every key>")
        return super().values()


@pytest.fixture(scope="module")
def small():
    env = ALFWorldEnv("small", split="test", privileged=True)  # the agent must ignore the hint
    yield env
    env.close()


def _tasks_of_each_type(env, n):
    by_type = {}
    for tid in env.task_ids("test"):
        found = by_type.setdefault(env.task_type_of(tid), [])
        if len(found) < n:
            found.append(tid)
    return by_type


def _play(env, agent, task_id):
    """(won, commands played, info keys the agent read); asserts each command is admissible."""
    obs, info = env.reset(options={"task_id": task_id})
    agent.reset(SMALL, 0)
    played, read = [], set()
    while True:
        watched = _Watched(info)
        action = agent.act(obs, watched)
        read |= watched.read
        assert action in info["admissible_actions"], (task_id, played, action)
        played.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return bool(info["won"]), played, read


@pytest.mark.parametrize("task_type", gen.TASK_TYPES)
def test_every_goal_template_parses(task_type):
    templates = gen.alfworld_data().goals[task_type]["templates"]
    for template in templates:
        text = template.format(obj="butterknife", recep="countertop", toggle="desklamp") + "."
        goal = parse_goal(text)
        assert goal is not None, text
        assert (goal.kind, goal.obj) == (KINDS[task_type], "butterknife")
        if task_type == "look_at_obj_in_light":
            assert goal.toggle == "desklamp"
        else:
            assert goal.recep == "countertop"


def test_goal_words_are_read_whole():
    assert parse_goal("put a pen in shelf.") == Goal("place", "pen", "shelf")
    assert parse_goal("put a clean soapbar in cart.") == Goal("clean", "soapbar", "cart")
    assert parse_goal("make some coffee.") is None
    assert kind_of("pencil 2") == "pencil"


def test_it_wins_every_task_type_with_admissible_commands_and_the_menu_alone(small):
    """Two tasks of each type: won, every command admissible, nothing read from ``info``
    but the admissible commands (the env runs privileged, so the hint is there to misread)."""
    agent = ExplorerAgent()
    assert not hasattr(agent, "bind")  # the harness hands the env only to agents with bind
    for task_type, task_ids in _tasks_of_each_type(small, 2).items():
        for task_id in task_ids:
            won, played, read = _play(small, agent, task_id)
            assert won, (task_type, task_id, played)
            assert read == {"admissible_actions"}, read


def test_the_same_task_gives_the_same_commands(small):
    by_type = _tasks_of_each_type(small, 1)
    for task_ids in by_type.values():
        first = _play(small, ExplorerAgent(), task_ids[0])[1]
        again = ExplorerAgent()
        _play(small, again, by_type["pick_two_obj_and_place"][0])  # a reset must forget it
        assert _play(small, again, task_ids[0])[1] == first


def test_the_harness_loads_it_and_it_wins_without_the_env_state():
    doc = evaluate(f"{ExplorerAgent.__module__}:ExplorerAgent", [SMALL], seeds=30, split="test")
    scores = doc["aggregates"][SMALL]
    assert scores["mean"] == 1.0
    assert set(scores["by_task_type"]) == set(gen.TASK_TYPES)
