"""The rollout engine: groups share a task, actions stay valid, done flags stay apart."""

import pytest
import torch

from agentgym.baselines.prompt import prompt_ids
from agentgym.baselines.rollout import EnvPool, RolloutConfig, branch, collect

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module")
def pool():
    return EnvPool(SMALL, 4)


def test_groups_share_their_task_and_constrained_actions_are_valid(policy, pool):
    tasks = [(pool.envs[0].unwrapped.task_ids()[i], 100 + i) for i in range(2)]
    trajs = collect(policy, pool, tasks, 3, RolloutConfig(max_new_tokens=40))
    assert len(trajs) == 6 and len(pool) >= 6
    assert [t.group_id for t in trajs] == [f"{t}@{s}" for t, s in tasks for _ in range(3)]
    for t in trajs:
        assert t.turns and (t.terminated != t.truncated)
        assert all(turn.info["action_valid"] for turn in t.turns)
        assert all(turn.reward == 0.0 for turn in t.turns)
        assert t.turns[-1].terminated == t.terminated and t.turns[-1].truncated == t.truncated
        assert not any(turn.terminated or turn.truncated for turn in t.turns[:-1])
        for turn in t.turns:
            assert len(turn.logp_old) == len(turn.response_ids) > 0
            assert turn.state_key is not None
            # the action sent to the env is the decoded response (an item's exact text)
            text = policy.tokenizer.decode(turn.response_ids[:-1].tolist())
            assert turn.extras["action"] == text


def test_behaviour_logps_match_the_policy_scoring(policy, pool):
    tasks = [(pool.envs[0].unwrapped.task_ids()[5], 7)]
    trajs = collect(policy, pool, tasks, 2, RolloutConfig(constrained=False, max_new_tokens=12))
    turns = [turn for t in trajs for turn in t.turns][:6]
    scored = policy.logprobs([t.prompt_ids for t in turns], [t.response_ids for t in turns])
    for turn, logp in zip(turns, scored, strict=True):
        torch.testing.assert_close(logp, turn.logp_old, atol=1e-4, rtol=1e-4)
    assert any(not turn.info["action_valid"] for t in trajs for turn in t.turns)  # free text


def test_gumbel_keys_make_rollouts_reproducible(policy, pool):
    tasks = [(pool.envs[0].unwrapped.task_ids()[3], 11)]
    cfg = RolloutConfig(max_new_tokens=40)
    a = collect(policy, pool, tasks, 2, cfg, gumbel_keys=[5, 5])
    b = collect(policy, pool, tasks, 2, cfg, gumbel_keys=[5, 5])
    ids = lambda trajs: [[t.response_ids.tolist() for t in tr.turns] for tr in trajs]  # noqa: E731
    assert ids(a) == ids(b)
    assert ids(a)[0] == ids(a)[1]  # twins: same key, same task, same noise


@pytest.fixture(scope="module")
def short_pool():
    return EnvPool(SMALL, 2, max_turns=6)


def test_pool_grows_with_its_constructor_arguments(short_pool):
    short_pool.grow(3)
    assert [env.unwrapped.max_turns for env in short_pool.envs] == [6, 6, 6]


def test_roots_carry_node_ids_and_snapshots(policy, short_pool):
    task = short_pool.envs[0].unwrapped.task_ids()[2]
    cfg = RolloutConfig(max_new_tokens=40, snapshots=True)
    trajs = collect(policy, short_pool, [(task, 9)], 2, cfg)
    assert [t.node_id for t in trajs] == [f"{task}@9:0", f"{task}@9:1"]
    for t in trajs:
        assert t.parent_id is None and t.prompt is not None and t.prompt.layout == "per-step"
        for turn in t.turns:
            assert isinstance(turn.extras["snapshot"], bytes)
            assert turn.prompt_ids.tolist() == prompt_ids(policy, turn.extras["observation"])
            assert turn.extras["observation_info"]["state_key"] == turn.state_key
    plain = collect(policy, short_pool, [(task, 9)], 1, RolloutConfig(max_new_tokens=40))
    assert all("snapshot" not in turn.extras for turn in plain[0].turns)


def test_branch_replays_the_parent_state_and_plays_on(policy, short_pool):
    task = short_pool.envs[0].unwrapped.task_ids()[4]
    cfg = RolloutConfig(max_new_tokens=40, snapshots=True)
    (parent,) = collect(policy, short_pool, [(task, 21)], 1, cfg, gumbel_keys=[5])
    k = min(2, len(parent.turns) - 1)
    kids = branch(policy, short_pool, [(parent, k), (parent, 0)], 2, cfg, gumbel_keys=[5, 6, 7, 8])
    assert [c.node_id for c in kids] == [
        f"{parent.node_id}/{k}.0",
        f"{parent.node_id}/{k}.1",
        f"{parent.node_id}/0.0",
        f"{parent.node_id}/0.1",
    ]
    for child, at in zip(kids, [k, k, 0, 0], strict=True):
        assert child.parent_id == parent.node_id and child.branch_turn == at
        assert child.group_id == parent.group_id and child.task_id == parent.task_id
        assert len(child.turns) > at and child.terminated != child.truncated
        assert child.turns[-1].terminated == child.terminated
        assert child.turns[-1].truncated == child.truncated
        assert all(t.extras.get("shared") for t in child.turns[:at])
        assert not any(t.extras.get("shared") for t in child.turns[at:])
        assert not any(t.extras.get("shared") for t in parent.turns)
        for old, new in zip(parent.turns[:at], child.turns[:at], strict=True):
            assert new.response_ids is old.response_ids and new.state_key == old.state_key
        first = child.turns[at]  # the state the parent acted from at turn `at`
        assert torch.equal(first.prompt_ids, parent.turns[at].prompt_ids)
        assert first.state_key == parent.turns[at].state_key
        assert "snapshot" in first.extras
    # the same key from the same state: the branch replays the parent's own continuation
    same = kids[0]
    ids = lambda turns: [t.response_ids.tolist() for t in turns]  # noqa: E731
    assert ids(same.turns) == ids(parent.turns)
    assert (same.outcome, same.terminated, same.truncated) == (
        parent.outcome,
        parent.terminated,
        parent.truncated,
    )
    # branches of branches keep the ids unique
    (grandchild,) = branch(policy, short_pool, [(kids[1], len(kids[1].turns) - 1)], 1, cfg)
    assert grandchild.node_id == f"{kids[1].node_id}/{len(kids[1].turns) - 1}.0"


def test_forced_branch_takes_the_parent_action_then_shares_the_fresh_branch_noise(
    policy, short_pool
):
    task = short_pool.envs[0].unwrapped.task_ids()[4]
    cfg = RolloutConfig(max_new_tokens=40, snapshots=True)
    (parent,) = collect(policy, short_pool, [(task, 21)], 1, cfg, gumbel_keys=[5])
    k = min(1, len(parent.turns) - 1)
    keys = [11, 12, 13, 14, 15, 16]
    forced = branch(policy, short_pool, [(parent, k)], 6, cfg, gumbel_keys=keys, forced=True)
    fresh = branch(policy, short_pool, [(parent, k)], 6, cfg, gumbel_keys=keys)
    ids = lambda turns: [t.response_ids.tolist() for t in turns]  # noqa: E731
    for q in forced:
        step = q.turns[k]
        assert step.extras["forced"] and step.extras["action"] == parent.turns[k].extras["action"]
        assert torch.equal(step.response_ids, parent.turns[k].response_ids)
        assert step.state_key == parent.turns[k].state_key
        assert not any(t.extras.get("forced") for t in q.turns[k + 1 :])
    # common random numbers: where the fresh branch happens to choose the parent's action,
    # its whole continuation is the forced one's
    same = [
        (q, v)
        for q, v in zip(forced, fresh, strict=True)
        if v.turns[k].extras["action"] == parent.turns[k].extras["action"]
    ]
    assert 0 < len(same) < len(fresh)  # these keys give both cases (two menu items here)
    for q, v in same:
        assert ids(v.turns) == ids(q.turns) and v.outcome == q.outcome
    with pytest.raises(ValueError, match="env_keys"):
        branch(policy, short_pool, [(parent, k)], 2, cfg, env_keys=[1])


def test_branch_needs_snapshots(policy, short_pool, monkeypatch):
    task = short_pool.envs[0].unwrapped.task_ids()[1]
    cfg = RolloutConfig(max_new_tokens=40)
    (plain,) = collect(policy, short_pool, [(task, 3)], 1, cfg)
    with pytest.raises(ValueError, match="snapshots=True"):
        branch(policy, short_pool, [(plain, 0)], 1, cfg)
    with pytest.raises(ValueError, match="out of range"):
        branch(policy, short_pool, [(plain, len(plain.turns))], 1, cfg)
    monkeypatch.setattr(type(short_pool.envs[0].unwrapped), "supports_snapshot", False)
    no_snap = EnvPool(SMALL, 1, max_turns=3)
    (traj,) = collect(policy, no_snap, [(task, 3)], 1, RolloutConfig(snapshots=True))
    assert all("snapshot" not in turn.extras for turn in traj.turns)
    with pytest.raises(ValueError, match="does not support snapshot"):
        branch(policy, no_snap, [(traj, 0)], 1, cfg)


class _PaysEveryStep:
    """Three steps: 0.25 for each of the first two (0.1 taken back for "bad"), 1.0 at the end."""

    def __init__(self):
        self.k = 0
        self.unwrapped = self

    def reset(self, seed=None, options=None):
        self.k = 0
        return "start", {}

    def step(self, action):
        self.k += 1
        done = self.k == 3
        reward = 1.0 if done else 0.25 - (0.1 if action == "bad" else 0.0)
        return f"after {action}", reward, done, False, {"action_valid": action != "bad"}


class _Pool:
    supports_snapshot = False

    def __init__(self, n):
        self.envs = [_PaysEveryStep() for _ in range(n)]

    def grow(self, n):
        self.envs += [_PaysEveryStep() for _ in range(n - len(self.envs))]


def test_every_step_reward_stays_on_the_trajectory(policy):
    """Intermediate env rewards (TextWorld's score deltas, step penalties) used to be dropped:
    a turn kept only the invalid-action penalty."""
    from agentgym.baselines.rollout import replay

    cfg = RolloutConfig(constrained=False, invalid_penalty=0.5)
    traj = replay(policy, _PaysEveryStep(), "t", 0, ["go", "bad", "end"], cfg)
    # the env paid 0.25, 0.15, 1.0; "bad" was rejected: the 0.5 penalty on top
    assert [t.reward for t in traj.turns] == pytest.approx([0.25, 0.15 - 0.5, 0.0])
    assert traj.outcome == 1.0 and traj.total_return == pytest.approx(0.9)
    assert traj.step_returns(1.0) == pytest.approx([0.9, 0.65, 1.0])
    cfg = RolloutConfig(max_new_tokens=4)
    (played,) = collect(policy, _Pool(1), [("t", 0)], 1, cfg, gumbel_keys=[1])
    assert [t.extras["action"] != "bad" for t in played.turns] == [True] * 3
    assert [t.reward for t in played.turns] == [0.25, 0.25, 0.0] and played.outcome == 1.0
