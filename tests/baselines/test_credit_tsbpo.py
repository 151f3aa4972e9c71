"""TSBPO (CREDIT.md §5): tree advantages by hand, the allocator, the success model, the
tree sampler on a real env, and the start-up refusal."""

import dataclasses
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from agentgym.baselines.credit import Batch, StepContext, Trajectory, Turn, compose
from agentgym.baselines.credit.tsbpo import (
    TSBPO,
    W0,
    Forest,
    allocate_branches,
    fit_logistic,
    n_roots,
    node_features,
    predict,
    root_advantages,
    same_state_advantages,
    sibling_advantages,
)
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"


# ---------------------------------------------------------------- builders


def turn(state, L=2, *, shared=False, logp=-1.0):
    return Turn(
        prompt_ids=torch.arange(3),
        response_ids=torch.arange(L),
        state_key=state,
        logp_old=torch.full((L,), logp),
        extras={"shared": True} if shared else {},
    )


def root(node, states, outcome):
    return Trajectory(
        task_id="task",
        group_id="g",
        seed=0,
        turns=[turn(s) for s in states],
        outcome=outcome,
        terminated=True,
        node_id=node,
    )


def kid(parent, k, j, own_states, outcome):
    """A branch of ``parent`` at turn ``k``: shared copies of turns 0..k-1, then its own."""
    shared = [Turn(**{**vars(t), "extras": {**t.extras, "shared": True}}) for t in parent.turns[:k]]
    return Trajectory(
        task_id="task",
        group_id="g",
        seed=0,
        turns=shared + [turn(s) for s in own_states],
        outcome=outcome,
        terminated=True,
        node_id=f"{parent.node_id}/{k}.{j}",
        parent_id=parent.node_id,
        branch_turn=k,
    )


def two_level_tree():
    """Roots r0 (won) and r1; b0, b1 branch r0 at turn 1; b2 branches b0 at turn 2 (won).

    Indices 0..4 = r0, r1, b0, b1, b2. Own turns act from (state keys):
    r0: s0 s1 s2 | r1: s0 u1 u2 | b0: - s1 v2 | b1: - s1 | b2: - - v2 w3.
    """
    r0 = root("g:0", ("s0", "s1", "s2"), 1.0)
    r1 = root("g:1", ("s0", "u1", "u2"), 0.0)
    b0 = kid(r0, 1, 0, ("s1", "v2"), 0.0)
    b1 = kid(r0, 1, 1, ("s1",), 0.0)
    b2 = kid(b0, 2, 0, ("v2", "w3"), 1.0)
    return Batch(trajectories=[r0, r1, b0, b1, b2])


SHARED = {(2, 0), (3, 0), (4, 0), (4, 1)}
OWN = {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (4, 2), (4, 3)}
Z = 0.5 / (2**-0.5 + 1e-6)  # roots R = (1, 0): (R − .5) / (unbiased std 1/√2 + ε)


def approx(d):
    return {k: pytest.approx(v, abs=1e-6) for k, v in d.items()}


# ---------------------------------------------------------------- advantages by hand


def test_root_advantage_is_grpo_over_the_roots_only():
    adv = root_advantages(two_level_tree())
    assert adv == approx({(0, k): Z for k in range(3)} | {(1, k): -Z for k in range(3)})


def test_sibling_advantage_at_each_branch_point():
    adv = sibling_advantages(two_level_tree())
    # point (r0, 1): children r0 (leaves {r0}: 1), b0 ({b0, b2}: .5), b1 ({b1}: 0); mean .5
    # point (b0, 2): children b0 ({b0}: 0), b2 ({b2}: 1); mean .5
    expected = {(0, 1): 0.5, (2, 1): 0.0, (3, 1): -0.5, (2, 2): -0.5, (4, 2): 0.5}
    assert adv == approx(expected)


def test_same_state_advantage_over_the_whole_tree():
    # γ = .5, rewards only at the end: G(k) = R γ^(K−1−k)
    # tree means: (r0,0) over {r0 .25, b0 0, b1 0, b2 .125} = .09375; (b0,1) over {b0 0, b2 .25}
    adv = same_state_advantages(two_level_tree(), gamma=0.5)
    s1 = [0.5, 0.125, 0.0]  # (r0,1), (b0,1), (b1,1)
    expected = {
        (0, 0): 0.046875,
        (1, 0): -0.046875,
        (0, 1): s1[0] - sum(s1) / 3,
        (2, 1): s1[1] - sum(s1) / 3,
        (3, 1): s1[2] - sum(s1) / 3,
        (2, 2): -0.25,  # v2: b0 0, b2 .5
        (4, 2): 0.25,
    } | dict.fromkeys([(0, 2), (1, 1), (1, 2), (4, 3)], 0.0)  # singleton buckets
    assert adv == approx(expected)
    # each leaf's own return instead: s0 holds (.25, 0), s1 holds (.5, 0, 0)
    own = same_state_advantages(two_level_tree(), gamma=0.5, tree_mean=False)
    assert own[(0, 0)] == pytest.approx(0.125) and own[(2, 1)] == pytest.approx(-1 / 6)


def test_total_advantage_combines_the_three_terms_on_own_turns():
    batch = two_level_tree()
    config = {"tsbpo": {"w_sib": 2.0, "w_ss": 0.5, "gamma": 0.5}}
    plan = compose("tsbpo", config)
    plan.run("advantages", batch, StepContext())
    adv = batch.advantages
    assert set(adv) == OWN
    s1_mean = 0.625 / 3
    expected = {
        (0, 0): Z + 0.5 * 0.046875,
        (0, 1): Z + 2 * 0.5 + 0.5 * (0.5 - s1_mean),
        (1, 2): -Z,
        (2, 1): 0.5 * (0.125 - s1_mean),  # branches carry no root term
        (3, 1): 2 * -0.5 + 0.5 * (0.0 - s1_mean),
        (4, 2): 2 * 0.5 + 0.5 * 0.25,
        (4, 3): 0.0,
    }
    for key, value in expected.items():
        torch.testing.assert_close(adv[key], torch.full((2,), value))
    assert batch.metrics["tsbpo/branch_points"] == 2.0
    assert batch.metrics["tsbpo/shared_turns"] == 4.0


def test_shared_prefix_turns_get_no_advantage_key():
    batch = two_level_tree()
    compose("tsbpo").run("advantages", batch, StepContext())
    assert SHARED.isdisjoint(batch.advantages)
    assert set(batch.advantages) | SHARED == set(batch.keys())
    assert all(batch.turn(key).extras["shared"] for key in SHARED)


def test_zero_advantage_turns_can_be_left_out():
    batch = two_level_tree()
    compose("tsbpo", {"tsbpo": {"drop_zero_turns": True}}).run("advantages", batch, None)
    assert set(batch.advantages) == OWN - {(4, 3)}  # w3: no root, no sibling, singleton


def test_observation_tokens_hold_zero():
    batch = two_level_tree()
    batch.trajectories[0].turns[1].policy_mask = torch.tensor([1, 0])
    compose("tsbpo").run("advantages", batch, StepContext())
    assert batch.advantages[(0, 1)][1] == 0 and batch.advantages[(0, 1)][0] != 0


def test_a_branch_at_its_parents_branch_turn_is_a_sibling_there():
    batch = two_level_tree()
    b0 = batch.trajectories[2]
    batch.trajectories.append(kid(b0, 1, 0, ("s1",), 1.0))  # same state as (r0, 1)
    forest = Forest(batch)
    assert forest.point(5) == (0, 1) and forest.point(4) == (2, 2)
    assert forest.owner(4, 1) == 2 and forest.owner(4, 0) == 0 and forest.owner(5, 0) == 0
    A = sibling_advantages(batch, forest)
    # point (r0, 1): r0 1, b0 .5, b1 0, new 1; mean .625
    assert A[(5, 1)] == pytest.approx(0.375) and A[(3, 1)] == pytest.approx(-0.625)


def test_a_branch_whose_parent_is_missing_fails_loudly():
    batch = two_level_tree()
    del batch.trajectories[0]
    with pytest.raises(ValueError, match="g:0"):
        Forest(batch)


# ---------------------------------------------------------------- allocator and prior


def test_allocator_picks_the_most_uncertain_node_and_respects_the_cap():
    p_hat = np.array([0.9, 0.5, 0.2, 0.55])  # contrasts .09, .25, .16, .2475
    assert allocate_branches(p_hat, 3, cap=2).tolist() == [0, 2, 0, 1]
    assert allocate_branches(p_hat, 1, cap=2).tolist() == [0, 1, 0, 0]
    assert allocate_branches(p_hat, 5, cap=1).tolist() == [1, 1, 1, 1]  # cap binds: 4 placed
    ties = allocate_branches(np.full(4, 0.3), 2, cap=1, rng=np.random.default_rng(0))
    assert ties.sum() == 2 and ties.max() == 1


def test_root_count_follows_the_task_prior():
    assert n_roots(8, 0.5, min_roots=2, max_root_fraction=0.75) == 4
    assert n_roots(8, 0.95, min_roots=2, max_root_fraction=0.75) == 2  # near-solved
    assert n_roots(8, 0.0, min_roots=2, max_root_fraction=0.75) == 6  # keeps 2 branches
    assert n_roots(4, 0.5, min_roots=2, max_root_fraction=0.75) == 2
    assert n_roots(1, 0.5, min_roots=2, max_root_fraction=0.75) == 1


# ---------------------------------------------------------------- success model


def test_logistic_fit_recovers_planted_effects():
    rng = np.random.default_rng(0)
    n = 3000
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)])
    planted = np.array([-0.5, 2.0, -1.5, 0.0])
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ planted))).astype(float)
    w = fit_logistic(X, y, np.zeros(4), l2=1e-2)
    assert w[1] > 1.5 and w[2] < -1.0 and abs(w[3]) < 0.2
    np.testing.assert_allclose(w, planted, atol=0.25)


def test_before_data_the_model_is_the_task_prior_and_then_it_learns():
    r = root("g:0", ("s0", "s1"), 1.0)
    x = node_features(0.8, r, 1)
    assert x.tolist()[2:4] == [0.5, 1.0] and x[4] == pytest.approx(1.0)  # depth, R, nll
    assert predict(W0, x[None])[0] == pytest.approx(0.8, abs=1e-9)

    variant = TSBPO({"tsbpo": {"min_fit_examples": 4, "l2": 1e-2}})
    assert variant.task_prior("task") == 0.5  # Beta(1, 1) mean
    # branches from deep nodes succeed, from shallow nodes fail
    rows = [node_features(0.5, r, 0), node_features(0.5, r, 1)] * 20
    kids = [root("k", ("s0",), float(j % 2)) for j in range(40)]
    variant.learn([r], rows, kids)
    assert variant.task_prior("task") == pytest.approx(2 / 3)  # one root win
    assert variant.w[2] > 0  # depth
    p = predict(variant.w, np.stack(rows[:2]))
    assert p[0] < 0.2 < 0.8 < p[1]


# ---------------------------------------------------------------- the tree sampler


def test_sample_builds_trees_of_B_leaves_on_a_real_env(policy):
    from agentgym.baselines.rollout import EnvPool, RolloutConfig

    B = 4
    R = n_roots(B, 0.5, 2, 0.75)  # the Beta(1, 1) prior before any data
    plan = compose("tsbpo")
    assert plan.names == ["tsbpo"] and plan.aggregation == "turn-normalized"
    ctx = StepContext(
        tasks_per_step=1,
        group_size=B,
        policy=policy,
        envs=EnvPool(SMALL, 2, max_turns=4),
        rollout=RolloutConfig(max_new_tokens=48),
        rng=np.random.default_rng(0),
    )
    batch = Batch()
    plan.run("sample", batch, ctx)

    trajs = batch.trajectories
    assert len(trajs) == B and len(batch.groups()) == 1
    roots = [t for t in trajs if t.parent_id is None]
    kids = [t for t in trajs if t.parent_id is not None]
    assert len(roots) == R and len(kids) == B - R
    assert batch.metrics["tsbpo/roots"] == R and batch.metrics["tsbpo/branches"] == B - R
    assert 0 < batch.metrics["tsbpo/p_hat_mean"] < 1
    assert len({t.node_id for t in trajs}) == B
    by_id = {t.node_id: t for t in roots}
    per_node: dict = {}
    for child in kids:
        parent, k = by_id[child.parent_id], child.branch_turn
        assert 0 <= k < len(parent.turns)
        per_node[(child.parent_id, k)] = per_node.get((child.parent_id, k), 0) + 1
        for j in range(k):  # the parent's own turns, shared
            assert child.turns[j].response_ids is parent.turns[j].response_ids
            assert child.turns[j].extras["shared"]
        assert not child.turns[k].extras.get("shared", False)
        assert child.turns[k].state_key == parent.turns[k].state_key  # restored there
        assert child.task_id == parent.task_id and child.seed == parent.seed
    assert max(per_node.values()) <= 2

    plan.run("advantages", batch, ctx)
    shared = {(i, j) for i, t in enumerate(trajs) for j in range(t.branch_turn or 0)}
    assert set(batch.advantages) == set(batch.keys()) - shared
    assert all(torch.isfinite(a).all() for a in batch.advantages.values())
    variant = plan.owner("sample")
    assert isinstance(variant, TSBPO) and len(variant.y) == B - R


@pytest.fixture
def fake_rollouts(monkeypatch):
    """collect/branch/pick_tasks without a policy: roots of ``turns["K"]`` turns, lost."""
    from agentgym.baselines.credit import tsbpo

    turns = {"K": 3}

    def collect(policy, pool, tasks, n, cfg):
        assert cfg.snapshots
        states = [f"s{k}" for k in range(turns["K"])]
        return [
            dataclasses.replace(root(f"{t}@{s}:{j}", states, 0.0), task_id=t, group_id=f"{t}@{s}")
            for t, s in tasks
            for j in range(n)
        ]

    def branch(policy, pool, pairs, n, cfg):
        assert n == 1 and cfg.snapshots
        return [kid(parent, k, j, ("x",), 1.0) for j, (parent, k) in enumerate(pairs)]

    monkeypatch.setattr(tsbpo, "collect", collect)
    monkeypatch.setattr(tsbpo, "branch", branch)
    monkeypatch.setattr(tsbpo, "pick_tasks", lambda pool, n, rng: [("task", 7)] * n)
    return turns


@dataclasses.dataclass(frozen=True)
class FakeRolloutConfig:
    snapshots: bool = False


def fake_step(B):
    return StepContext(
        tasks_per_step=1,
        group_size=B,
        policy=SimpleNamespace(name="fake policy: the fake rollouts never call it"),
        envs=SimpleNamespace(supports_snapshot=True, env_id="fake"),
        rollout=FakeRolloutConfig(),
        rng=np.random.default_rng(0),
    )


def test_sample_branches_past_turn_zero_within_the_caps(fake_rollouts):
    step = fake_step(8)
    batch = Batch()
    compose("tsbpo").run("sample", batch, step)
    kids = [t for t in batch.trajectories if t.parent_id is not None]
    assert len(batch.trajectories) == 8 and len(kids) == 4  # R = ⌈8 (1 − .5)⌉
    points = [(t.parent_id, t.branch_turn) for t in kids]
    assert all(k >= 1 for _, k in points)  # turn 0 would be a fresh episode
    assert max(points.count(p) for p in points) <= 2


def test_budget_the_caps_cannot_place_becomes_more_roots(fake_rollouts):
    fake_rollouts["K"] = 1  # one-turn episodes: no node past turn 0
    step = fake_step(4)
    batch = Batch()
    compose("tsbpo").run("sample", batch, step)
    assert [t.node_id for t in batch.trajectories] == [f"task@7:{j}" for j in range(4)]
    assert batch.metrics["tsbpo/roots"] == 4 and batch.metrics["tsbpo/branches"] == 0


# ---------------------------------------------------------------- start-up refusal


class FakeEnv(gym.Env):
    """One step; the reset info holds a state key; snapshots as the class says."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)
    supports_snapshot = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {"won": False, "state_key": "s"}

    def step(self, action):
        return 0, 0.0, True, False, {}


class SnapshotEnv(FakeEnv):
    supports_snapshot = True

    def snapshot(self):
        return b""

    def restore(self, snapshot):
        pass


def test_an_env_without_snapshots_is_refused_by_name():
    with pytest.raises(BadInput) as e:
        compose("tsbpo").check(FakeEnv())
    assert "tsbpo" in str(e.value) and "snapshot" in str(e.value)
    compose("tsbpo").check(SnapshotEnv())
    no_snapshots = StepContext(envs=SimpleNamespace(supports_snapshot=False, env_id="fake"))
    with pytest.raises(BadInput, match="fake"):
        compose("tsbpo").run("sample", Batch(), no_snapshots)
