"""TSBPO's ``depth`` switch (CREDIT.md §5, branch nodes anywhere in the tree): a three-level
tree's advantages by hand, the round-by-round sampler and its leaf budget, ``depth=1`` as
today's two-level sampler, bad depths refused, and branches of branches on a real env."""

import dataclasses

import numpy as np
import pytest
import torch
from test_credit_tsbpo import SMALL, approx, fake_step, kid, root

from agentgym.baselines.credit import Batch, StepContext, compose
from agentgym.baselines.credit.tsbpo import (
    TSBPO,
    Forest,
    allocate_branches,
    candidate_nodes,
    n_roots,
    sibling_advantages,
)
from agentgym.core.errors import BadInput

# ---------------------------------------------------------------- a three-level tree by hand


def three_level_tree():
    """Roots r0 (won), r1 (lost); b0, b1 branch r0 at node n = (r0, 1); c0, c1 branch b0 at
    node m = (b0, 2), on b0's own suffix.

    Indices 0..5 = r0, r1, b0, b1, c0, c1; outcomes 1, 0, 0, 1, 1, 1.
    """
    r0 = root("g:0", ("s0", "s1", "s2", "s3"), 1.0)
    r1 = root("g:1", ("s0", "t1", "t2"), 0.0)
    b0 = kid(r0, 1, 0, ("s1", "u2", "u3"), 0.0)
    b1 = kid(r0, 1, 1, ("s1", "v2"), 1.0)
    c0 = kid(b0, 2, 0, ("u2", "w3"), 1.0)
    c1 = kid(b0, 2, 1, ("u2",), 1.0)
    return Batch(trajectories=[r0, r1, b0, b1, c0, c1])


def test_three_level_tree_sibling_advantages_at_both_branch_points():
    batch = three_level_tree()
    forest = Forest(batch)
    assert [forest.point(i) for i in (2, 3, 4, 5)] == [(0, 1), (0, 1), (2, 2), (2, 2)]
    adv = sibling_advantages(batch, forest)
    # n = (r0, 1): children r0 ({r0}: 1), b0 (its subtree {b0, c0, c1}: 2/3), b1 ({b1}: 1)
    n_mean = (1 + 2 / 3 + 1) / 3  # 8/9
    # m = (b0, 2): children b0 ({b0}: 0), c0 ({c0}: 1), c1 ({c1}: 1)
    m_mean = 2 / 3
    expected = {
        (0, 1): 1 - n_mean,  # 1/9
        (2, 1): 2 / 3 - n_mean,  # −2/9
        (3, 1): 1 - n_mean,  # 1/9
        (2, 2): 0 - m_mean,  # −2/3
        (4, 2): 1 - m_mean,  # 1/3
        (5, 2): 1 - m_mean,  # 1/3
    }
    assert adv == approx(expected)

    # the variant adds the unchanged root term (roots only) on own turns; w_ss = 0
    compose("tsbpo", {"tsbpo": {"w_ss": 0.0}}).run("advantages", batch, StepContext())
    z = 0.5 / (2**-0.5 + 1e-6)  # roots R = (1, 0)
    shared = {(2, 0), (3, 0), (4, 0), (4, 1), (5, 0), (5, 1)}
    assert set(batch.advantages) == set(batch.keys()) - shared
    for key, value in {
        (0, 0): z,
        (0, 1): z + 1 / 9,
        (0, 3): z,
        (1, 2): -z,
        (2, 1): -2 / 9,
        (2, 2): -2 / 3,
        (2, 3): 0.0,
        (3, 1): 1 / 9,
        (4, 2): 1 / 3,
        (4, 3): 0.0,
        (5, 2): 1 / 3,
    }.items():
        torch.testing.assert_close(batch.advantages[key], torch.full((2,), value))
    assert batch.metrics["tsbpo/branch_points"] == 2.0


# ---------------------------------------------------------------- candidates and caps


def test_candidates_are_root_turns_and_branch_suffix_turns():
    batch = three_level_tree()
    r0, r1, b0, b1, c0, c1 = batch.trajectories
    nodes = candidate_nodes([r0, r1, b0, b1, c0, c1], min_turn=1)
    got = [(traj.node_id, k) for traj, k in nodes]
    # b0 owns turns 1..3 but its turn 1 acts from r0's node n: only 2, 3 are its own nodes;
    # c1 owns only turn 2, which acts from b0's node m
    assert got == [
        ("g:0", 1),
        ("g:0", 2),
        ("g:0", 3),
        ("g:1", 1),
        ("g:1", 2),
        (b0.node_id, 2),
        (b0.node_id, 3),
        (b1.node_id, 2),
        (c0.node_id, 3),
    ]
    assert [k for _, k in candidate_nodes([r0], min_turn=0)] == [0, 1, 2, 3]


def test_allocator_takes_per_node_caps():
    p_hat = np.array([0.5, 0.5, 0.2])
    assert allocate_branches(p_hat, 3, np.array([0, 1, 2])).tolist() == [0, 1, 2]
    assert allocate_branches(p_hat, 3, np.array([2, 2, 2])).tolist() == [2, 1, 0]
    assert allocate_branches(p_hat, 3, 2).tolist() == [2, 1, 0]  # one cap for all


# ---------------------------------------------------------------- the sampler, with fakes


@pytest.fixture
def fake_tree(monkeypatch):
    """collect/branch/pick_tasks without a policy: lost roots of ``shape["K"]`` turns; won
    branches with ``shape["own"]`` own turns."""
    from agentgym.baselines.credit import tsbpo

    shape = {"K": 3, "own": 3}
    calls: list[str] = []

    def collect(policy, pool, tasks, n, cfg):
        assert cfg.snapshots
        calls.append(f"collect {n}")
        states = [f"s{k}" for k in range(shape["K"])]
        return [
            dataclasses.replace(root(f"{t}@{s}:{j}", states, 0.0), task_id=t, group_id=f"{t}@{s}")
            for t, s in tasks
            for j in range(n)
        ]

    def branch(policy, pool, pairs, n, cfg):
        assert n == 1 and cfg.snapshots
        calls.append(f"branch {len(pairs)}")
        own = [f"x{m}" for m in range(shape["own"])]
        return [
            dataclasses.replace(kid(parent, k, j, own, 1.0), group_id=parent.group_id)
            for j, (parent, k) in enumerate(pairs)
        ]

    monkeypatch.setattr(tsbpo, "collect", collect)
    monkeypatch.setattr(tsbpo, "branch", branch)
    monkeypatch.setattr(tsbpo, "pick_tasks", lambda pool, n, rng: [("task", 7)] * n)
    return shape, calls


def sample(config, B):
    plan = compose("tsbpo", {"tsbpo": config})
    batch = Batch()
    plan.run("sample", batch, fake_step(B))
    return batch, plan


def test_depth_two_spends_the_leaf_budget_exactly_in_two_rounds(fake_tree):
    _, calls = fake_tree
    # one root (K = 3: nodes at turns 1, 2), Q = 7, one branch per node
    config = {"depth": 2, "min_roots": 1, "max_root_fraction": 1 / 8, "max_branches_per_node": 1}
    batch, plan = sample(config, 8)
    trajs = batch.trajectories
    assert len(trajs) == 8 and len({t.node_id for t in trajs}) == 8
    # round 1: ⌈7/2⌉ = 4 wanted, the root's 2 nodes take 2; round 2: the 5 left, on the 4 suffix
    # nodes of the two branches; the 1 no round could place: one more root
    assert calls == ["collect 1", "branch 2", "collect 1", "branch 4"]
    assert [t.node_id for t in trajs] == [
        "task@7:0",
        "task@7:1",
        "task@7:0/1.0",
        "task@7:0/2.0",
        *["task@7:0/1.0/2.0", "task@7:0/1.0/3.0", "task@7:0/2.0/3.0", "task@7:0/2.0/4.0"],
    ]
    assert batch.metrics["tsbpo/roots"] == 2 and batch.metrics["tsbpo/branches"] == 6
    assert batch.metrics["tsbpo/deep_branches"] == 4
    by_id = {t.node_id: t for t in trajs}
    for child in trajs[4:]:  # branches of branches: on the parent's own suffix
        parent = by_id[child.parent_id]
        assert parent.parent_id is not None and child.branch_turn > parent.branch_turn
    assert len(plan.owner("sample").y) == 6  # every branch is a success-model example

    plan.run("advantages", batch, StepContext())
    owned = Forest(batch).owned()
    assert set(batch.advantages) == set(owned)
    assert all(torch.isfinite(a).all() for a in batch.advantages.values())


def test_caps_count_every_round_and_node_ids_stay_unique(fake_tree):
    shape, _ = fake_tree
    shape.update(K=2, own=1)  # one root node (turn 1); branches without own suffix nodes
    config = {"depth": 2, "min_roots": 1, "max_root_fraction": 0.34}
    batch, _ = sample(config, 3)  # R = 1, Q = 2: one branch per round, both at (root, 1)
    assert [t.node_id for t in batch.trajectories] == ["task@7:0", "task@7:0/1.0", "task@7:0/1.1"]
    batch, _ = sample({**config, "max_branches_per_node": 1}, 3)  # round 2 finds no node
    assert [t.node_id for t in batch.trajectories] == ["task@7:0", "task@7:1", "task@7:0/1.0"]


@pytest.mark.parametrize("depth", [2, 3])
def test_any_depth_keeps_B_leaves(fake_tree, depth):
    batch, _ = sample({"depth": depth}, 8)
    trajs = batch.trajectories
    assert len(trajs) == 8 and len({t.node_id for t in trajs}) == 8
    kids = [t for t in trajs if t.parent_id is not None]
    points = [(t.parent_id, t.branch_turn) for t in kids]
    assert max(points.count(p) for p in points) <= 2  # the cap holds over all rounds


def test_depth_one_reproduces_the_two_level_sampler(fake_tree):
    B = 8
    R = n_roots(B, 0.5, 2, 0.75)
    default, _ = sample({}, B)
    explicit, _ = sample({"depth": 1}, B)
    # today's allocation, by hand: one round over the roots' nodes, ties by the step's rng
    nodes = [(f"task@7:{i}", k) for i in range(R) for k in (1, 2)]
    q = allocate_branches(np.full(len(nodes), 0.5), B - R, 2, np.random.default_rng(0))
    expected = [node for node, n in zip(nodes, q, strict=True) for _ in range(n)]
    for batch in (default, explicit):
        kids = batch.trajectories[R:]
        assert [(t.parent_id, t.branch_turn) for t in kids] == expected
        assert batch.metrics["tsbpo/deep_branches"] == 0
    assert_same(default, explicit)


def assert_same(a, b):
    """Two sampled batches hold the same trees, metrics and (after advantages) advantages."""

    def tree(batch):
        return [
            (
                t.node_id,
                t.parent_id,
                t.branch_turn,
                t.outcome,
                [u.response_ids.tolist() for u in t.turns],
            )
            for t in batch.trajectories
        ]

    assert tree(a) == tree(b) and a.metrics == b.metrics
    for batch in (a, b):
        compose("tsbpo").run("advantages", batch, StepContext())
    assert a.advantages.keys() == b.advantages.keys()
    for key in a.advantages:
        torch.testing.assert_close(a.advantages[key], b.advantages[key], rtol=0, atol=0)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("depth", [0, -1, 1.5, True, "2", None])
def test_bad_depth_is_refused(depth):
    with pytest.raises(BadInput, match="depth"):
        TSBPO.Config(depth=depth)
    with pytest.raises(BadInput, match="depth"):
        compose("tsbpo", {"tsbpo": {"depth": depth}})
    assert TSBPO.Config().depth == 1 and TSBPO.Config(depth=3).depth == 3


# ---------------------------------------------------------------- a real env


def real_step(policy, B):
    from agentgym.baselines.rollout import EnvPool, RolloutConfig

    return StepContext(
        tasks_per_step=1,
        group_size=B,
        policy=policy,
        envs=EnvPool(SMALL, 2, max_turns=4),
        rollout=RolloutConfig(max_new_tokens=48),
        rng=np.random.default_rng(0),
    )


def test_branches_of_branches_share_their_parents_prefix_on_a_real_env(policy):
    B = 8
    # one root, one branch per node: round 1 fills the root's nodes, so round 2 must go deep
    config = {"depth": 2, "min_roots": 1, "max_root_fraction": 1 / 8, "max_branches_per_node": 1}
    plan = compose("tsbpo", {"tsbpo": config})
    batch = Batch()
    torch.manual_seed(0)
    plan.run("sample", batch, real_step(policy, B))

    trajs = batch.trajectories
    assert len(trajs) == B and len({t.node_id for t in trajs}) == B
    by_id = {t.node_id: t for t in trajs}
    deep = [t for t in trajs if t.parent_id is not None and by_id[t.parent_id].parent_id]
    assert deep, "no branch of a branch: the roots ended before their second turn"
    assert batch.metrics["tsbpo/deep_branches"] == len(deep)
    for child in deep:
        parent, k = by_id[child.parent_id], child.branch_turn
        assert parent.branch_turn < k < len(parent.turns)  # on the parent's own suffix
        for j in range(k):  # the parent's prefix, shared: its own turns and its parent's
            assert child.turns[j].response_ids is parent.turns[j].response_ids
            assert child.turns[j].state_key == parent.turns[j].state_key
            assert child.turns[j].extras["shared"]
        assert not child.turns[k].extras.get("shared", False)
        assert child.turns[k].state_key == parent.turns[k].state_key  # restored there
        assert child.task_id == parent.task_id and child.seed == parent.seed

    plan.run("advantages", batch, real_step(policy, B))
    assert set(batch.advantages) == set(Forest(batch).owned())
    assert all(torch.isfinite(a).all() for a in batch.advantages.values())


def test_depth_one_matches_the_default_on_a_real_env(policy):
    batches = []
    for config in ({}, {"depth": 1}):
        batch = Batch()
        torch.manual_seed(0)
        compose("tsbpo", {"tsbpo": config}).run("sample", batch, real_step(policy, 6))
        batches.append(batch)
    assert_same(*batches)
