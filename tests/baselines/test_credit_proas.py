"""ProAS: a reference graph of successes labels each step; failed rollouts stop punishing
their good steps and move that negative mass onto their drift steps, earlier drift first."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose, get
from agentgym.baselines.credit.proas import ReferenceGraph, drift_weights, steps_of
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect, pick_tasks
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
FREE = "agentgym/Search-Free-Small-v0"
ProAS = get("proas")


def path(steps, final, *, won, task="t", group="g"):
    """A rollout through ``steps`` = [(state, action), ...] ending in state ``final``."""
    turns = []
    for k, (state, action) in enumerate(steps):
        last = k == len(steps) - 1
        info = {"state_key": final if last else steps[k + 1][0], "won": won and last}
        turns.append(Turn(torch.arange(3), torch.arange(2), state_key=state, info=info))
        turns[-1].extras["action"] = action
    return Trajectory(task, group, 0, turns, outcome=float(won), terminated=True)


SUCCESS = [("A", "a"), ("B", "b"), ("C", "c")]  # A -> B -> C -> G
# reasonable (A, a), drift to X, advancing X -> C, drift to Y, drift to F
FAILURE = [("A", "a"), ("B", "x"), ("X", "y"), ("C", "z"), ("Y", "w")]


def batch_with(per_turn, failure=FAILURE, final="F"):
    """The success (A = +1 per turn) and a failure with the given per-turn advantages."""
    batch = Batch(trajectories=[path(SUCCESS, "G", won=True), path(failure, final, won=False)])
    batch.advantages = {(0, k): torch.ones(2) for k in range(3)}
    for k, a in enumerate(per_turn):
        batch.advantages[(1, k)] = torch.full((2,), float(a))
    return batch


def shaped(batch, config=None, variant=None):
    variant = variant or ProAS(config)
    variant.shape(batch, StepContext())
    return variant


def turn_values(batch, i):
    out = []
    for k in range(len(batch.trajectories[i].turns)):
        a = batch.advantages[(i, k)]
        assert (a == a[0]).all()
        out.append(a[0].item())
    return out


def test_reference_graph_progress_and_labels():
    graph = ReferenceGraph.from_successes([steps_of(path(SUCCESS, "G", won=True))])
    # distances to the goal G: A 3, B 2, C 1, G 0
    assert graph.progress == pytest.approx({"A": 0.0, "B": 1 / 3, "C": 2 / 3, "G": 1.0})
    labels = [graph.label(s) for s in steps_of(path(FAILURE, "F", won=False))]
    assert labels == ["reasonable", "drift", "advancing", "drift", "drift"]


@pytest.mark.parametrize(
    ("weights", "drift_share"),
    [
        ("future", [3 / 6, 2 / 6, 1 / 6]),  # drift steps at or after k: 3, 2, 1
        ("linear", [4 / 7, 2 / 7, 1 / 7]),  # K − k + 1 (1-based k = 2, 4, 5): 4, 2, 1
        ("uniform", [1 / 3, 1 / 3, 1 / 3]),
    ],
)
def test_failed_rollout_mass_moves_to_its_drift_steps(weights, drift_share):
    batch = batch_with([-1.0] * 5)
    shaped(batch, {"proas": {"weights": weights}})
    got = turn_values(batch, 1)
    M = -5.0
    assert got[0] == 0.0 and got[2] == 0.0  # reasonable and advancing steps: masked
    assert [got[1], got[3], got[4]] == pytest.approx([w * M for w in drift_share])
    assert sum(got) == pytest.approx(M)  # negative mass preserved exactly
    assert turn_values(batch, 0) == [1.0, 1.0, 1.0]  # the success is untouched
    assert batch.metrics["proas/masked_steps"] == 2.0
    assert batch.metrics["proas/moved_mass"] == pytest.approx(-2.0)


def test_positive_steps_of_a_failure_are_untouched_and_only_negative_mass_moves():
    batch = batch_with([-1.0, -2.0, -0.5, 0.5, -1.0])
    shaped(batch)
    # negative steps 0, 1, 2, 4: M = −4.5; drift among them: 1, 4 -> weights 2/3, 1/3
    assert turn_values(batch, 1) == pytest.approx([0.0, -3.0, 0.0, 0.5, -1.5])


def test_turn_value_first_or_mean_and_write_back_on_the_mask():
    batch = batch_with([-1.0] * 5)
    batch.trajectories[1].turns[1].policy_mask = torch.tensor([1.0, 0.0])
    batch.advantages[(1, 0)] = torch.tensor([-1.0, -3.0])
    batch.advantages[(1, 1)] = torch.tensor([-1.0, 0.0])
    shaped(batch)  # mean: turn 0 counts −2, M = −6
    assert batch.advantages[(1, 1)].tolist() == pytest.approx([-3.0, 0.0])
    first = batch_with([-1.0] * 5)
    first.advantages[(1, 0)] = torch.tensor([-1.0, -3.0])
    shaped(first, {"proas": {"turn_value": "first"}})  # turn 0 counts −1: M = −5
    assert turn_values(first, 1)[1] == pytest.approx(-2.5)


def test_drift_of_positive_rollouts_is_masked_only_on_request():
    lucky = [("A", "a"), ("B", "q")]  # not a win, but its advantage is positive
    for switch, expected in ((False, [0.5, 0.5]), (True, [0.5, 0.0])):
        batch = batch_with([0.5, 0.5], failure=lucky, final="Q")
        shaped(batch, {"proas": {"mask_positive_drift": switch}})
        assert turn_values(batch, 1) == expected


def test_without_drift_the_good_steps_are_masked_or_kept():
    on_path = [("A", "a"), ("B", "b")]  # ran out of turns on the success path
    batch = batch_with([-1.0, -1.0], failure=on_path, final="C")
    shaped(batch)
    assert turn_values(batch, 1) == [0.0, 0.0]
    kept = batch_with([-1.0, -1.0], failure=on_path, final="C")
    shaped(kept, {"proas": {"keep_without_drift": True}})
    assert turn_values(kept, 1) == [-1.0, -1.0]


def test_tasks_without_a_success_are_left_alone():
    batch = batch_with([-1.0] * 5)
    batch.trajectories[0] = path(SUCCESS, "G", won=False)  # no success: no graph
    shaped(batch)
    assert turn_values(batch, 1) == [-1.0] * 5
    assert batch.metrics["proas/rollouts_without_graph"] == 2.0


def test_the_success_window_lives_across_steps():
    variant = ProAS({"proas": {"window": 1}})
    shaped(batch_with([-1.0] * 5), variant=variant)
    # next step: only the failure; last step's success still labels it
    later = Batch(trajectories=[path(FAILURE, "F", won=False)])
    later.advantages = {(0, k): -torch.ones(2) for k in range(5)}
    shaped(later, variant=variant)
    assert turn_values(later, 0)[0] == 0.0
    # a new success on another path pushes the old one out of a window of one
    other = path([("A", "a2"), ("B2", "b2")], "G2", won=True)
    again = Batch(trajectories=[other, path(FAILURE, "F", won=False)])
    again.advantages = {(0, k): torch.ones(2) for k in range(2)}
    again.advantages.update({(1, k): -torch.ones(2) for k in range(5)})
    shaped(again, variant=variant)
    assert len(variant.successes["t"]) == 1
    assert turn_values(again, 1)[0] != 0.0  # (A, a) is no longer an edge: drift


def test_drift_weights_and_settings():
    assert drift_weights([0, 2, 3], 4, "future") == pytest.approx([0.5, 1 / 3, 1 / 6])
    assert drift_weights([0, 2, 3], 4, "linear") == pytest.approx([4 / 7, 2 / 7, 1 / 7])
    for bad in ({"window": 0}, {"weights": "late"}, {"turn_value": "last"}):
        with pytest.raises(BadInput, match="proas"):
            ProAS({"proas": bad})


def test_proas_chains_after_any_estimator():
    assert compose("proas").names == ["group", "grpo", "proas"]
    assert compose("gigpo+proas").names == ["group", "gigpo", "proas"]
    batch = Batch(trajectories=[path(SUCCESS, "G", won=True), path(FAILURE, "F", won=False)])
    plan, ctx = compose("proas"), StepContext()
    for hook in ("advantages", "shape"):
        plan.run(hook, batch, ctx)
    z = 0.5 / (2**-0.5 + 1e-6)  # GRPO on outcomes (1, 0)
    assert turn_values(batch, 0) == pytest.approx([z] * 3)
    assert turn_values(batch, 1) == pytest.approx([0, -2.5 * z, 0, -5 / 3 * z, -5 / 6 * z])


# ---------------------------------------------------------------- real rollouts


@pytest.mark.parametrize(
    ("env_id", "spec"), [(SMALL, "proas"), (SMALL, "gigpo+proas"), (FREE, "proas")]
)
def test_proas_on_real_rollouts(policy, oracle_rollout, env_id, spec):
    pool = EnvPool(env_id, 4, max_turns=4)
    tasks = pick_tasks(pool, 2, np.random.default_rng(2))
    trajs = collect(policy, pool, tasks, 2, RolloutConfig(max_new_tokens=48))
    batch = Batch(trajectories=[])
    for g, (task, seed) in enumerate(tasks):
        batch.trajectories += trajs[2 * g : 2 * g + 2]
        batch.trajectories.append(
            oracle_rollout(policy.tokenizer, env_id, task, seed, trajs[2 * g].group_id)
        )
    plan, ctx = compose(spec), StepContext(policy=policy)
    compose(spec).check(gym.make(env_id))
    for hook in ("transform", "score", "advantages"):
        plan.run(hook, batch, ctx)
    before = {key: a.clone() for key, a in batch.advantages.items()}
    plan.run("shape", batch, ctx)
    assert batch.metrics["proas/tasks_with_graph"] == 2.0
    assert batch.metrics["proas/redistributed_rollouts"] > 0
    assert batch.metrics["proas/reasonable_share"] > 0  # the failures' first steps, at least
    for i, traj in enumerate(batch.trajectories):
        keys = [(i, k) for k in range(len(traj.turns))]
        old = [before[key][0].item() for key in keys]
        new = [batch.advantages[key][0].item() for key in keys]
        if traj.turns[-1].info["won"]:
            assert new == old  # successes untouched
        elif sum(old) < 0:
            negative = sum(a for a in old if a < 0)
            if any(a != 0 for a, b in zip(new, old, strict=True) if b < 0):
                assert sum(min(a, 0.0) for a in new) == pytest.approx(negative, abs=1e-5)
            assert all(a == b for a, b in zip(new, old, strict=True) if b >= 0)
