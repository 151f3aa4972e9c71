"""ISA-Distill: the loss, the calibration, value masking, real rollouts and the CLI."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows
from hf_model import write_hf_model

from agentgym.baselines.batch import Batch, StepContext, Trajectory, Turn
from agentgym.baselines.credit import compose
from agentgym.baselines.credit._recoverability import fit_logistic, value_mask
from agentgym.baselines.credit.isa import ISA, isa_loss
from agentgym.baselines.policies.tokenizer import collect_env_text
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.teachers import Teachers
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"


def _log(rows):
    return torch.tensor(rows).log()


def test_the_loss_matches_a_hand_computed_value():
    fact = _log([[0.5, 0.3, 0.2], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    evid = _log([[0.2, 0.5, 0.3], [0.3, 0.3, 0.4], [0.3, 0.3, 0.4]])
    s_fact = _log([[0.4, 0.4, 0.2], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6]])
    s_evid = _log([[0.3, 0.4, 0.3], [0.2, 0.4, 0.4], [0.3, 0.3, 0.4]])
    k = torch.tensor([0.25, 0.8, 0.5])
    key = torch.tensor([1.0, 1.0, 0.0])  # the third token is off the key spans

    def kl(p, q):
        return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))

    t0 = 0.25 * kl([0.5, 0.3, 0.2], [0.4, 0.4, 0.2]) + 0.75 * kl([0.2, 0.5, 0.3], [0.3, 0.4, 0.3])
    t1 = 0.8 * kl([0.6, 0.2, 0.2], [0.5, 0.25, 0.25]) + 0.2 * kl([0.3, 0.3, 0.4], [0.2, 0.4, 0.4])
    got = isa_loss(fact, evid, s_fact, s_evid, k, key, coef=0.1)
    assert float(got) == pytest.approx(0.1 * (t0 + t1) / 2, abs=1e-6)
    # no key token: 0; the teachers get no gradient
    assert float(isa_loss(fact, evid, s_fact, s_evid, k, key * 0, 0.1)) == 0.0
    f, s = fact.clone().requires_grad_(True), s_fact.clone().requires_grad_(True)
    isa_loss(f, evid, s, s_evid, k, key, 0.1).backward()
    assert f.grad is None and s.grad is not None and float(s.grad[2].abs().sum()) == 0


def test_the_logistic_calibration_recovers_known_parameters():
    a, b = 3.0, 1.5
    nll = np.linspace(0.0, 5.0, 21)
    rate = 1 / (1 + np.exp(-(a - b * nll)))
    got = fit_logistic(nll, rate, [32.0] * 21, start=(0.0, 0.0), ridge=1e-8, steps=50)
    assert got == pytest.approx((a, b), abs=1e-4)
    # from sampled successes: close, and the same twice (deterministic)
    rng = np.random.default_rng(0)
    sampled = rng.binomial(400, rate) / 400
    fit = fit_logistic(nll, sampled, [400.0] * 21, start=(0.0, 0.0), ridge=1e-6, steps=50)
    assert fit == pytest.approx((a, b), abs=0.3)
    assert fit == fit_logistic(nll, sampled, [400.0] * 21, start=(0, 0), ridge=1e-6, steps=50)
    # every probe failed: the ridge keeps the fit finite, and k falls
    zero = fit_logistic(nll, [0.0] * 21, [8.0] * 21, start=(2.0, 1.0), ridge=1.0, steps=25)
    assert all(math.isfinite(x) for x in zero) and zero[0] < 2.0


def test_value_masking_removes_the_answer_but_keeps_the_question():
    text = "Question: Orarshire or Mareminster?\nNotes:\n- MAREMINSTER #2: Mareminster has 868,000."
    out = value_mask(text, "Mareminster", "[masked]", "Question:")
    assert out.split("\n")[0] == "Question: Orarshire or Mareminster?"
    assert "mareminster" not in "\n".join(out.split("\n")[1:]).lower()
    assert out.count("[masked]") == 2
    assert "Mareminster" not in value_mask(text, "Mareminster", "_", "")


def test_settings_and_refusals():
    with pytest.raises(BadInput):
        ISA({"isa": {"samples": 0}})
    plan = compose("grpo+isa")
    assert plan.needs_reference and plan.needs_privileged
    for env_id, words in (
        ("agentgym/Credit-KeyDoor-v0", "isa needs info keys ['gold_answer']"),
        ("agentgym/Tools-Ecommerce-v0", "isa needs the env ability 'search'"),
    ):
        with pytest.raises(BadInput, match=words.replace("[", r"\[").replace("]", r"\]")):
            plan.check(gym.make(env_id, privileged=True))
    plan.check(gym.make(SMALL, privileged=True))


@pytest.fixture(scope="module")
def rollouts(policy):
    pool = EnvPool(SMALL, 4, split="train", privileged=True)
    torch.manual_seed(0)
    cfg = RolloutConfig(max_new_tokens=24)
    return collect(policy, pool, [("q00000", 3), ("q00001", 4)], 2, cfg)


def test_on_real_rollouts_only_key_span_tokens_get_loss(policy, rollouts):
    batch = Batch(copy.deepcopy(rollouts))
    ref = copy.deepcopy(policy)
    teachers = Teachers(policy, ref)
    ctx = StepContext(policy=policy, ref=ref, teachers=teachers, step=1)
    variant = ISA({"isa": {"samples": 2, "calibrate_probes": 4}})
    variant.transform(batch, ctx)
    with torch.no_grad():
        variant.score(batch, ctx)
    all_keys = batch.keys()
    ks = [batch.turn(key).extras["isa/k"] for key in all_keys]
    assert ks and all(0.0 <= k <= 1.0 for k in ks)
    assert variant.last_fit == 1 and "isa/calibration_success" in batch.metrics
    captured = []
    student = teachers.student

    def keep(*args, **kwargs):
        out = student(*args, **kwargs)
        for d in out:
            d.logp.retain_grad()
        captured.extend(out)
        return out

    teachers.student = keep  # type: ignore[method-assign]
    loss, metrics = variant.aux_loss(batch, ctx)
    loss.backward()
    keys = [k for k in all_keys if variant.key_mask(k, batch).sum() > 0]
    assert len(captured) == len(keys) and 0 < metrics["isa/key_token_share"] < 1
    for key, s in zip(keys, captured, strict=True):
        tags = batch.turn(key).segment_tags
        graded = s.logp.grad.abs().sum(-1) > 0
        want = torch.tensor([t in ("search_query", "answer", "conclusion") for t in tags])
        assert torch.equal(graded, want & (batch.turn(key).mask() > 0))
    for p in policy.parameters():
        p.grad = None
    # the two views: the gold facts, and the hint of the state each turn acted from (the
    # previous step's; before the first step, built here like the env's reset hint)
    traj = batch.trajectories[0]
    for fact in traj.turns[0].info["gold_facts"]:
        assert f"- {fact}" in variant.fact_context(traj, 0)
    for k in range(1, len(traj.turns)):
        assert variant.evidence_context(traj, k) == traj.turns[k - 1].info["evidence_hint"]
    env = gym.make(SMALL, privileged=True)
    _, reset_info = env.reset(seed=traj.seed, options={"task_id": traj.task_id})
    assert variant.evidence_context(traj, 0) == reset_info["evidence_hint"]
    assert metrics["isa/hint_fallback"] == sum(k == 0 for _, k in keys)
    assert metrics["isa/fact_fallback"] == 0


class Reader:
    """A constructed π₀: the gold answer is likely once the probe shows the (masked) gold
    evidence, unlikely before; it reads the probe's text, as a real model would."""

    def __init__(self, policy, evidence):
        self.policy, self.tokenizer, self.evidence = policy, policy.tokenizer, evidence

    def encode_prompt(self, text):
        return self.policy.encode_prompt(text)

    def logprobs(self, prompts, responses, **_):
        out = []
        for p, r in zip(prompts, responses, strict=True):
            text = self.tokenizer.decode(p.tolist())
            shown = sum(e in text for e in self.evidence) / len(self.evidence)
            out.append(torch.full((len(r),), -4.0 + 3.9 * shown))
        return out


def test_recoverability_rises_once_the_answer_bearing_evidence_is_read(policy):
    """The mechanism on a constructed case: an oracle rollout and a π₀ that reads."""
    env = gym.make(SMALL, privileged=True)
    obs, info = env.reset(seed=0)
    gold = info["gold_answer"]
    # the evidence as the probe shows it: in the notes, the answer masked
    sentences = [f.split(": ", 1)[1].rstrip(".") for f in info["gold_facts"]]
    evidence = [value_mask(s, gold, "[masked]") for s in sentences]
    traj, done = Trajectory("t", "g"), False
    progress = []
    while not done:
        action = env.unwrapped.oracle_action()
        ids = torch.tensor([*policy.tokenizer.encode(action), policy.tokenizer.eos_id])
        turn = Turn(torch.arange(2), ids, extras={"observation": obs})
        obs, _, done, _, step_info = env.step(action)
        turn.info = step_info
        progress.append(info.get("progress", 0.0))  # of the state the turn acted from
        info = step_info
        traj.turns.append(turn)
    batch = Batch([traj])
    variant = ISA({"isa": {"calibrate_every": 0}})
    variant.score(batch, StepContext(ref=Reader(policy, evidence), step=1))
    ks = [t.extras["isa/k"] for t in traj.turns]
    before = [k for k, p in zip(ks, progress, strict=True) if p < 1.0]
    after = [k for k, p in zip(ks, progress, strict=True) if p == 1.0]
    assert before and after and max(before) < min(after)
    assert all(0 <= k <= 1 for k in ks)


# ---------------------------------------------------------------------------------- CLI
TINY = (*TINY_RUN, "--max-new-tokens", "16")
FEW = ("--credit-settings", '{"isa": {"samples": 2, "calibrate_probes": 4}}')


@pytest.mark.parametrize("env_id", [SMALL, "agentgym/Search-Free-Small-v0"])
def test_the_cli_trains_a_step_with_the_tiny_policy(tmp_path, env_id):
    ckpt = tmp_path / "ckpt"
    out = cli(
        "train", "--credit", "grpo+isa", "--env", env_id, "--preset", "nano",
        "--out", str(ckpt), *TINY, *FEW,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (row,) = rl_rows(ckpt)
    assert 0.0 <= float(row["isa/k_mean"]) <= 1.0 and "isa/calibration_success" in row


def test_the_cli_trains_a_step_with_a_hugging_face_model(tmp_path):
    model = write_hf_model(tmp_path / "model", collect_env_text(SMALL, episodes=4))
    ckpt = tmp_path / "ckpt"
    out = cli(
        "train", "--credit", "grpo+isa", "--policy", str(model), "--out", str(ckpt), *TINY, *FEW
    )
    assert out.returncode == 0, out.stderr
    assert 0.0 <= float(rl_rows(ckpt)[0]["isa/k_mean"]) <= 1.0


@pytest.mark.parametrize("env_id", ["agentgym/Credit-KeyDoor-v0", "agentgym/Tools-Ecommerce-v0"])
def test_the_cli_refuses_a_non_search_env(tmp_path, env_id):
    out = cli("train", "--credit", "grpo+isa", "--env", env_id, "--out", str(tmp_path / "x"), *TINY)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "isa needs" in out.stderr
