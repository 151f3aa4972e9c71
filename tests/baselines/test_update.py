"""The update back-propagated in micro-batches gives the whole mini-batch's gradients."""

from __future__ import annotations

import copy

import pytest
import torch

from agentgym.baselines.batch import Batch
from agentgym.baselines.config import TrainConfig
from agentgym.baselines.credit import compose
from agentgym.baselines.losses import AGGREGATIONS
from agentgym.baselines.prompt import PromptFormat
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.update import micro_batches, policy_backward, policy_loss

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module", params=["per-step", "concat"])
def batch(request, policy):
    pool = EnvPool(SMALL, 4, max_turns=4)
    tasks = [(pool.envs[0].unwrapped.task_ids()[i], 10 + i) for i in range(2)]
    prompt = PromptFormat(layout=request.param) if request.param == "concat" else PromptFormat()
    cfg = RolloutConfig(prompt=prompt, constrained=False, max_new_tokens=10)
    with torch.no_grad():
        trajs = collect(policy, pool, tasks, 3, cfg, gumbel_keys=list(range(6)))
    out = Batch(trajectories=trajs)
    gen = torch.Generator().manual_seed(0)
    keys = out.keys()  # (trajectory, turn) pairs
    out.advantages = {k: torch.randn(len(out.turn(k).response_ids), generator=gen) for k in keys}
    return out


def _grads(policy):
    return [
        p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in policy.parameters()
    ]


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_micro_batches_give_the_whole_batch_gradient_loss_and_metrics(policy, batch, aggregation):
    policy = copy.deepcopy(policy)
    ref = copy.deepcopy(policy)
    with torch.no_grad():  # a reference that differs, so the KL term has a gradient
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))
    cfg = TrainConfig.from_options(aggregation=aggregation, kl_coef=0.1, micro_batch_tokens=0)
    plan = compose("grpo", cfg)
    loss, whole = policy_loss(batch, policy, ref, plan, cfg)
    policy.zero_grad()
    loss.backward()
    expected = _grads(policy)

    small = cfg.with_options(micro_batch_tokens=120)
    assert len(micro_batches(batch, list(batch.advantages), 120)) > 2
    policy.zero_grad()
    value, metrics = policy_backward(batch, policy, ref, plan, small)
    for got, want in zip(_grads(policy), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert value == pytest.approx(float(loss.detach()), rel=1e-5, abs=1e-7)
    assert metrics.keys() == whole.keys()
    for name in whole:
        assert metrics[name] == pytest.approx(whole[name], rel=1e-5, abs=1e-7)


def test_micro_batches_cover_the_keys_bound_the_padding_and_keep_a_concat_rollout_whole(batch):
    keys = list(batch.advantages)
    runs = micro_batches(batch, keys, 150)
    assert sorted(k for run in runs for k in run) == sorted(keys)
    concat = batch.trajectories[0].prompt.layout == "concat"
    for run in runs:
        rows: dict = {}
        for i, k in run:  # a concat rollout is one row, as long as its last turn's sequence
            turn = batch.turn((i, k))
            rows[(i, 0 if concat else k)] = len(turn.prompt_ids) + len(turn.response_ids)
        assert len(rows) == 1 or len(rows) * max(rows.values()) <= 150
    if concat:  # no rollout is split across runs
        owners = [{i for i, _ in run} for run in runs]
        assert sum(len(o) for o in owners) == len(set().union(*owners))
    assert micro_batches(batch, keys, 0) == [keys]


class _Counting:
    """The policy, counting the rows each scoring call takes."""

    def __init__(self, policy):
        self.policy, self.rows = policy, 0

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def logprobs(self, prompts, responses, **kwargs):
        self.rows += len(prompts)
        return self.policy.logprobs(prompts, responses, **kwargs)


def test_turns_without_advantage_are_not_scored_and_the_gradient_is_unchanged(policy, batch):
    policy = copy.deepcopy(policy)
    cfg = TrainConfig.from_options(aggregation="seq-mean-token-mean")
    plan = compose("grpo", cfg)
    zeroed = Batch(trajectories=batch.trajectories)
    zeroed.advantages = {
        k: torch.zeros_like(a) if k[0] % 2 == 0 else a for k, a in batch.advantages.items()
    }
    loss, _ = policy_loss(zeroed, policy, None, plan, cfg)
    policy.zero_grad()
    loss.backward()
    expected = _grads(policy)
    policy.zero_grad()
    counting = _Counting(policy)
    _, metrics = policy_backward(zeroed, counting, None, plan, cfg)
    for got, want in zip(_grads(policy), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    full = _Counting(policy)
    policy_loss(zeroed, full, None, plan, cfg)
    assert 0 < counting.rows < full.rows
    assert metrics["tokens"] == float(zeroed.token_index()[0].sum())

    none = Batch(trajectories=batch.trajectories)
    none.advantages = {k: torch.zeros_like(a) for k, a in batch.advantages.items()}
    policy.zero_grad()
    assert policy_backward(none, policy, None, plan, cfg)[0] == 0.0
    grads = [p.grad for n, p in policy.named_parameters() if not n.startswith("value")]
    assert all(g is not None and not g.any() for g in grads)  # Adam still takes its step
