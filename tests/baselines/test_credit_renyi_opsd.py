"""Rényi OPSD: the target, the divergence, the stop-gradient, real rollouts and the CLI."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows, script
from hf_model import write_hf_model

from agentgym.baselines.batch import Batch, StepContext
from agentgym.baselines.credit import compose
from agentgym.baselines.credit.renyi_opsd import RenyiOPSD, opsd_divergence
from agentgym.baselines.divergence import renyi
from agentgym.baselines.policies.tokenizer import collect_env_text
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.teachers import Teachers
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"
T = torch.tensor([[0.5, 0.3, 0.2]]).log()
R = torch.tensor([[0.2, 0.5, 0.3]]).log()
S = torch.tensor([[0.4, 0.4, 0.2]]).log()


def test_the_divergence_matches_hand_computed_values_on_three_outcomes():
    # alpha = 1: D_0.5(T ‖ S) = -2 log Σ sqrt(T S)
    bc = math.sqrt(0.5 * 0.4) + math.sqrt(0.3 * 0.4) + math.sqrt(0.2 * 0.2)
    got = opsd_divergence(T, R, S, alpha=1.0, rho=0.5)
    assert float(got[0]) == pytest.approx(-2 * math.log(bc), abs=1e-6)
    # alpha = 0.5: q ∝ sqrt(T R); rho = 2: D_2(q ‖ S) = log Σ q² / S
    raw = [math.sqrt(0.5 * 0.2), math.sqrt(0.3 * 0.5), math.sqrt(0.2 * 0.3)]
    q = [x / sum(raw) for x in raw]
    want = math.log(sum(qi * qi / si for qi, si in zip(q, [0.4, 0.4, 0.2], strict=True)))
    assert float(opsd_divergence(T, R, S, alpha=0.5, rho=2.0)[0]) == pytest.approx(want, abs=1e-6)
    # a target equal to the student: 0
    assert float(opsd_divergence(S, S, S, alpha=0.3, rho=0.5)[0]) == pytest.approx(0.0, abs=1e-6)


def test_rho_near_one_is_the_kl_computed_by_hand():
    raw = [math.sqrt(0.5 * 0.2), math.sqrt(0.3 * 0.5), math.sqrt(0.2 * 0.3)]
    q = [x / sum(raw) for x in raw]
    direct = sum(qi * math.log(qi / si) for qi, si in zip(q, [0.4, 0.4, 0.2], strict=True))
    for rho in (1.0 + 1e-3, 1.0 - 1e-3, 1.0):
        assert abs(float(opsd_divergence(T, R, S, alpha=0.5, rho=rho)[0]) - direct) < 1e-3


def test_alpha_one_is_the_teacher_alone_and_alpha_zero_the_reference_alone():
    torch.manual_seed(0)
    t, r, s = (torch.log_softmax(torch.randn(5, 4), -1) for _ in range(3))
    for rho in (0.5, 2.0):
        torch.testing.assert_close(opsd_divergence(t, r, s, 1.0, rho), renyi(t, s, rho))
        torch.testing.assert_close(opsd_divergence(t, r, s, 0.0, rho), renyi(r, s, rho))


def test_gradient_flows_only_into_the_student_side():
    t, r, s = (x.clone().requires_grad_(True) for x in (T, R, S))
    opsd_divergence(t, r, s, 0.5, 0.5).sum().backward()
    assert t.grad is None and r.grad is None
    assert s.grad is not None and float(s.grad.abs().sum()) > 0


def test_settings_are_checked():
    for bad in ({"alpha": 1.5}, {"rho": 0.0}, {"k": 0}, {"mode": "swap"}, {"context": "x"}):
        with pytest.raises(BadInput):
            RenyiOPSD({"renyi_opsd": bad})
    assert RenyiOPSD().needs_reference


@pytest.fixture(scope="module")
def rollouts(policy):
    pool = EnvPool(SMALL, 4, split="train", privileged=True)
    torch.manual_seed(0)
    return collect(
        policy, pool, [("q00000", 3), ("q00001", 4)], 2, RolloutConfig(max_new_tokens=24)
    )


def _loss(policy, ref, rollouts, **settings):
    batch = Batch(copy.deepcopy(rollouts))
    variant = RenyiOPSD({"renyi_opsd": settings})
    ctx = StepContext(policy=policy, ref=ref, teachers=Teachers(policy, ref))
    out = variant.aux_loss(batch, ctx)
    assert out is not None
    return out


def test_on_real_rollouts_the_loss_vanishes_when_teacher_reference_and_student_coincide(
    policy, rollouts
):
    ref = copy.deepcopy(policy)  # the frozen warm start, before any update
    for alpha in (0.0, 0.5, 1.0):
        loss, metrics = _loss(policy, ref, rollouts, alpha=alpha, context="none")
        # float32 rounding of the tail buckets only
        assert abs(float(loss.detach())) < 1e-6 and metrics["renyi_opsd/tokens"] > 0
    # the privileged context moves the teacher away from the student: positive (an untrained
    # policy is near uniform, so the divergence is small, but far above the rounding)
    loss, metrics = _loss(policy, ref, rollouts, alpha=1.0)
    assert float(loss.detach()) > 1e-5
    for p in policy.parameters():
        p.grad = None
    loss.backward()
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in policy.parameters())
    for p in policy.parameters():
        p.grad = None
    # a reference that differs from the student: positive even without a privileged context
    other = copy.deepcopy(policy)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.randn_like(p))
    loss, _ = _loss(policy, other, rollouts, alpha=0.0, context="none")
    assert float(loss.detach()) > 1e-5


def test_replace_mode_zeroes_the_advantages_and_add_mode_keeps_them(rollouts):
    for mode, zero in (("replace", True), ("add", False)):
        plan = compose("grpo+renyi_opsd", {"renyi_opsd": {"mode": mode}})
        batch = Batch(copy.deepcopy(rollouts))
        batch.trajectories[0].outcome = 1.0
        for hook in ("advantages", "shape"):
            plan.run(hook, batch, StepContext())
        assert batch.advantages
        nonzero = any(bool(a.abs().sum() > 0) for a in batch.advantages.values())
        assert nonzero is not zero


# ---------------------------------------------------------------------------------- CLI
TINY = (*TINY_RUN, "--max-new-tokens", "16")


def test_the_cli_trains_a_step_with_the_tiny_policy(tmp_path):
    ckpt = tmp_path / "ckpt"
    out = cli("train", "--credit", "grpo+renyi_opsd", "--preset", "nano", "--out", str(ckpt), *TINY)
    assert out.returncode == 0, out.stderr
    (row,) = rl_rows(ckpt)
    assert float(row["renyi_opsd/divergence"]) > 0 and float(row["teachers/forwards"]) > 0


def test_the_cli_trains_a_step_with_a_hugging_face_model(tmp_path):
    model = write_hf_model(tmp_path / "model", collect_env_text(SMALL, episodes=4))
    ckpt = tmp_path / "ckpt"
    out = cli(
        "train", "--credit", "grpo+renyi_opsd", "--policy", str(model), "--out", str(ckpt), *TINY
    )
    assert out.returncode == 0, out.stderr
    (row,) = rl_rows(ckpt)
    # a random tiny model barely tells the views apart: a divergence near 0, up to rounding
    assert abs(float(row["renyi_opsd/divergence"])) < 1.0 and float(row["teachers/forwards"]) > 0


# An env like Credit-KeyDoor whose privileged info holds no privileged text.
NO_CONTEXT = """
import sys
from agentgym.envs.credit.key_door import KeyDoorEnv
from agentgym.registry import register
class Plain(KeyDoorEnv):
    def _privileged_info(self):
        return {}
register("agentgym/Credit-Plain-v0", "__main__:Plain", family="credit", description="plain")
from agentgym.cli import main
main(sys.argv[1:])
"""


def test_the_cli_refuses_an_env_without_privileged_context(tmp_path):
    out = script(
        NO_CONTEXT, "train", "--credit", "grpo+renyi_opsd", "--env", "agentgym/Credit-Plain-v0",
        "--out", str(tmp_path / "x"), *TINY,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "renyi_opsd needs info keys ['privileged_context']" in out.stderr
