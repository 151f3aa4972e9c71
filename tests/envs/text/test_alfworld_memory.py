"""ALFWorld's memory line (the -v1 ids): what the agent was shown, and nothing else."""

import pickle

import pytest

from agentgym.checker.transcript import continue_canonical
from agentgym.core.errors import SnapshotMismatch
from agentgym.envs.text.alfworld_env import NOTHING_HAPPENS, ALFWorldEnv
from agentgym.envs.text.alfworld_explorer import ExplorerAgent
from agentgym.envs.text.alfworld_memory import PlaceMemory
from agentgym.registry import make

INTRO = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
    "around you, you see a cabinet 1, a countertop 1, a fridge 1, and a microwave 1.\n\n"
    "Your task is to: put a hot egg in countertop."
)


def test_the_line_holds_what_the_feedback_said_in_the_rooms_order():
    memory = PlaceMemory.from_intro(INTRO)
    assert memory.line() == (
        "Unseen: cabinet 1, countertop 1, fridge 1, microwave 1. Holding: nothing."
    )
    for feedback in (
        "You arrive at fridge 1. The fridge 1 is closed.",
        "You arrive at countertop 1. On the countertop 1, you see nothing.",
        "You arrive at fridge 1. The fridge 1 is closed.",
        "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1, and a apple 2.",
        "You pick up the egg 1 from the fridge 1.",
        "You arrive at microwave 1. The microwave 1 is closed.",
        "You heat the egg 1 using the microwave 1.",
    ):
        memory.observe(feedback)
    assert memory.line() == (
        "Seen: countertop 1 (nothing), fridge 1 (apple 2), microwave 1 (closed). "
        "Unseen: cabinet 1. Holding: egg 1, hot."
    )
    memory.observe("You move the egg 1 to the countertop 1.")
    assert memory.line().startswith("Seen: countertop 1 (egg 1), fridge 1 (apple 2)")
    assert memory.line().endswith("Holding: nothing.")
    assert PlaceMemory.from_json(memory.to_json()) == memory


@pytest.fixture(scope="module")
def pair():
    plain, remembering = (
        ALFWorldEnv("small", split="test"),
        ALFWorldEnv("small", split="test", memory=True),
    )
    yield plain, remembering
    plain.close()
    remembering.close()


def test_v1_is_v0_with_one_more_line_after_the_intro(pair):
    plain, remembering = pair
    for index in range(6):  # one task of each type
        task = {"task_id": plain.task_ids()[index]}
        obs, info = plain.reset(seed=index, options=task)
        assert remembering.reset(seed=index, options=task)[0] == obs  # the intro unchanged
        memory = PlaceMemory.from_intro(obs)
        agent = ExplorerAgent()
        agent.reset("", index)
        for _ in range(12):
            action = agent.act(obs, info)
            obs, _, term, trunc, info = plain.step(action)
            shown, *_ = remembering.step(action)
            memory.observe(obs)
            assert shown == f"{obs}\n{memory.line()}"
            if term or trunc:
                break
        if not (term or trunc):
            shown, *_ = remembering.step("fly away")  # an invalid command changes nothing
            assert shown == f"{NOTHING_HAPPENS}\n{memory.line()}"


def test_a_snapshot_keeps_the_memory(pair):
    _, env = pair
    _, info = env.reset(seed=1, options={"task_id": env.task_ids()[3]})
    for action in [a for a in info["admissible_actions"] if a.startswith("go to")][:2]:
        env.step(action)
    snap = env.snapshot()
    clone = pickle.loads(pickle.dumps(env))
    fresh = ALFWorldEnv("small", split="test", memory=True)
    fresh.restore(snap)
    actions = ["look", "go to the moon", "inventory"]
    assert continue_canonical(fresh, actions) == continue_canonical(env, actions)
    env.restore(snap)
    assert continue_canonical(clone, actions) == continue_canonical(env, actions)
    fresh.close()
    with pytest.raises(SnapshotMismatch):
        ALFWorldEnv("small", split="test").restore(snap)  # v0 is another config


def test_the_explorer_wins_the_memory_ids_as_it_wins_v0():
    for env_id in ("agentgym/ALFWorld-Small-v0", "agentgym/ALFWorld-Small-v1"):
        env = make(env_id, split="test")
        won = []
        for seed in range(6):
            agent = ExplorerAgent()
            agent.reset(env_id, seed)
            obs, info = env.reset(seed=seed)
            while True:
                obs, _, term, trunc, info = env.step(agent.act(obs, info))
                if term or trunc:
                    break
            won.append(info["won"])
        env.close()
        assert all(won), env_id
