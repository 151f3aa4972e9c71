"""TextWorld games generated from seeds: caching, the adapted engine, oracle and snapshots (the
full checker runs in tests/test_checker.py). Games are generated on first use into the
session's AGENTGYM_HOME (about a second each) and shared by the tests, which use the test
split's first tasks where they can."""

import json
import pickle
import re

import numpy as np
import pytest
import textworld

from agentgym import make
from agentgym.agents.builtin import RandomAgent
from agentgym.checker.transcript import canonical, continue_canonical
from agentgym.core.errors import BadInput, ResetNeeded, SnapshotMismatch
from agentgym.core.info import info_problems
from agentgym.envs.text import _tw
from agentgym.envs.text.textworld_env import PRESETS, SPLIT_SEEDS, TextWorldEnv

ENV_ID = "agentgym/TextWorld-Small-v0"
TEST_TASKS = [str(s) for s in SPLIT_SEEDS["test"][:5]]


@pytest.fixture(scope="module")
def env():
    env = TextWorldEnv("small", split="test")
    yield env
    env.close()


def _random_prefix(env, task_id, n, seed):
    """Reset on ``task_id`` and take ``n`` random admissible steps (without ending)."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(options={"task_id": task_id})
    for _ in range(n):
        choices = [a for a in info["admissible_actions"] if not a.startswith("eat ")]
        *_, term, trunc, info = env.step(choices[int(rng.integers(len(choices)))])
        assert not (term or trunc)
    return info


def _oracle_run(env, limit=50):
    """Follow the oracle to the end; returns (actions, rewards, last info, terminated)."""
    actions, rewards = [], []
    while True:
        a = env.oracle_action()
        _, r, term, trunc, info = env.step(a)
        actions.append(a)
        rewards.append(r)
        if term or trunc or len(actions) >= limit:
            return actions, rewards, info, term


# ---------------------------------------------------------------------- generation and cache
def test_generation_is_cached_writes_nothing_to_home(tmp_path, monkeypatch):
    home, agentgym_home = tmp_path / "home", tmp_path / "agentgym"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AGENTGYM_HOME", str(agentgym_home))
    spec = PRESETS["small"].spec(1100)
    assert not spec.path.exists()

    first = TextWorldEnv("small", split="test")
    obs, _ = first.reset(options={"task_id": "1100"})
    first.step("look")
    first.close()
    assert spec.path.is_file() and spec.path.with_suffix(".json").is_file()
    assert spec.path.is_relative_to(agentgym_home / "cache" / "textworld" / spec.key)
    assert (agentgym_home / "cache" / "textworld" / "inform7" / "Documentation").is_dir()
    assert list(home.iterdir()) == [], "something was written to HOME"
    leftovers = [p.name for p in spec.path.parent.iterdir() if p.name.startswith(".tmp")]
    assert leftovers == []

    def no_generator(*args, **kwargs):
        raise AssertionError("the generator ran for a cached game")

    monkeypatch.setattr(_tw, "make_game", no_generator)
    monkeypatch.setattr(_tw, "generate_inform7_source", no_generator)
    second = TextWorldEnv("small", split="test")
    again, _ = second.reset(options={"task_id": "1100"})
    assert again == obs
    with pytest.raises(AssertionError, match="generator ran"):
        second.reset(options={"task_id": "1101"})  # not cached: the patched generator runs
    second.close()
    assert list(home.iterdir()) == []


def test_cache_key_changes_with_the_parameters():
    base = _tw.GameSpec(world_size=4, nb_objects=6, quest_length=3, seed=7)
    others = [
        _tw.GameSpec(5, 6, 3, 7),
        _tw.GameSpec(4, 7, 3, 7),
        _tw.GameSpec(4, 6, 4, 7),
    ]
    assert len({base.key, *(o.key for o in others)}) == 4
    assert _tw.GameSpec(4, 6, 3, 8).key == base.key  # the seed names the file, not the folder
    assert _tw.GameSpec(4, 6, 3, 8).path != base.path
    assert base.params()["textworld"] == textworld.__version__
    small, medium = PRESETS["small"].spec(1100), PRESETS["medium"].spec(1100)
    assert small.key != medium.key


# ---------------------------------------------------------------------- tasks and construction
def test_splits_task_types_and_bad_arguments(env):
    splits = {s: set(env.task_ids(s)) for s in ("train", "val", "test")}
    assert all(splits.values())
    assert not (splits["train"] & splits["val"] or splits["train"] & splits["test"])
    assert not splits["val"] & splits["test"]
    assert {env.task_type_of(t) for t in splits["test"]} == {"quest-len-3"}
    assert TextWorldEnv("medium").task_type_of("0") == "quest-len-5"
    assert env.max_turns == PRESETS["small"].max_turns
    assert TextWorldEnv(max_turns=7).max_turns == 7
    with pytest.raises(BadInput, match="preset"):
        TextWorldEnv("huge")
    with pytest.raises(BadInput, match="task_id"):
        env.reset(options={"task_id": "not-a-seed"})
    for bad in ("5000", "0012", "\u0663", "-1", 1100):
        with pytest.raises(BadInput, match="task_id"):
            env.reset(options={"task_id": bad})


# ---------------------------------------------------------------------- the adapted engine
def test_info_keys_observation_and_privileged_context():
    plain = TextWorldEnv(split="test")
    obs, info = plain.reset(options={"task_id": TEST_TASKS[0]})
    spec = PRESETS["small"].spec(int(TEST_TASKS[0]))
    game = textworld.Game.load(str(spec.path.with_suffix(".json")))
    assert obs.startswith(game.objective), "the quest is stated first (banner removed)"
    assert "$$" not in obs and not obs.rstrip().endswith(">")
    assert info_problems(info, privileged=False) == []
    assert info["admissible_actions"] == sorted(info["admissible_actions"])
    assert {"look", "inventory"} <= set(info["admissible_actions"])
    assert info["task_id"] == TEST_TASKS[0] and info["task_type"] == "quest-len-3"
    assert info["domain"] == "textworld" and info["segments"] == []
    assert info["progress"] == 0.0 and info["won"] is False
    assert "privileged_context" not in info
    _, _, _, _, info = plain.step(info["admissible_actions"][0])
    assert info_problems(info, privileged=False) == []
    plain.close()

    privileged = TextWorldEnv(split="test", privileged=True)
    _, info = privileged.reset(options={"task_id": TEST_TASKS[0]})
    assert info_problems(info, privileged=True) == []
    walkthrough = game.metadata["walkthrough"]
    assert info["privileged_context"] == "Walkthrough: " + " > ".join(walkthrough)
    *_, after = privileged.step(privileged.oracle_action())
    assert after["privileged_context"] == info["privileged_context"], "the full walkthrough"
    privileged.close()


def test_four_tuple_engine_is_adapted_to_terminated_and_truncated():
    env = TextWorldEnv(split="test", max_turns=3)
    env.reset(options={"task_id": TEST_TASKS[1]})
    results = [env.step("look") for _ in range(3)]
    assert [(term, trunc) for _, _, term, trunc, _ in results] == [
        (False, False),
        (False, False),
        (False, True),
    ]
    assert all(info["won"] is False for *_, info in results)
    with pytest.raises(ResetNeeded):
        env.step("look")

    env.close()

    env = TextWorldEnv(split="test")
    env.reset(options={"task_id": TEST_TASKS[1]})
    actions, rewards, info, terminated = _oracle_run(env)
    assert terminated and info["won"] is True and info["progress"] == 1.0
    assert sum(rewards) == 1.0 and rewards[-1] == 1.0 and info["reward_components"]["score"] == 1.0
    assert env.turn == len(actions) < env.max_turns
    with pytest.raises(ResetNeeded):
        env.oracle_action()
    env.close()


def _last_observation(env, task_id):
    """Follow the oracle on ``task_id`` to the end; returns the last observation and info."""
    env.reset(options={"task_id": task_id})
    while True:
        obs, _, term, trunc, info = env.step(env.oracle_action())
        if term or trunc:
            return obs, info


ENDING = r"\*\*\* The End \*\*\*\s+You scored 1 out of a possible 1, in \d+ turns\."
QUESTION = "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?"


def test_v0_keeps_the_storys_closing_question(env):
    obs, info = _last_observation(env, TEST_TASKS[1])
    assert info["won"] is True
    # v0's text is kept byte for byte, the story's question included
    assert re.search(ENDING + r"\s+" + re.escape(QUESTION) + r"\Z", obs), obs


def test_v1_ends_the_story_without_the_restart_question(env):
    new = TextWorldEnv("small", end_question=False, split="test")
    obs, info = _last_observation(new, TEST_TASKS[1])
    new.close()
    assert info["won"] is True
    # textworld's story asks to restart, restore, quit or undo: the episode is over by then
    assert "Would you like" not in obs and "RESTART" not in obs
    assert re.search(ENDING + r"\Z", obs), obs
    old, _ = _last_observation(env, TEST_TASKS[1])
    assert old.startswith(obs) and old[len(obs) :].strip() == QUESTION


def test_the_v1_ids_drop_the_question_and_keep_the_v0_world():
    for preset in ("Small", "Medium"):
        old = make(f"agentgym/TextWorld-{preset}-v0").unwrapped
        new = make(f"agentgym/TextWorld-{preset}-v1").unwrapped
        assert (old.end_question, new.end_question) == (True, False)
        assert new.preset == old.preset and new.task_ids("test") == old.task_ids("test")
        # distinct identities: a v0 snapshot does not restore into v1, whose text differs
        assert new.data_hash != old.data_hash


def test_adversarial_actions_are_invalid_and_never_raise(env):
    _, info = env.reset(options={"task_id": TEST_TASKS[0]})
    key, admissible = info["state_key"], info["admissible_actions"]
    hostile = [None, 5, 1.5, b"look", ["look"], "", "   ", "x" * 10_000, "go nowhere"]
    hostile += ["\x00\x1b[31m", "restart", "quit", "undo", "look; go north"]
    for turn, action in enumerate(hostile, 1):
        obs, reward, term, trunc, info = env.step(action)
        assert info["action_valid"] is False, action
        assert obs.startswith("Invalid action") and len(obs) < 2_000
        assert "x" * 100 not in obs
        assert reward == 0.0 and not term
        assert info["state_key"] == key and info["admissible_actions"] == admissible
        assert env.turn == turn
        if trunc:
            break
    env.reset(options={"task_id": TEST_TASKS[0]})
    *_, info = env.step("  LOOK ")
    assert info["action_valid"] is True


def test_state_key_depends_on_the_world_state_only(env):
    _, info = env.reset(options={"task_id": TEST_TASKS[0]})
    start = info["state_key"]
    for action in ("look", "inventory"):
        *_, info = env.step(action)
        assert info["state_key"] == start, f"{action} changed the state key"
    back = {"north": "south", "south": "north", "east": "west", "west": "east"}
    go = next(a for a in info["admissible_actions"] if a.startswith("go "))
    *_, info = env.step(go)
    assert info["state_key"] != start
    *_, info = env.step("go " + back[go.split()[1]])
    assert info["action_valid"] and info["state_key"] == start


# ---------------------------------------------------------------------- oracle and random agent
@pytest.mark.parametrize("task_id", TEST_TASKS)
def test_oracle_wins_test_tasks_from_reset(env, task_id):
    env.reset(options={"task_id": task_id})
    actions, _, info, terminated = _oracle_run(env)
    assert terminated and info["won"], f"oracle lost {task_id}: {actions}"
    spec = PRESETS["small"].spec(int(task_id))
    assert actions == textworld.Game.load(str(spec.path.with_suffix(".json"))).walkthrough


def test_oracle_replans_after_a_detour(env):
    for i, task_id in enumerate(TEST_TASKS[:3]):
        _random_prefix(env, task_id, n=4, seed=i)
        actions, _, info, terminated = _oracle_run(env)
        assert terminated and info["won"], f"oracle lost {task_id} after a detour: {actions}"


def test_random_admissible_agent_rarely_wins(env):
    agent, wins, n = RandomAgent(), 0, 30
    for seed in range(n):
        obs, info = env.reset(seed=seed)
        agent.reset(ENV_ID, seed)
        while True:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
        wins += info["won"]
    assert wins / n <= 0.3, f"random agent won {wins}/{n}"


# ---------------------------------------------------------------------- determinism, snapshots
def _random_transcript(seed):
    env, agent = TextWorldEnv(split="test"), RandomAgent()
    obs, info = env.reset(seed=seed)
    agent.reset(ENV_ID, seed)
    lines = [canonical([obs, info])]
    for _ in range(12):
        step = env.step(agent.act(obs, info))
        obs, info = step[0], step[4]
        lines.append(canonical(list(step)))
        if step[2] or step[3]:
            break
    env.close()
    return lines


def test_same_seed_same_transcript():
    assert _random_transcript(3) == _random_transcript(3)
    assert _random_transcript(3) != _random_transcript(4)


def test_snapshot_restores_on_a_fresh_instance(env):
    _random_prefix(env, TEST_TASKS[2], n=3, seed=7)
    env.step("go nowhere")  # an invalid turn is part of the state too
    snap = env.snapshot()
    follow = pickle.loads(pickle.dumps(env))
    plan = _oracle_run(follow)[0]

    fresh = TextWorldEnv(split="test")
    fresh.restore(snap)
    assert fresh.snapshot() == snap
    assert fresh.turn == env.turn and fresh.task_id == env.task_id
    assert continue_canonical(fresh, plan) == continue_canonical(env, plan)
    fresh.close()


def test_doctored_snapshot_raises(env):
    _random_prefix(env, TEST_TASKS[2], n=2, seed=1)
    state = json.loads(env.snapshot())
    state["state"]["obs_sha1"] = "0" * 40
    with pytest.raises(SnapshotMismatch, match="another observation"):
        TextWorldEnv(split="test").restore(json.dumps(state).encode())
    state = json.loads(env.snapshot())
    state["state"]["commands"].append("restart")
    with pytest.raises(SnapshotMismatch, match="not admissible"):
        TextWorldEnv(split="test").restore(json.dumps(state).encode())
    state = json.loads(env.snapshot())
    state["env"]["config"]["preset"] = "medium"
    with pytest.raises(SnapshotMismatch):
        TextWorldEnv(split="test").restore(json.dumps(state).encode())


def test_pickle_mid_episode(env):
    _random_prefix(env, TEST_TASKS[3], n=3, seed=2)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.task_id == env.task_id and clone.turn == env.turn
    plan = _oracle_run(pickle.loads(pickle.dumps(env)))[0]
    assert continue_canonical(clone, plan) == continue_canonical(env, plan)
    clone.close()
