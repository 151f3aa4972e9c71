"""ALFWorld: the problem generator, the engine's text against ALFWorld's own env, the oracle,
snapshots and the official loader (the full checker runs in tests/test_checker.py).

Games are generated on first use into the session's AGENTGYM_HOME (about 0.15 s each on the
small preset, 0.5 to 4 s on the standard one) and shared by the tests, which use the test
split's first tasks where they can (the checker plays those too).
"""

import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agentgym.agents.builtin import RandomAgent
from agentgym.checker.transcript import ADVERSARIAL_ACTIONS, continue_canonical
from agentgym.core.errors import BadInput, SnapshotMismatch
from agentgym.core.info import info_problems
from agentgym.envs.text import alfworld_gen as gen
from agentgym.envs.text.alfworld_env import (
    NOTHING_HAPPENS,
    PLAN_SHOWN,
    SKILL_HINTS,
    AlfredGame,
    ALFWorldEnv,
)
from agentgym.envs.text.bench import compare_with_stock

FIXTURE = Path(__file__).parent / "fixtures" / "alfworld"
FIXTURE_GAMES = sorted(FIXTURE.rglob("game.tw-pddl"))
FIXTURE_COUNTS = {"train": 2, "val": 2, "test": 6}


def _first_of_each_type(env, split="test", n=1):
    """The first ``n`` task ids of each task type in ``split``."""
    by_type = {}
    for tid in env.task_ids(split):
        by_type.setdefault(env.task_type_of(tid), [])
        if len(by_type[env.task_type_of(tid)]) < n:
            by_type[env.task_type_of(tid)].append(tid)
    return by_type


def _play_oracle(env, task_id=None, seed=None):
    """(won, commands played) of the oracle on a task."""
    options = {"task_id": task_id} if task_id else None
    env.reset(seed=seed, options=options)
    played = []
    while True:
        action = env.oracle_action()
        played.append(action)
        _, _, term, trunc, info = env.step(action)
        if term or trunc:
            return bool(info["won"]), played


@pytest.fixture(scope="module")
def small():
    env = ALFWorldEnv("small", split="test", privileged=True)
    yield env
    env.close()


# ---------------------------------------------------------------------- generator
def test_six_types_generate_solvable_problems(small):
    by_type = _first_of_each_type(small)
    assert sorted(by_type) == sorted(gen.TASK_TYPES)
    for task_type, (tid,) in by_type.items():
        path = small.game_path(tid)
        game = json.loads(path.read_text())
        traj = json.loads((path.parent / "traj_data.json").read_text())
        assert traj["task_type"] == task_type
        problem = game["pddl_problem"]
        # ALFWorld's layout: objects, init, goal; mangled ALFRED ids; putting needs canContain.
        assert problem.index("(:objects") < problem.index("(:init") < problem.index("(:goal")
        assert "_bar_" in problem and "(canContain " in problem
        assert game["solvable"] is True and game["pddl_domain"] == gen.alfworld_data().domain
        assert "UNKNOWN GOAL" not in game["grammar"]
        # The planner reaches the goal, within the small preset's limit.
        plan = gen.check_solvable(game["pddl_domain"], game["grammar"], problem)
        assert plan == game["walkthrough"] and 1 <= len(plan) <= 10


def test_same_seed_same_problem_in_another_process():
    code = (
        "import hashlib; from agentgym.envs.text import alfworld_gen as g\n"
        "p = g.PRESETS['small']\n"
        "print(hashlib.sha256(''.join(g.generate(p, 'val', i).game['pddl_problem'] "
        "for i in range(3)).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    here = "".join(
        gen.generate(gen.PRESETS["small"], "val", i).game["pddl_problem"] for i in range(3)
    )
    assert out.stdout.strip() == hashlib.sha256(here.encode()).hexdigest()


def test_generation_respects_alfred_constraints(small):
    data = gen.alfworld_data()
    for tid in small.task_ids("test")[:12]:
        path = small.game_path(tid)
        traj = json.loads((path.parent / "traj_data.json").read_text())
        params, task_type = traj["pddl_params"], traj["task_type"]
        room = data.room_of(traj["scene"]["scene_num"])
        assert room in data.constants.GOALS_VALID[task_type]
        assert traj["scene"]["scene_num"] in data.constants.TEST_SCENE_NUMBERS  # unseen rooms
        problem = json.loads(path.read_text())["pddl_problem"]
        objects = problem[: problem.index("(:init")]
        assert objects.count(" - receptacle") <= gen.PRESETS["small"].max_receptacles
        if params["parent_target"]:
            assert params["object_target"] in data.can_contain[params["parent_target"]]


def test_fixture_is_the_generators_output(tmp_path):
    gen.export_official(gen.PRESETS["small"], tmp_path, FIXTURE_COUNTS)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    kept = sorted(p.relative_to(FIXTURE) for p in FIXTURE.rglob("*") if p.is_file())
    assert made == kept
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (FIXTURE / rel).read_bytes(), rel


# ---------------------------------------------------------------------- text
def test_text_is_alfworlds_byte_for_byte(small):
    """The stock path here is ALFWorld's own ``AlfredTWEnv`` (dqn setting, no expert) run in a
    separate process over a folder holding the same games; both sides play the same commands
    (random admissible ones and some unknown ones) and every observation, sorted admissible
    list (TextWorld sorts them; so do we) and won flag must be equal. (Speed is measured by
    ``agentgym bench text``, not here.)"""
    by_type = _first_of_each_type(small)
    games = [small.game_path(tids[0]) for _, tids in sorted(by_type.items())[:4]]
    games.append(FIXTURE_GAMES[0])
    result = compare_with_stock(games, steps=25, seed=3)
    assert result.agreeing == result.observations > 50, result


def test_intro_and_feedback_look_like_alfworld(small):
    obs, info = small.reset(options={"task_id": small.task_ids("test")[0]})
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-\n\n")
    assert "\n\nYour task is to: " in obs
    assert info["admissible_actions"] == sorted(info["admissible_actions"])
    goto = next(a for a in info["admissible_actions"] if a.startswith("go to "))
    obs, *_ = small.step(goto)
    assert obs.startswith(f"You arrive at {goto[6:]}.")


# ---------------------------------------------------------------------- oracle and agents
def test_oracle_wins_five_tasks_of_every_type_on_small(small):
    lengths = {}
    for task_type, tids in _first_of_each_type(small, n=5).items():
        for tid in tids:
            won, played = _play_oracle(small, task_id=tid)
            assert won, f"{task_type} {tid}: {played}"
            lengths.setdefault(task_type, []).append(len(played))
    assert max(max(v) for v in lengths.values()) <= 10


def test_oracle_wins_one_task_of_every_type_on_standard():
    env = ALFWorldEnv("standard", split="test")
    for task_type, (tid,) in _first_of_each_type(env).items():
        won, played = _play_oracle(env, task_id=tid)
        assert won, f"{task_type} {tid}: {played}"
    env.close()


def test_oracle_replans_after_a_detour(small):
    tid = _first_of_each_type(small)["pick_heat_then_place_in_recep"][0]
    small.reset(options={"task_id": tid})
    first = small.oracle_action()
    detours = [a for a in small.unwrapped._game.admissible if a != first and a.startswith("go to")]
    small.step(detours[0])
    *_, info = small.step("inventory")
    # the privileged plan is made again too: it starts with the oracle's next command
    plan = info["privileged_context"].split("\nPlan: ")[1]
    assert plan.split(" > ")[0] == small.oracle_action()
    while True:
        _, _, term, trunc, info = small.step(small.oracle_action())
        if term or trunc:
            break
    assert info["won"] and info["progress"] == 1.0


def test_progress_and_privileged_context(small):
    tid = _first_of_each_type(small)["pick_clean_then_place_in_recep"][0]
    _, info = small.reset(options={"task_id": tid})
    assert info["progress"] == 0.0
    skill = "Skill: " + SKILL_HINTS["pick_clean_then_place_in_recep"]
    seen, contexts, played = [info["progress"]], [info["privileged_context"]], []
    while True:
        played.append(small.oracle_action())
        _, reward, term, trunc, info = small.step(played[-1])
        seen.append(info["progress"])
        contexts.append(info["privileged_context"])
        if term or trunc:
            break
    assert seen[-1] == 1.0 and 0.5 in seen and reward == 1.0
    assert info["reward_components"] == {"success": 1.0}
    # the plan shown is the oracle's: the commands it plays next, from every state
    for k in range(len(played)):
        head, plan = contexts[k].split("\n")
        assert head == skill and plan.startswith("Plan: ")
        shown = plan.removeprefix("Plan: ").removesuffix(" > ...").split(" > ")
        assert shown == played[k : k + len(shown)] and len(shown) <= PLAN_SHOWN
    assert contexts[-1] == skill + "\nPlan: done."
    plain = ALFWorldEnv("small", split="test")
    _, info = plain.reset(options={"task_id": tid})
    assert "privileged_context" not in info and not info_problems(info, privileged=False)
    plain_played = []
    while not plain.done:
        plain_played.append(plain.oracle_action())
        plain.step(plain_played[-1])
    assert plain_played == played, "planning for the privileged view changes nothing"


def test_random_admissible_agent_rarely_wins():
    env = ALFWorldEnv("small", split="test")
    agent, wins = RandomAgent(), 0
    for seed in range(12):
        _, info = env.reset(seed=seed)
        agent.reset("x", seed)
        while True:
            _, _, term, trunc, info = env.step(agent.act(None, info))
            if term or trunc:
                wins += info["won"]
                break
    assert wins / 12 <= 0.3
    env.close()


def test_adversarial_actions_are_invalid_and_harmless(small):
    _, info = small.reset(options={"task_id": small.task_ids("test")[1]})
    key = info["state_key"]
    for name, action in [*ADVERSARIAL_ACTIONS, ("unknown command", "dance with the fridge")]:
        obs, reward, term, _, info = small.step(action)
        assert obs == NOTHING_HAPPENS and reward == 0.0 and not term, name
        assert info["action_valid"] is False and info["state_key"] == key, name
    obs, *_, info = small.step("  look  ")  # surrounding whitespace is ignored, as in TextWorld
    assert info["action_valid"] is True and obs != NOTHING_HAPPENS


# ---------------------------------------------------------------------- snapshots
def _random_prefix(env, task_id, n, seed):
    rng = np.random.default_rng(seed)
    _, info = env.reset(options={"task_id": task_id})
    for _ in range(n):
        _, _, term, trunc, info = env.step(
            info["admissible_actions"][int(rng.integers(len(info["admissible_actions"])))]
        )
        assert not (term or trunc)
    return info


def test_snapshot_restores_on_a_fresh_instance(small):
    tid = small.task_ids("test")[2]
    _random_prefix(small, tid, n=4, seed=0)
    small.step("not a command")
    snap = small.snapshot()
    plan = []
    probe = pickle.loads(pickle.dumps(small))
    for _ in range(12):
        plan.append(probe.oracle_action())
        *_, term, trunc, _ = probe.step(plan[-1])
        if term or trunc:
            break
    fresh = ALFWorldEnv("small", split="test", privileged=True)
    fresh.restore(snap)
    assert fresh.snapshot() == snap
    assert continue_canonical(fresh, plan) == continue_canonical(small, plan)
    assert fresh.done


def test_pickle_mid_episode(small):
    _random_prefix(small, small.task_ids("test")[3], n=3, seed=1)
    clone = pickle.loads(pickle.dumps(small))
    assert clone.task_id == small.task_id and clone.turn == small.turn
    actions = [small.oracle_action(), "look", "inventory", "bad", small.oracle_action()]
    assert continue_canonical(clone, actions) == continue_canonical(small, actions)


def test_doctored_snapshot_raises(small):
    _random_prefix(small, small.task_ids("test")[4], n=2, seed=2)
    state = json.loads(small.snapshot())
    state["state"]["feedback_sha256"] = "0" * 64
    with pytest.raises(SnapshotMismatch, match="another observation"):
        ALFWorldEnv("small", split="test").restore(json.dumps(state).encode())
    state = json.loads(small.snapshot())
    state["state"]["operators"].append("gotolocation agent1 nowhere elsewhere nothing")
    with pytest.raises(SnapshotMismatch, match="not applicable"):
        ALFWorldEnv("small", split="test").restore(json.dumps(state).encode())
    with pytest.raises(SnapshotMismatch):
        ALFWorldEnv("standard", split="test").restore(small.snapshot())


# ---------------------------------------------------------------------- official data
def test_official_preset_reads_the_fixture():
    env = ALFWorldEnv("official", path=str(FIXTURE), split="test")
    tests = env.task_ids("test")
    assert len(tests) == 6 and all(t.startswith("valid_unseen/") for t in tests)
    assert len(env.task_ids("train")) == 2 and len(env.task_ids("val")) == 2
    assert sorted(env.task_type_of(t) for t in tests) == sorted(gen.TASK_TYPES)
    for tid in tests:
        won, played = _play_oracle(env, task_id=tid)
        assert won, (tid, played)
    # The json_2.1.1 folder itself and ALFWORLD_DATA work too.
    assert ALFWorldEnv("official", path=str(FIXTURE / "json_2.1.1")).task_ids() == env.task_ids(
        "train"
    )
    env.close()


def test_official_reads_alfworld_data(monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", str(FIXTURE))
    assert len(ALFWorldEnv("official").task_ids("test")) == 6


def test_official_without_data_is_bad_input(monkeypatch, tmp_path):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(BadInput, match="ALFWORLD_DATA"):
        ALFWorldEnv("official")
    with pytest.raises(BadInput, match="no ALFWorld data"):
        ALFWorldEnv("official", path=str(tmp_path / "missing"))
    with pytest.raises(BadInput, match="unknown ALFWorld preset"):
        ALFWorldEnv("huge")


def test_engine_game_matches_a_direct_load():
    game = json.loads(FIXTURE_GAMES[0].read_text())
    a, b = AlfredGame(game), AlfredGame(game)
    assert a.reset() == b.reset() and a.admissible == b.admissible
    a.close()
    b.close()


# ---------------------------------------------------------------------- side effects
def test_nothing_written_outside_agentgym_home(tmp_path):
    home, agh = tmp_path / "home", tmp_path / "agentgym"
    home.mkdir()
    code = textwrap.dedent(
        """
        import os
        from agentgym.envs.text.alfworld_env import ALFWorldEnv
        env = ALFWorldEnv("small", split="val")
        obs, info = env.reset(seed=0)
        env.step(env.oracle_action())
        env.step(info["admissible_actions"][0])
        assert "ALFWORLD_DATA" not in os.environ
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}
    env.update(HOME=str(home), AGENTGYM_HOME=str(agh))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert list(home.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agentgym", "home"]
    assert list((agh / "cache" / "alfworld").iterdir())
