"""Pivot-SD: pivots, L_SD and L_UL by hand; on real rollouts the pivots are each sequence's
highest-gain tokens, distillation reads only successes and unlikelihood only failures the
teacher rejects; the RL advantages are grpo's; the CLI."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows
from hf_model import write_hf_model

from agentgym.baselines.batch import Batch, StepContext
from agentgym.baselines.credit import compose
from agentgym.baselines.credit._privileged import log1mexp
from agentgym.baselines.credit.pivot_sd import PivotSD, sd_term, select_pivots, ul_term
from agentgym.baselines.divergence import kl
from agentgym.baselines.policies.tokenizer import collect_env_text
from agentgym.baselines.teachers import Teachers, TokenDist
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"


def test_pivots_are_the_top_q_fraction_of_each_sequence():
    gain = torch.tensor([0.1, 0.9, 0.5, 0.3, 0.2, 0.8, 0.7])
    seq = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    ones = torch.ones(7)
    # q = 0.5: ⌈2⌉ of sequence 0, ⌈1.5⌉ = 2 of sequence 1
    assert select_pivots(gain, ones, seq, 0.5).tolist() == [0, 1, 1, 0, 0, 1, 1]
    # q = 0.1: one each; a masked-out token is never a pivot and does not count in n
    mask = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert select_pivots(gain, mask, seq, 0.1).tolist() == [0, 0, 1, 0, 0, 1, 0]
    assert select_pivots(gain, mask, seq, 0.5).tolist() == [0, 0, 1, 1, 0, 1, 1]
    # 30 tokens at q = 0.1 are 3 pivots (no float round-up to 4); ties go to the earlier token
    flat = torch.zeros(30)
    picked = select_pivots(flat, torch.ones(30), torch.zeros(30, dtype=torch.long), 0.1)
    assert picked.nonzero().squeeze(-1).tolist() == [0, 1, 2]


def test_sd_and_ul_terms_match_hand_computed_values():
    # teacher top-2 (0.5, 0.3) + tail 0.2; the student on those ids (0.2, 0.5) + tail 0.3
    ids = torch.tensor([[4, 7]])
    t = TokenDist(ids, torch.tensor([[0.5, 0.3]]).log(), torch.tensor([0.5]).log())
    s = TokenDist(ids, torch.tensor([[0.2, 0.5]]).log(), torch.tensor([0.2]).log())
    div = kl(t.with_tail(), s.with_tail())
    want = 0.5 * math.log(0.5 / 0.2) + 0.3 * math.log(0.3 / 0.5) + 0.2 * math.log(0.2 / 0.3)
    assert float(div[0]) == pytest.approx(want, rel=1e-5)
    divs = torch.tensor([want, 2.0, 7.0])
    chosen = torch.tensor([True, True, False])
    assert float(sd_term(divs, chosen)) == pytest.approx((want + 2.0) / 2)
    logp = torch.tensor([0.5, 0.9, 0.3]).log()
    assert float(ul_term(logp, chosen)) == pytest.approx(-(math.log(0.5) + math.log(0.1)) / 2)
    assert sd_term(divs, torch.zeros(3, dtype=torch.bool)) is None
    assert ul_term(logp, torch.zeros(3, dtype=torch.bool)) is None


def test_log1mexp_is_stable_and_unlikelihood_pushes_the_token_down():
    x = torch.tensor([0.0, -1e-12, -1e-3, -0.5, -30.0, -1e4])
    y = log1mexp(x)
    assert bool(torch.isfinite(y).all())
    assert float(y[2]) == pytest.approx(math.log(-math.expm1(-1e-3)), rel=1e-6)
    assert float(y[3]) == pytest.approx(math.log(1 - math.exp(-0.5)), rel=1e-6)
    assert float(y[4]) == pytest.approx(-math.exp(-30.0), rel=1e-4)
    z = torch.tensor([[1.0, 2.0, 0.5]], requires_grad=True)
    logp = torch.log_softmax(z, -1)[:, 1]
    (grad,) = torch.autograd.grad(ul_term(logp, torch.tensor([True])), z)
    # d/dz_y −log(1 − p_y) = p_y > 0: descent lowers the sampled token, raises the others
    p = torch.softmax(z.detach(), -1)[0]
    assert float(grad[0, 1]) == pytest.approx(float(p[1]), rel=1e-5)
    assert float(grad[0, 0]) < 0 and float(grad[0, 2]) < 0


def _tokens(variant, teacher, batch):
    teachers = Teachers(teacher)
    variant.score(batch, StepContext(teachers=teachers))
    return teachers, variant.tokens(batch, teachers, batch.keys())


@pytest.mark.parametrize("gain", ["kl", "abs_delta"])
def test_on_real_rollouts_pivots_are_the_highest_gain_tokens_of_each_rollout(chain_rollouts, gain):
    _, teacher, batch = chain_rollouts
    b = Batch(copy.deepcopy(batch.trajectories))
    variant = PivotSD(PivotSD.Config(gain=gain))
    _, t = _tokens(variant, teacher, b)
    if gain == "abs_delta":
        torch.testing.assert_close(t.gain, t.delta.abs())
    else:
        torch.testing.assert_close(t.gain, t.divergence.detach())
    mask, seq_ids, _ = b.token_index()
    for i in range(len(b.trajectories)):
        mine = (seq_ids == i) & mask.bool()
        piv = t.pivots & mine
        assert int(piv.sum()) == math.ceil(0.1 * int(mine.sum()))
        assert float(t.gain[piv].min()) >= float(t.gain[mine & ~t.pivots].max())
    assert not bool((t.pivots & ~mask.bool()).any())


def test_distillation_reads_successes_and_unlikelihood_rejected_failure_pivots(chain_rollouts):
    policy, teacher, batch = chain_rollouts
    b = Batch(copy.deepcopy(batch.trajectories))
    variant = PivotSD()
    teachers, t = _tokens(variant, teacher, b)
    _, seq_ids, _ = b.token_index()
    won = torch.tensor([traj.outcome > 0.5 for traj in b.trajectories])[seq_ids]
    assert bool(won.any()) and bool((~won).any())
    torch.testing.assert_close(t.sd, t.pivots & won)  # every success pivot, nothing else
    assert not bool((t.ul & won).any()) and bool((t.delta[t.ul] < -1.0).all())
    torch.testing.assert_close(t.ul, t.pivots & ~won & (t.delta < -1.0))
    assert int(t.sd.sum()) > 0 and int(t.ul.sum()) > 0
    # failure pivots the teacher does not reject enough are left alone
    assert int((t.pivots & ~won & ~t.ul).sum()) + int(t.ul.sum()) == int((t.pivots & ~won).sum())
    # the aux loss is λ_SD mean KL(sd) + λ_UL (−mean log(1 − p)) (ul), with gradient
    ctx = StepContext(policy=policy, teachers=teachers)
    loss, metrics = variant.aux_loss(b, ctx)
    want = 0.1 * t.divergence[t.sd].mean() - 0.1 * log1mexp(t.student[t.ul]).mean()
    assert float(loss.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    assert metrics["pivot_sd/sd_tokens"] == int(t.sd.sum())
    assert metrics["pivot_sd/ul_tokens"] == int(t.ul.sum())
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())
    policy.zero_grad(set_to_none=True)


def test_pivot_sd_leaves_grpos_advantages_alone(chain_rollouts):
    policy, teacher, batch = chain_rollouts
    advantages = []
    for spec in ("grpo", "grpo+pivot_sd"):
        b = Batch(copy.deepcopy(batch.trajectories))
        ctx = StepContext(policy=policy, teachers=Teachers(teacher))
        plan = compose(spec)
        for hook in ("transform", "score", "advantages", "shape"):
            plan.run(hook, b, ctx)
        advantages.append(b.advantages)
    plain, ours = advantages
    assert plain is not None and ours is not None and plain.keys() == ours.keys()
    assert all(torch.equal(a, ours[key]) for key, a in plain.items())


def test_bad_settings_and_envs_without_a_privileged_text_are_refused():
    from test_credit_sdar import _EmptyHint

    with pytest.raises(BadInput, match="non-empty 'privileged_context'"):
        compose("grpo+pivot_sd").check(_EmptyHint(privileged=True))
    with pytest.raises(BadInput, match=r"pivot_sd needs info keys \['privileged_context'\]"):
        compose("grpo+pivot_sd").check(_EmptyHint())
    for bad in ({"q": 0.0}, {"q": 1.5}, {"k": 0}, {"gain": "mi"}, {"context": "skills"}):
        with pytest.raises(BadInput, match="pivot_sd"):
            compose("grpo+pivot_sd", {"pivot_sd": bad})
    cfg = compose("grpo+pivot_sd", {"pivot_sd": {"tau": 2.0}}).variants[-1].cfg
    assert (cfg.tau, cfg.q, cfg.k, cfg.sd_coef, cfg.ul_coef) == (2.0, 0.1, 16, 0.1, 0.1)


def test_grpo_pivot_sd_trains_a_step_from_the_cli_on_the_tiny_and_a_hf_policy(tmp_path):
    model = write_hf_model(tmp_path / "m", collect_env_text(SMALL, episodes=4))
    for name, policy in (("tiny", ("--preset", "nano")), ("hf", ("--policy", str(model)))):
        out = tmp_path / name
        run = cli(
            "train",
            *("--out", str(out), "--env", SMALL, "--credit", "grpo+pivot_sd"),
            *(*policy, *TINY_RUN),
        )
        assert run.returncode == 0, run.stderr
        (row,) = rl_rows(out)
        assert float(row["pivot_sd/pivots"]) > 0 and float(row["teachers/forwards"]) > 0


def test_the_cli_refuses_a_bad_setting_with_one_line(tmp_path):
    # every registered env now has a privileged text: envs without one are refused by
    # Plan.check (test_..._refused above), the same check the CLI runs before any work
    run = cli(
        "train",
        *("--out", str(tmp_path / "x"), "--credit", "grpo+pivot_sd"),
        *("--credit-settings", '{"pivot_sd": {"q": 0}}'),
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "pivot_sd" in lines[0]
