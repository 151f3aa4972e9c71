"""The rollout engine: groups share a task, actions stay valid, done flags stay apart."""

import pytest
import torch

from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(SMALL, episodes=10), vocab_size=600)
    return TinyPolicy.from_preset("nano", tokenizer)


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
