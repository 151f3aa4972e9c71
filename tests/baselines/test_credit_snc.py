"""SNC: episode term + same-menu-state term + credit propagated back along the provenance
dependency graph; refuses envs without a menu."""

import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose, get
from agentgym.baselines.credit.snc import dependency_parents, propagate
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect, pick_tasks
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
FREE = "agentgym/Search-Free-Small-v0"
SNC = get("snc")


def turn(state, *, reward=0.0, produced=None, consumed=None, L=2):
    info = {"state_key": state, "won": False}
    if produced is not None or consumed is not None:
        info["provenance"] = {
            "visited": [],
            "cited": [],
            "produced": list(produced or ()),
            "consumed": list(consumed or ()),
        }
    return Turn(torch.arange(3), torch.arange(L), reward=reward, state_key=state, info=info)


def traj(turns, outcome, group="g"):
    return Trajectory("t", group, 0, list(turns), outcome=outcome, terminated=True)


def run(batch, config=None):
    plan = compose("snc", config)
    ctx = StepContext()
    for hook in ("transform", "score", "advantages", "shape"):
        plan.run(hook, batch, ctx)
    return batch.advantages


def value(adv, key):
    a = adv[key]
    assert (a == a[0]).all()
    return a[0].item()


def shared_state_group():
    """Three rollouts from one state s0; two meet again at s1."""
    return Batch(
        trajectories=[
            traj([turn("s0"), turn("s1")], 1.0),
            traj([turn("s0", reward=-0.1), turn("s1")], 0.0),
            traj([turn("s0"), turn("s2")], 0.0),
        ]
    )


def test_same_state_term_by_hand():
    adv = run(shared_state_group(), {"snc": {"gamma": 0.5, "omega": 1.0}})
    # A^E over step rows (1, 1, 0, 0, 0, 0): mean 1/3 -> (2/3, −1/3, −1/3)
    # R^s = (.5, 1), (−.1, 0), (0, 0); bucket s0 {.5, −.1, 0} mean 2/15; s1 {1, 0} mean .5
    expected = {
        (0, 0): 2 / 3 + (0.5 - 2 / 15),
        (0, 1): 2 / 3 + 0.5,
        (1, 0): -1 / 3 + (-0.1 - 2 / 15),
        (1, 1): -1 / 3 - 0.5,
        (2, 0): -1 / 3 + (0.0 - 2 / 15),
        (2, 1): -1 / 3,  # s2 is a singleton bucket
    }
    for key, v in expected.items():
        assert value(adv, key) == pytest.approx(v, abs=1e-6)
    doubled = run(shared_state_group(), {"snc": {"gamma": 0.5, "omega": 2.0}})
    assert value(doubled, (0, 1)) == pytest.approx(2 / 3 + 1.0, abs=1e-6)


def test_without_dependency_credit_snc_is_gigpo_mean_norm():
    for lam in (0.0, 0.5):  # no provenance: the dependency term is 0 whatever λ
        snc = run(shared_state_group(), {"snc": {"lam": lam}})
        gigpo = compose("gigpo")
        batch = shared_state_group()
        gigpo.run("advantages", batch, StepContext())
        for key, a in batch.advantages.items():
            torch.testing.assert_close(snc[key], a)


def chain_group():
    """Rollout 0: turn 0 produces n1, turn 1 consumes n1 and produces n2, turn 2 (the answer)
    consumes n2. Rollout 1 fails, without provenance; no state is shared."""
    chain = traj(
        [
            turn("a0", produced=["n1"]),
            turn("a1", consumed=["n1"], produced=["n2"]),
            turn("a2", consumed=["n2"]),
        ],
        1.0,
    )
    return Batch(trajectories=[chain, traj([turn("b0"), turn("b1"), turn("b2")], 0.0)])


def test_three_turn_chain_passes_the_outcome_back_with_gamma_dep():
    config = {"snc": {"dep_credit": "outcome", "gamma_dep": 0.5, "lam": 1.0}}
    batch = chain_group()
    adv = run(batch, config)
    # A^E = ±.5; the answer's credit .5 reaches turn 1 as .5·.5 and turn 0 as .5·.5²
    assert [value(adv, (0, k)) for k in range(3)] == pytest.approx([0.625, 0.75, 0.5])
    assert [value(adv, (1, k)) for k in range(3)] == pytest.approx([-0.5] * 3)
    assert batch.metrics["snc/dependency_edges_per_turn"] == pytest.approx(2 / 6)
    half = run(chain_group(), {"snc": {**config["snc"], "lam": 0.5}})
    assert value(half, (0, 0)) == pytest.approx(0.5 + 0.5 * 0.125)


def test_both_passes_same_state_credit_and_the_outcome_back():
    batch = shared_state_group()
    batch.trajectories[0].turns = [
        turn("s0", produced=["n"]),
        turn("s1", consumed=["n"]),
    ]
    adv = run(batch, {"snc": {"gamma": 0.5, "lam": 0.5, "gamma_dep": 0.9}})
    # turn 1's credit: A^SNC .5 plus the outcome-carrying A^E 2/3 -> 7/6, one edge back
    assert value(adv, (0, 0)) == pytest.approx(2 / 3 + (0.5 - 2 / 15) + 0.5 * 0.9 * 7 / 6)
    assert value(adv, (0, 1)) == pytest.approx(2 / 3 + 0.5)
    only_snc = run(shared_state_group(), {"snc": {"gamma": 0.5, "dep_credit": "snc", "lam": 0.5}})
    assert value(only_snc, (0, 0)) == pytest.approx(2 / 3 + (0.5 - 2 / 15))


def test_dependency_graph_latest_or_all_producers_and_shortest_distance():
    t = traj(
        [
            turn("x", produced=["n", "m"]),
            turn("y", produced=["n"]),
            turn("z", consumed=["n"], produced=["k"]),
            turn("w", consumed=["k", "m"]),
        ],
        1.0,
    )
    assert dependency_parents(t) == [set(), set(), {1}, {2, 0}]
    assert dependency_parents(t, "all") == [set(), set(), {0, 1}, {2, 0}]
    # from turn 3 (credit 1): turn 0 is one edge away through m, not three through n
    dep = propagate(dependency_parents(t), [0.0, 0.0, 0.0, 1.0], 0.5)
    assert dep == pytest.approx([0.5, 0.25, 0.5, 0.0])
    # credits add up: turn 2's own credit 2 reaches turn 1 at distance 1 too
    dep = propagate(dependency_parents(t), [0.0, 0.0, 2.0, 1.0], 0.5)
    assert dep == pytest.approx([0.5, 0.25 + 1.0, 0.5, 0.0])


def test_settings_are_checked():
    for bad in ({"dep_credit": "all"}, {"producers": "first"}, {"gamma_dep": 1.5}):
        with pytest.raises(BadInput, match="snc"):
            SNC({"snc": bad})


def test_a_turn_without_state_key_fails_loudly():
    batch = shared_state_group()
    batch.trajectories[2].turns[1].state_key = None
    with pytest.raises(ValueError, match="state_key"):
        run(batch)


# ---------------------------------------------------------------- real envs


def test_menu_env_starts_and_the_free_env_is_refused():
    compose("snc").check(gym.make(SMALL))
    with pytest.raises(BadInput) as e:
        compose("snc").check(gym.make(FREE))
    message = str(e.value)
    assert "snc" in message and "admissible_actions" in message and FREE in message


def test_the_cli_refuses_the_free_env_with_exit_code_2(tmp_path, capsys):
    from agentgym.cli import main

    args = ["train", "--credit", "snc", "--env", FREE, "--tasks-per-step", "1"]
    with pytest.raises(SystemExit) as e:
        main([*args, "--group-size", "2", "--out", str(tmp_path / "run")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "snc needs info keys ['admissible_actions']" in err[0]


def test_menu_provenance_is_per_action_and_visited_accumulates():
    env = gym.make(SMALL)
    _, info = env.reset(seed=3)
    history, done = [info["provenance"]], False
    while not done:
        _, _, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        history.append(info["provenance"])
        done = terminated or truncated
    for before, after in itertools.pairwise(history):
        assert set(before["visited"]) <= set(after["visited"])
        assert set(before["cited"]) <= set(after["cited"])
    # produced/consumed are the last action's: the search's entities are not carried on
    search, expand = history[1], history[2]
    assert search["produced"] and not set(search["produced"]) <= set(expand["produced"])
    assert history[-1]["produced"] == [] and len(history[-1]["consumed"]) == 1  # the answer


def test_snc_on_real_menu_rollouts(policy, oracle_rollout):
    pool = EnvPool(SMALL, 4, max_turns=4)
    tasks = pick_tasks(pool, 2, np.random.default_rng(1))
    trajs = collect(policy, pool, tasks, 2, RolloutConfig(max_new_tokens=48))
    batch = Batch(trajectories=[])
    for g, (task, seed) in enumerate(tasks):
        batch.trajectories += trajs[2 * g : 2 * g + 2]
        batch.trajectories.append(
            oracle_rollout(policy.tokenizer, SMALL, task, seed, trajs[2 * g].group_id)
        )
    adv = run(batch, {"snc": {"lam": 0.5}})
    no_dep = run(Batch(trajectories=batch.trajectories), {"snc": {"lam": 0.0}})
    assert set(adv) == set(batch.keys())
    # every rollout starts from the group's reset state: one shared bucket per group at least
    assert batch.metrics["snc/bucket_size_mean"] > 1
    for i in (2, 5):
        oracle = batch.trajectories[i]
        idx = batch.groups()[oracle.group_id]
        rows = [batch.trajectories[j].outcome for j in idx for _ in batch.trajectories[j].turns]
        A_E = oracle.outcome - sum(rows) / len(rows)
        assert A_E > 0  # the oracle won, the untrained policy did not
        # the oracle's chain: each step uses what an earlier one produced
        parents = dependency_parents(oracle)
        assert all(parents[k] for k in range(1, len(oracle.turns)))
        # the dependency term is exactly λ·D: each turn passes back A^SNC (+ A^E when last)
        credit = [value(no_dep, (i, k)) - A_E for k in range(len(oracle.turns))]
        credit[-1] += A_E
        D = propagate(parents, credit, 0.9)
        extra = [value(adv, (i, k)) - value(no_dep, (i, k)) for k in range(len(oracle.turns))]
        assert extra == pytest.approx([0.5 * d for d in D], abs=1e-5)
        assert extra[-1] == 0  # a turn's own credit is not passed to itself
        assert parents[-1] and all(extra[b] > 0 for b in parents[-1])  # the win reaches them
