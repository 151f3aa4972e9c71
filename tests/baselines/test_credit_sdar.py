"""SDAR: the gates and the loss by hand, its gradient by autograd, the gate on real rollouts
with a teacher that knows the best action, unchanged RL advantages, and the CLI."""

from __future__ import annotations

import copy
import math
import re
from types import SimpleNamespace

import gymnasium as gym
import pytest
import torch
from clirun import TINY_RUN, cli, rl_rows
from hf_model import write_hf_model

from agentgym.baselines.batch import Batch, StepContext
from agentgym.baselines.credit import compose
from agentgym.baselines.credit.sdar import (
    SDAR,
    entropy_gate,
    gap_gate,
    sdar_loss,
    soft_or,
    token_entropy,
)
from agentgym.baselines.policies.tokenizer import collect_env_text
from agentgym.baselines.teachers import Teachers
from agentgym.core.errors import BadInput
from agentgym.registry import make

SMALL = "agentgym/Search-Menu-Small-v0"
CHAIN = "agentgym/Credit-Chain-v0"


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_the_gap_gate_and_the_loss_match_hand_computed_values():
    teacher = torch.tensor([-0.5, -3.0, -0.2])
    student = torch.tensor([-1.0, -1.0, -0.7])
    mask = torch.tensor([1.0, 1.0, 0.0])  # the third token is not the policy's
    g = gap_gate(teacher, student, 5.0)
    want = [_sigmoid(5 * 0.5), _sigmoid(5 * -2.0), _sigmoid(5 * 0.5)]
    torch.testing.assert_close(g, torch.tensor(want))
    loss = sdar_loss(teacher, student, g, mask)
    assert float(loss) == pytest.approx((want[0] * 0.5 + want[1] * -2.0) / 2, rel=1e-6)
    # the teacher preferring a token opens the gate, rejecting it shuts it
    assert float(g[0]) > 0.9 and float(g[1]) < 1e-4


def test_the_entropy_and_soft_or_gates_match_hand_computed_values():
    logp = torch.tensor([[0.5, 0.5], [0.9, 0.1], [1.0, 1e-30]]).log()
    H = token_entropy(logp)
    h0, h1 = math.log(2), -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    torch.testing.assert_close(H, torch.tensor([h0, h1, 0.0]), atol=1e-6, rtol=1e-6)
    mask = torch.tensor([1.0, 1.0, 0.0])
    g = entropy_gate(H, mask, 5.0)
    mean = (h0 + h1) / 2  # the masked mean: the third token does not count
    want = [_sigmoid(5 * (h0 - mean)), _sigmoid(5 * (h1 - mean)), _sigmoid(5 * -mean)]
    torch.testing.assert_close(g, torch.tensor(want))
    a, b = torch.tensor([0.2, 0.9]), torch.tensor([0.5, 0.0])
    torch.testing.assert_close(soft_or(a, b), torch.tensor([1 - 0.8 * 0.5, 0.9]))


def test_the_aux_gradient_is_minus_lambda_gate_times_grad_logp_over_n():
    torch.manual_seed(0)
    z = torch.randn(2, 5, requires_grad=True)  # a student's logits at two positions
    y = torch.tensor([3, 1])  # the sampled tokens
    logp = torch.log_softmax(z, -1)[torch.arange(2), y]
    teacher = logp.detach() + torch.tensor([2.0, -2.0])  # endorses y_0, rejects y_1
    g = gap_gate(teacher, logp, 5.0)
    lam = 0.01
    (grad,) = torch.autograd.grad(lam * sdar_loss(teacher, logp, g, torch.ones(2)), z)
    p = torch.softmax(z, -1).detach()
    grad_logp = torch.nn.functional.one_hot(y, 5).float() - p  # ∇_z log softmax(z)_y
    torch.testing.assert_close(grad, -lam * g[:, None] * grad_logp / 2)
    # descent pushes the endorsed token up, the rejected one hardly moves
    assert float(grad[0, 3]) < 0 and grad[1].abs().max() < 1e-6


def _gates(variant, teacher, batch):
    """Per turn key: (gate, student log-prob, allowed-token counts) of its tokens."""
    teachers = Teachers(teacher)
    variant.score(batch, StepContext(teachers=teachers))
    keys = batch.keys()
    terms = variant.tokens(batch, teachers, keys)
    sizes = [len(batch.turn(key).response_ids) for key in keys]
    gates, students = terms.gate.split(sizes), terms.student.detach().split(sizes)
    return teachers, keys, gates, students


def test_the_gate_opens_on_tokens_the_privileged_teacher_endorses(chain_rollouts):
    _, teacher, batch = chain_rollouts
    b = Batch(copy.deepcopy(batch.trajectories))
    teachers, keys, gates, students = _gates(SDAR(), teacher, b)
    endorsed = rejected = forced = 0
    for key, gate, student in zip(keys, gates, students, strict=True):
        turn = b.turn(key)
        best = re.search(r"Best action now: (.+?)\.", turn.extras["privileged_context"])
        assert best is not None
        # the teacher's prompt holds that state's privileged text; the policy's does not
        prompt = teachers.privileged_prompt(b.trajectories[key[0]], key[1], None)
        assert teacher.best_action(prompt) == best.group(1)
        assert teacher.best_action(turn.prompt_ids) is None
        for t, allowed in enumerate(turn.allowed_tokens or []):
            if len(allowed) == 1:  # forced by the menu under both views: Δ = 0
                assert float(gate[t]) == pytest.approx(0.5, abs=1e-3)
                forced += 1
            elif turn.extras["action"] == best.group(1) and float(student[t]) < -1.0:
                assert float(gate[t]) > 0.99
                endorsed += 1
            elif turn.extras["action"] != best.group(1) and float(student[t]) < -0.01:
                assert float(gate[t]) < 0.01
                rejected += 1
    assert endorsed and rejected and forced


def test_the_entropy_gates_open_on_uncertain_tokens(chain_rollouts):
    _, teacher, batch = chain_rollouts
    b = Batch(copy.deepcopy(batch.trajectories))
    _, keys, ent, _ = _gates(SDAR(SDAR.Config(gate="entropy")), teacher, b)
    _, _, gap, _ = _gates(SDAR(), teacher, b)
    _, _, both, _ = _gates(SDAR(SDAR.Config(gate="soft_or")), teacher, b)
    forced, free = [], []
    for key, g in zip(keys, ent, strict=True):
        for t, allowed in enumerate(b.turn(key).allowed_tokens or []):
            (forced if len(allowed) == 1 else free).append(float(g[t]))
    # a forced token has no entropy: below the mean; a menu choice is above it
    assert max(forced) < 0.5 < min(free)
    ent, gap, both = torch.cat(ent), torch.cat(gap), torch.cat(both)
    torch.testing.assert_close(both, 1 - (1 - gap) * (1 - ent))


@pytest.mark.parametrize("base", ["grpo", "gigpo"])
def test_sdar_leaves_the_rl_advantages_alone_and_adds_its_loss(chain_rollouts, base):
    policy, teacher, batch = chain_rollouts
    got = {}
    for spec in (base, f"{base}+sdar"):
        b = Batch(copy.deepcopy(batch.trajectories))
        ctx = StepContext(policy=policy, teachers=Teachers(teacher))
        plan = compose(spec)
        for hook in ("transform", "score", "advantages", "shape"):
            plan.run(hook, b, ctx)
        got[spec] = (b, plan.run("aux_loss", b, ctx), ctx)
    (plain, no_aux, _), (b, aux, ctx) = got[base], got[f"{base}+sdar"]
    assert no_aux == [] and plain.advantages is not None and b.advantages is not None
    assert plain.advantages.keys() == b.advantages.keys()
    for key, adv in plain.advantages.items():
        assert torch.equal(adv, b.advantages[key])
    assert any(bool(a.any()) for a in b.advantages.values())
    # the one aux term is λ · token-mean g (sg[log π_T] − log π_θ)
    ((loss, metrics),) = aux
    terms = SDAR().tokens(b, ctx.need_teachers(), b.keys())
    want = 0.01 * (terms.gate * (terms.teacher - terms.student)).sum() / terms.mask.sum()
    assert float(loss.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    assert metrics["sdar/loss"] == pytest.approx(float(want.detach()), rel=1e-5)
    assert 0.0 < metrics["sdar/gate_mean"] < 1.0
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())
    policy.zero_grad(set_to_none=True)


class _EmptyHint(gym.Env):
    """A privileged env whose privileged text is empty."""

    observation_space = gym.spaces.Text(100)
    action_space = gym.spaces.Text(100)

    def __init__(self, privileged: bool = False):
        self.privileged = privileged

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        # privileged: an empty text; plain (what a probe without privileged=True sees): none
        return "start", {"privileged_context": "  "} if self.privileged else {}

    def step(self, action):
        return "end", 0.0, True, False, {}


def test_the_skills_context_reaches_the_teachers_prompt_and_feeds_ucb(chain_rollouts):
    _, teacher, batch = chain_rollouts
    b = Batch(copy.deepcopy(batch.trajectories))
    env_view = SDAR().tokens(b, Teachers(teacher), b.keys()).teacher
    for how in ("keyword", "ucb", "full"):
        variant = SDAR(SDAR.Config(context="skills", retrieval=how))
        teachers = Teachers(teacher)
        ctx = StepContext(teachers=teachers, envs=SimpleNamespace(env_id=CHAIN))
        variant.score(b, ctx)
        for traj in b.trajectories:
            text = traj.extras["sdar/skills"]
            assert text.startswith("Skills:\n- ") and traj.extras["sdar/skills/names"]
            prompt = teachers.privileged_prompt(traj, 0, lambda t, k: t.extras["sdar/skills"])
            decoded = teacher.tokenizer.decode(prompt.tolist())
            assert decoded.startswith("Skills:") and "Best action now" not in decoded
        terms = variant.tokens(b, teachers, b.keys())
        assert not torch.allclose(terms.teacher, env_view)  # another text, another teacher
        stats = variant._library(ctx).stats()
        # each rollout's skills are credited once, with its outcome
        shown = sum(len(t.extras["sdar/skills/names"]) for t in b.trajectories)
        assert sum(n for n, _ in stats.values()) == shown > 0
        for traj in b.trajectories:  # the next retrieval starts afresh
            traj.extras.pop("sdar/skills"), traj.extras.pop("sdar/skills/names")


def test_settings_and_envs_without_a_privileged_text_are_refused():
    compose("gigpo+sdar").check(make(SMALL, privileged=True))
    with pytest.raises(BadInput, match="non-empty 'privileged_context'"):
        compose("grpo+sdar").check(_EmptyHint(privileged=True))
    with pytest.raises(BadInput, match=r"needs info keys \['privileged_context'\]"):
        compose("grpo+sdar").check(_EmptyHint())
    with pytest.raises(BadInput, match="skill library"):
        compose("grpo+sdar", {"sdar": {"context": "skills"}}).check(_EmptyHint(privileged=True))
    compose("gigpo+sdar", {"sdar": {"context": "skills"}}).check(make(SMALL, privileged=True))
    bads = ({"gate": "max"}, {"context": "docs"}, {"retrieval": "bm25"}, {"coef": -1.0})
    for bad in (*bads, {"entropy_k": 0}):
        with pytest.raises(BadInput, match="sdar"):
            compose("grpo+sdar", {"sdar": bad})
    assert compose("grpo+sdar", {"sdar": {"gate": "soft_or"}}).variants[-1].cfg.gate == "soft_or"


def test_gigpo_sdar_trains_a_step_from_the_cli_on_the_tiny_and_a_hf_policy(tmp_path):
    model = write_hf_model(tmp_path / "m", collect_env_text(SMALL, episodes=4))
    settings = '{"sdar": {"gate": "soft_or"}}'
    for name, policy in (("tiny", ("--preset", "nano")), ("hf", ("--policy", str(model)))):
        out = tmp_path / name
        run = cli(
            "train",
            *("--out", str(out), "--env", SMALL, "--credit", "gigpo+sdar"),
            *("--credit-settings", settings, *policy, *TINY_RUN),
        )
        assert run.returncode == 0, run.stderr
        (row,) = rl_rows(out)
        assert 0.0 < float(row["sdar/gate_mean"]) < 1.0 and float(row["teachers/forwards"]) > 0


def test_the_cli_refuses_a_bad_setting_with_one_line(tmp_path):
    # every registered env now has a privileged text: envs without one are refused by
    # Plan.check (test_..._refused above), the same check the CLI runs before any work
    run = cli(
        "train",
        *("--out", str(tmp_path / "x"), "--credit", "grpo+sdar"),
        *("--credit-settings", '{"sdar": {"gate": "max"}}'),
    )
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "sdar" in lines[0]
