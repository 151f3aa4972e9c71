"""The credit envs: exact values agree with the real dynamics, and credit lands where it should."""

import io
import math

import numpy as np
import pytest

import agentgym
from agentgym.baselines.credit import compose, names
from agentgym.core.errors import BadInput
from agentgym.play import play_episode

IDS = agentgym.env_ids("credit")
TOL = 1e-9


def test_the_family_registers_its_ids():
    assert IDS == [
        "agentgym/Credit-Chain-Free-v0",
        "agentgym/Credit-Chain-v0",
        "agentgym/Credit-Haystack-v0",
        "agentgym/Credit-KeyDoor-Long-v0",
        "agentgym/Credit-KeyDoor-v0",
    ]


def _uniform_returns(env, task_id, episodes):
    """Returns of uniformly random admissible actions, each episode with its own noise key."""
    rng = np.random.default_rng(7)
    out = []
    for key in range(episodes):
        _, info = env.reset(options={"task_id": task_id})
        env.unwrapped.set_rng(key)
        total, done = 0.0, False
        while not done:
            acts = info["admissible_actions"]
            _, r, term, trunc, info = env.step(acts[int(rng.integers(len(acts)))])
            total, done = total + r, term or trunc
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize("env_id", IDS)
def test_monte_carlo_mean_of_uniform_play_matches_the_analytic_uniform_value(env_id):
    env = agentgym.make(env_id, privileged=True)
    for task_id in env.unwrapped.task_ids("test")[:2]:
        _, info = env.reset(options={"task_id": task_id})
        v = info["credit_values"]["uniform"]["value"]
        returns = _uniform_returns(env, task_id, 1500)
        se = returns.std(ddof=1) / math.sqrt(len(returns))
        assert se > 0
        assert abs(returns.mean() - v) < 4 * se, (task_id, returns.mean(), v, se)


@pytest.mark.parametrize("env_id", IDS)
def test_the_oracle_wins_and_its_return_is_the_optimal_value(env_id):
    kwargs = {"noise": 0.0} if "KeyDoor" in env_id else {}
    env = agentgym.make(env_id, privileged=True, split="test", **kwargs)
    for seed in range(5):
        _, info = env.reset(seed=seed)
        v_star, total = info["credit_values"]["optimal"]["value"], 0.0
        while True:
            _, r, term, trunc, info = env.step(env.unwrapped.oracle_action())
            total += r
            if term or trunc:
                break
        assert term and info["won"]
        assert total == pytest.approx(v_star, abs=TOL)
        assert "credit_values" not in info  # nothing is left to value once the episode ended


@pytest.mark.parametrize("env_id", IDS)
def test_optimal_advantages_are_zero_for_optimal_actions_and_negative_otherwise(env_id):
    env = agentgym.make(env_id, privileged=True)
    rng = np.random.default_rng(0)
    for seed in range(5):
        _, info = env.reset(seed=seed)
        while True:
            table, acts = info["credit_values"], info["admissible_actions"]
            opt, uni = table["optimal"], table["uniform"]
            assert list(opt["q"]) == list(uni["q"]) == acts
            assert opt["value"] == max(opt["q"].values())
            assert opt["advantage"][env.unwrapped.oracle_action()] == 0.0
            for a in acts:
                best = opt["q"][a] == opt["value"]
                assert opt["advantage"][a] == 0.0 if best else opt["advantage"][a] < 0
            assert sum(uni["advantage"].values()) == pytest.approx(0.0, abs=TOL)
            *_, term, trunc, info = env.step(acts[int(rng.integers(len(acts)))])
            if term or trunc:
                break


@pytest.mark.parametrize("horizon", [0, 6, 24])
def test_key_choice_advantage_is_the_door_term_whatever_the_horizon(horizon):
    env = agentgym.make("agentgym/Credit-KeyDoor-v0", privileged=True, horizon=horizon)
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        door = obs.split("The door at the far end is ")[1].split(".")[0]
        right = f"take the {door} key"
        opt, uni = info["credit_values"]["optimal"], info["credit_values"]["uniform"]
        n = len(info["admissible_actions"])
        for a in info["admissible_actions"]:
            hit = a == right
            assert opt["advantage"][a] == pytest.approx(0.0 if hit else -1.0, abs=TOL)
            assert uni["advantage"][a] == pytest.approx(float(hit) - 1 / n, abs=TOL)


def test_distractor_phase_advantages_are_small_mean_differences():
    env = agentgym.make("agentgym/Credit-KeyDoor-Long-v0", privileged=True)
    _, info = env.reset(seed=3)
    _, _, _, _, info = env.step(0)
    first = info["credit_values"]
    while len(info["admissible_actions"]) == 3:  # the orchard
        for policy in ("uniform", "optimal"):
            adv = info["credit_values"][policy]["advantage"]
            assert all(abs(x) <= 0.1 for x in adv.values())
            assert adv == pytest.approx(first[policy]["advantage"], abs=TOL)  # same every turn
        _, _, _, _, info = env.step(1)
    assert info["admissible_actions"] == ["open the door"]


def test_the_turn_limit_counts_in_the_values():
    # the door lies beyond the limit: the key choice is worth nothing, only apples count
    env = agentgym.make("agentgym/Credit-KeyDoor-v0", privileged=True, max_turns=3, noise=0.0)
    _, info = env.reset(seed=0)
    opt = info["credit_values"]["optimal"]
    assert all(x == pytest.approx(0.0, abs=TOL) for x in opt["advantage"].values())
    assert opt["value"] <= 2 * 0.1


@pytest.mark.parametrize("env_id", ["agentgym/Credit-Chain-v0", "agentgym/Credit-Chain-Free-v0"])
def test_chain_credits_only_the_hidden_position(env_id):
    env = agentgym.make(env_id, privileged=True)
    for seed in range(10):
        obs, info = env.reset(seed=seed)
        credited = []
        while True:
            table = info["credit_values"]
            m = len(info["admissible_actions"])
            if any(abs(x) > TOL for x in table["uniform"]["advantage"].values()):
                clue = obs.split("The sign shows ")[1].split(".")[0]
                credited.append(clue)
                for a, x in table["uniform"]["advantage"].items():
                    assert x == pytest.approx((a == f"pick {clue}") - 1 / m, abs=TOL)
            else:
                assert all(abs(x) <= TOL for x in table["optimal"]["advantage"].values())
            obs, _, term, trunc, info = env.step(env.unwrapped.oracle_action())
            if term or trunc:
                break
        assert len(credited) == 1


def test_free_chain_refuses_other_text_at_the_cost_of_a_turn():
    env = agentgym.make("agentgym/Credit-Chain-Free-v0")
    obs, info = env.reset(seed=1)
    assert "[0]" not in obs and info["admissible_actions"]
    obs2, r, term, trunc, info2 = env.step("jump over the fence")
    assert info2["action_valid"] is False and r == 0.0 and not (term or trunc)
    assert "is not an option" in obs2 and obs2.endswith(obs)  # the same decision again
    # the same decision again (the key is the task, the turn, and the position faced)
    assert env.unwrapped.turn == 1
    assert info2["state_key"].split("|")[2:] == info["state_key"].split("|")[2:] == ["pos=0"]
    first = info["admissible_actions"][0]
    _, _, _, _, info3 = env.step(f"  {first.upper()} ")
    assert info3["action_valid"] is True and info3["progress"] == pytest.approx(1 / 5)
    for _ in range(8):  # 2 * length turns in all: the limit leaves room for invalid actions
        *_, term, trunc, _ = env.step("?")
    assert trunc and not term


@pytest.mark.parametrize("env_id", IDS)
def test_privileged_keys_only_with_privileged(env_id):
    env = agentgym.make(env_id)
    _, info = env.reset(seed=0)
    infos = [info]
    for _ in range(3):
        infos.append(env.step(info["admissible_actions"][0])[-1])
    for inf in infos:
        assert "credit_values" not in inf and "privileged_context" not in inf
    env = agentgym.make(env_id, privileged=True)
    _, info = env.reset(seed=0)
    assert set(info["credit_values"]) == {"uniform", "optimal"}
    while not env.unwrapped.done:  # the context names the oracle's (an optimal) action
        best = env.unwrapped.oracle_action()
        assert info["privileged_context"].endswith(f" Best action now: {best}.")
        *_, info = env.step(best)
    assert info["privileged_context"] == "The episode is over."


NO_GOLD = {
    "isa": "gold_answer",
    "trace": "gold_answer",
    "taco": "check_answer",
    "rubric": "tool_calls",
}
"""Variants that read a gold answer, check answers or score tool calls, none of which a Credit
env has: the words their refusal names."""


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("variant", names())
def test_every_credit_variant_accepts_the_env_or_names_what_it_lacks(env_id, variant):
    plan = compose(variant)
    # as the trainer makes it: privileged where a variant reads privileged info
    env = agentgym.make(env_id, **({"privileged": True} if plan.needs_privileged else {}))
    if variant in NO_GOLD:
        with pytest.raises(BadInput, match=NO_GOLD[variant]):
            plan.check(env)
        return
    plan.check(env)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "words"),
    [
        ("agentgym/Credit-KeyDoor-v0", {"horizon": -1}, "horizon must be an integer"),
        ("agentgym/Credit-KeyDoor-v0", {"horizon": "long"}, "horizon must be an integer"),
        ("agentgym/Credit-KeyDoor-v0", {"horizon": 2.5}, "horizon must be an integer"),
        ("agentgym/Credit-KeyDoor-v0", {"noise": -0.1}, "noise must be a number"),
        ("agentgym/Credit-KeyDoor-v0", {"n_keys": 9}, "n_keys must be an integer from 2 to 8"),
        ("agentgym/Credit-Chain-v0", {"length": 0}, "length must be"),
        ("agentgym/Credit-Chain-Free-v0", {"options": 1}, "options must be"),
        ("agentgym/Credit-Haystack-v0", {"threshold": 7}, "threshold must be"),
        ("agentgym/Credit-Haystack-v0", {"n_items": 3, "n_harmful": 2}, "n_items - n_helpful"),
    ],
)
def test_bad_options_are_refused_with_a_clear_message(env_id, kwargs, words):
    with pytest.raises(BadInput, match=words):
        agentgym.make(env_id, **kwargs)


def test_options_change_the_episode():
    env = agentgym.make("agentgym/Credit-KeyDoor-v0", horizon=12)
    env.reset(seed=0)
    steps = 0
    while True:
        *_, term, trunc, _ = env.step(0)
        steps += 1
        if term or trunc:
            break
    assert term and steps == 14 and env.unwrapped.max_turns == 18


def test_keydoor_plays_in_the_terminal():
    out = io.StringIO()
    moves = "\n".join(["0"] * 7 + ["open the door"]) + "\n"
    play_episode("agentgym/Credit-KeyDoor-v0", stdin=io.StringIO(moves), stdout=out)
    text = out.getvalue()
    assert "The door at the far end is" in text and "The episode is over." in text
