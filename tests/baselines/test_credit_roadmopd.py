"""ROADMOPD: the routed signal, the critics' weights, L_D, the projection, routing on real
rollouts, and the trainer's start-up checks."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from clirun import cli, rl_rows
from hf_model import write_hf_model

from agentgym.baselines.batch import Batch, StepContext
from agentgym.baselines.credit import compose
from agentgym.baselines.credit.roadmopd import (
    AGREE,
    ROADMOPD,
    ROUTE,
    WEIGHT,
    agreement,
    distill_loss,
    project,
    token_weights,
)
from agentgym.baselines.policies.agent import save_policy_checkpoint
from agentgym.baselines.policies.tiny import TinyPolicy
from agentgym.baselines.policies.tokenizer import collect_env_text, train_tokenizer
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.scoring import turn_logprobs
from agentgym.baselines.teachers import Teachers
from agentgym.baselines.train import load_policy
from agentgym.core.errors import BadInput

MIXED = "agentgym/Tools-Mixed-v1"
SMALL = "agentgym/Search-Menu-Small-v0"


# ---------------------------------------------------------------------- the formulas
def test_agreement_and_weights_by_hand():
    routed = torch.tensor([5, 6, 7, 8])
    others = [torch.tensor([5, 6, 0, 0]), torch.tensor([5, 0, 7, 0])]
    a = agreement(routed, others)
    assert a.tolist() == [1.0, 0.5, 0.5, 0.0]
    # mean over the masked tokens: (1 + .5 + .5 + 0) / 4 = 0.5, so w = a / 0.5, clipped at 2
    w = token_weights(a, torch.ones(4), w_max=2.0)
    assert w.tolist() == [2.0, 1.0, 1.0, 0.0]
    assert token_weights(a, torch.ones(4), w_max=1.5).tolist() == [1.5, 1.0, 1.0, 0.0]
    # an unmasked token does not enter the mean: (1 + .5) / 2 = .75
    w = token_weights(a, torch.tensor([1.0, 1.0, 0.0, 0.0]), w_max=2.0)
    torch.testing.assert_close(w, torch.tensor([4 / 3, 2 / 3, 2 / 3, 0.0]))
    # no agreement anywhere, or a single teacher: weight 1
    assert token_weights(torch.zeros(3), torch.ones(3), 2.0).tolist() == [1.0, 1.0, 1.0]
    assert agreement(routed, []).tolist() == [1.0] * 4


def test_sampled_signal_and_distillation_loss_by_hand():
    student = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    teacher = torch.tensor([-1.5, -1.0, -0.5])
    d = student - teacher  # d_t = log π_θ − log p_r
    assert d.tolist() == [0.5, -1.0, 0.0]
    w, mask = torch.tensor([2.0, 1.0, 0.5]), torch.tensor([1.0, 1.0, 0.0])
    loss = distill_loss(d, w, mask, lam=0.1, student_logp=student)
    # λ (2·0.5 + 1·(−1)) / 2 masked tokens = 0
    assert float(loss.detach()) == pytest.approx(0.0)
    loss.backward()
    # the score-function gradient: λ w_t sg(d_t) m_t / Σm, not λ w_t m_t / Σm
    torch.testing.assert_close(student.grad, torch.tensor([0.05, -0.05, 0.0]))
    # without the student's log-probs (the top-k signal) d is differentiated as it is
    x = torch.tensor([0.3, 0.6], requires_grad=True)
    plain = distill_loss(x, torch.ones(2), torch.ones(2), lam=0.5)
    assert float(plain.detach()) == pytest.approx(0.5 * 0.45)
    plain.backward()
    torch.testing.assert_close(x.grad, torch.tensor([0.25, 0.25]))


def test_projection_on_toy_gradients():
    g_c = [torch.tensor([1.0, 0.0])]
    g_d = [torch.tensor([-1.0, 1.0])]
    dot = -1.0
    # η = 1: the result is orthogonal to g_C, and its dot with g_C rose
    (out,), stats = project(g_d, g_c, 1.0)
    torch.testing.assert_close(out, torch.tensor([0.0, 1.0]))
    assert float(out @ g_c[0]) == 0.0 >= dot and stats["conflict"] == 1.0
    # adaptive: η = clip(−cos, 0, 1) = 1/√2
    (out,), stats = project(g_d, g_c, "adaptive")
    eta = 1 / math.sqrt(2)
    assert stats["eta"] == pytest.approx(eta) and stats["cos"] == pytest.approx(-eta)
    torch.testing.assert_close(out, torch.tensor([-1.0 + eta, 1.0]))
    assert dot <= float(out @ g_c[0]) <= 0.0
    # no conflict: unchanged
    (out,), stats = project([torch.tensor([1.0, 1.0])], g_c, "adaptive")
    assert out.tolist() == [1.0, 1.0] and stats == {
        "conflict": 0.0,
        "cos": stats["cos"],
        "eta": 0.0,
    }
    # g_C = 0 (no advantage): nothing to project against
    (out,), stats = project(g_d, [torch.zeros(2)], 1.0)
    assert out.tolist() == [-1.0, 1.0] and stats["conflict"] == 0.0


def test_settings_and_routes_are_checked():
    v = ROADMOPD({"roadmopd": {"routes": {"travel": "ecommerce"}}})
    assert v.route("travel") == "ecommerce" and v.route("accounts") == "accounts"
    assert v.teacher_problems(["ecommerce"], []) == []
    assert "absent from --teachers" in v.teacher_problems(["accounts"], [])[0]
    assert "'accounts'" in ROADMOPD().teacher_problems(["travel"], ["accounts", "travel"])[0]
    for bad in ({"signal": "full"}, {"eta": 2.0}, {"eta": "sometimes"}, {"routes": ["a"]}):
        with pytest.raises(BadInput):
            ROADMOPD({"roadmopd": bad})
    plan = compose("grpo+roadmopd", {"roadmopd": {"routes": {"x": "nobody"}}})
    with pytest.raises(BadInput, match="'nobody'"):
        plan.check_teachers(["a"])
    with pytest.raises(BadInput, match="--teachers"):
        plan.check_teachers([])


# ---------------------------------------------------------------------- real rollouts
@pytest.fixture(scope="module")
def tools_policy() -> TinyPolicy:
    torch.manual_seed(0)
    tokenizer = train_tokenizer(collect_env_text(MIXED, episodes=4), vocab_size=600)
    return TinyPolicy.from_preset("nano", tokenizer, max_len=512)


def _perturbed(policy, scale, seed):
    other = copy.deepcopy(policy)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return other


def test_rollouts_are_routed_by_domain_and_weighted_by_agreement(tools_policy, tmp_path):
    teacher_dirs = {
        "ecommerce": save_policy_checkpoint(tools_policy, tmp_path / "e"),
        "accounts": save_policy_checkpoint(_perturbed(tools_policy, 0.02, 1), tmp_path / "a"),
        "travel": save_policy_checkpoint(_perturbed(tools_policy, 0.05, 2), tmp_path / "t"),
    }
    named = {name: load_policy(Path(d)) for name, d in teacher_dirs.items()}
    pool = EnvPool(MIXED, 4, split="train", max_turns=2)
    torch.manual_seed(0)
    tasks = [("ecommerce-single-0000", 0), ("accounts-single-0000", 1)]
    batch = Batch(collect(tools_policy, pool, tasks, 2, RolloutConfig(max_new_tokens=12)))
    ctx = StepContext(
        config=None, policy=tools_policy, teachers=Teachers(tools_policy, None, named)
    )
    variant = ROADMOPD()
    variant.score(batch, ctx)
    domains = set()
    keys = batch.keys()
    for key in keys:
        turn = batch.turn(key)
        domains.add(turn.info["domain"])
        # the routed teacher is the one named by the turn's domain, and its scores are its own
        assert turn.extras[ROUTE] == turn.info["domain"]
        scored = turn.extras[f"topk/teacher:{turn.extras[ROUTE]}/1"].sampled
        own = turn_logprobs(named[turn.extras[ROUTE]], batch, [key], grad=False)[0]
        torch.testing.assert_close(scored, own, atol=1e-5, rtol=1e-5)
    assert domains == {"ecommerce", "accounts"}
    # tokens where the other teachers agree with the routed one weigh more than where not
    a = torch.cat([batch.turn(k).extras[AGREE] for k in keys])
    w = torch.cat([batch.turn(k).extras[WEIGHT] for k in keys])
    assert (a == 1).any() and (a < 1).any()
    for traj in batch.trajectories:
        ta = torch.cat([t.extras[AGREE] for t in traj.turns])
        tw = torch.cat([t.extras[WEIGHT] for t in traj.turns])
        if ta.sum() > 0:  # w_t = a_t / mean over the rollout, clipped to [0, 2]
            torch.testing.assert_close(tw, (ta / ta.mean()).clamp(0.0, 2.0))
        for hi, lo in [(1.0, 0.5), (0.5, 0.0), (1.0, 0.0)]:
            if (ta == hi).any() and (ta == lo).any():
                assert tw[ta == hi].min() >= tw[ta == lo].max()
    assert w[a == 1].min() > w[a == 0].max() == 0.0
    # the loss: gradient applied through the trainer's backward, metrics reported
    for p in tools_policy.parameters():
        p.grad = torch.randn_like(p)  # stands for the RL gradient g_C
    loss, metrics = variant.aux_loss(batch, ctx)
    assert {"roadmopd/conflict", "roadmopd/cos", "roadmopd/eta", "roadmopd/loss"} <= set(metrics)
    assert float(loss.detach()) == pytest.approx(metrics["roadmopd/loss"])
    assert metrics["roadmopd/routed/ecommerce"] + metrics["roadmopd/routed/accounts"] == 1.0
    for p in tools_policy.parameters():
        p.grad = None


# ---------------------------------------------------------------------- the CLI
def _cli(*args):
    return cli("train", *args, timeout=900)


TINY_RUN = (
    *("--steps", "1", "--tasks-per-step", "2", "--group-size", "2", "--eval-every", "0"),
    *("--no-tensorboard", "--max-new-tokens", "12", "--env-kwargs", '{"max_turns": 2}'),
    *("--credit", "grpo+roadmopd"),
)


def _teachers(policy, tmp_path) -> str:
    a = save_policy_checkpoint(policy, tmp_path / "ta")
    b = save_policy_checkpoint(_perturbed(policy, 0.1, 3), tmp_path / "tb")
    return f"ecommerce={a},accounts={b},travel={a}"


def test_cli_trains_a_student_from_teachers_sharing_its_warm_start(tmp_path):
    warm = tmp_path / "warm"
    made = _cli(
        *("--env", MIXED, "--out", str(warm), "--preset", "nano", "--max-len", "512"),
        *("--sft-steps", "2", "--sft-episodes", "2", "--steps", "0", "--no-tensorboard"),
        *("--eval-every", "0"),
    )
    assert made.returncode == 0, made.stderr
    teachers = _teachers(load_policy(warm / "sft"), tmp_path)
    out = _cli(
        *("--env", MIXED, "--init", str(warm / "sft"), "--sft-steps", "0"),
        *("--out", str(tmp_path / "student"), "--teachers", teachers, *TINY_RUN),
    )
    assert out.returncode == 0, out.stderr
    (row,) = rl_rows(tmp_path / "student")
    assert float(row["teachers/forwards"]) > 0 and row["roadmopd/loss"] != ""
    assert 0.0 <= float(row["roadmopd/eta"]) <= 1.0


def test_cli_trains_a_hugging_face_student(tmp_path):
    from agentgym.baselines.policies.hf import HFPolicy

    model = write_hf_model(tmp_path / "m", collect_env_text(MIXED, episodes=2))
    teachers = _teachers(HFPolicy.from_pretrained(model), tmp_path)
    out = _cli(
        *("--env", "agentgym/Tools-Ecommerce-v1", "--policy", str(model), "--sft-steps", "0"),
        *("--out", str(tmp_path / "student"), "--teachers", teachers, *TINY_RUN),
    )
    assert out.returncode == 0, out.stderr
    assert float(rl_rows(tmp_path / "student")[0]["roadmopd/routed/ecommerce"]) == 1.0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--env", SMALL, "--teachers", "a=/nonexistent"), "domain 'encyclopedia'"),
        (("--env", MIXED), "--teachers NAME=DIR"),
        (
            ("--env", MIXED, "--teachers", "ecommerce=/x,accounts=/y"),
            "no teacher for the env's domain 'travel'",
        ),
    ],
)
def test_cli_refuses_runs_it_cannot_route(tmp_path, args, words):
    out = _cli("--out", str(tmp_path / "x"), "--credit", "grpo+roadmopd", *args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], out.stderr


@pytest.mark.parametrize("signal", ["sampled", "topk"])
def test_a_teacher_equal_to_the_student_gives_no_signal(tools_policy, signal):
    named = {"ecommerce": copy.deepcopy(tools_policy), "accounts": tools_policy}
    pool = EnvPool(MIXED, 2, split="train", max_turns=2)
    torch.manual_seed(1)
    tasks = [("ecommerce-multiple-0001", 0)]
    batch = Batch(collect(tools_policy, pool, tasks, 2, RolloutConfig(max_new_tokens=8)))
    ctx = StepContext(policy=tools_policy, teachers=Teachers(tools_policy, None, named))
    variant = ROADMOPD({"roadmopd": {"signal": signal, "k": 4}})
    variant.score(batch, ctx)
    keys = batch.keys()
    d, _ = variant.signal(batch, keys, ctx)
    torch.testing.assert_close(d.detach(), torch.zeros_like(d), atol=1e-5, rtol=0)
    # the critic is the routed teacher's twin: it agrees everywhere, so every weight is 1
    assert all(batch.turn(k).extras[WEIGHT].eq(1).all() for k in keys)
    perturbed = {"ecommerce": _perturbed(tools_policy, 0.05, 4), "accounts": tools_policy}
    again = Batch(copy.deepcopy(batch.trajectories))
    for key in keys:
        again.turn(key).extras.clear()
    ctx = StepContext(policy=tools_policy, teachers=Teachers(tools_policy, None, perturbed))
    variant.score(again, ctx)
    d, _ = variant.signal(again, keys, ctx)
    assert d.abs().max() > 1e-3
    if signal == "topk":
        assert (d.detach() >= -1e-6).all()  # a KL
