"""The teachers: privileged prompts, the three views, top-k with a tail, the divergences."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from hf_model import write_hf_model

from agentgym.baselines.batch import Batch
from agentgym.baselines.divergence import geometric, kl, renyi
from agentgym.baselines.policies.constrained import masked_logprobs
from agentgym.baselines.policies.tokenizer import collect_env_text
from agentgym.baselines.prompt import History, PromptFormat, prompt_ids
from agentgym.baselines.rollout import EnvPool, RolloutConfig, collect
from agentgym.baselines.scoring import turn_logprobs
from agentgym.baselines.teachers import Teachers, TokenDist, check_tokenizer, parse_teachers
from agentgym.core.errors import BadInput

SMALL = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module")
def batch(policy) -> Batch:
    """Two groups of two rollouts on a privileged env, constrained decoding, temperature 1.3."""
    pool = EnvPool(SMALL, 4, split="train", privileged=True)
    cfg = RolloutConfig(max_new_tokens=24, temperature=1.3)
    torch.manual_seed(0)
    return Batch(collect(policy, pool, [("q00000", 3), ("q00001", 4)], 2, cfg))


def test_a_privileged_history_opens_each_prompt_with_that_turns_context(policy):
    fmt = PromptFormat(history=1, privileged=True)
    h = History(policy, fmt)
    h.observe("first", {"privileged_context": "HINT-A"})
    start = policy.tokenizer.decode(h.prompt())
    h.act(policy.tokenizer.encode("go"))
    h.observe("second", {"privileged_context": "HINT-B"})
    h.act(policy.tokenizer.encode("go"))
    h.observe("third", {})  # no context of its own: the latest one given holds
    late = policy.tokenizer.decode(h.prompt())
    assert start.startswith("HINT-A") and "first" in start
    # the window has left the first observation; the context still opens the prompt
    assert late.startswith("HINT-B") and "first" not in late and "third" in late
    plain = History(policy, dataclasses.replace(fmt, privileged=False))
    plain.observe("first", {"privileged_context": "HINT-A"})
    assert "HINT" not in policy.tokenizer.decode(plain.prompt())


def test_rollouts_on_a_privileged_env_record_each_states_context(policy, batch):
    for traj in batch.trajectories:
        for turn in traj.turns:
            assert turn.extras["privileged_context"] and "observation" in turn.extras
        # the policy's own prompts never show it: each is the observation alone
        for turn in traj.turns:
            assert turn.prompt_ids.tolist() == prompt_ids(policy, turn.extras["observation"])


def test_the_privileged_view_scores_the_sampled_tokens_after_the_context(policy, batch):
    teachers = Teachers(policy)
    keys = batch.keys()
    got = teachers.logprobs(batch, keys, "privileged")
    for key, lp in zip(keys, got, strict=True):
        traj, turn = batch.trajectories[key[0]], batch.turn(key)
        prompt = teachers.privileged_prompt(traj, key[1], None)
        text = policy.tokenizer.decode(prompt.tolist())
        assert text.startswith(turn.extras["privileged_context"][:20])
        want = policy.logprobs(
            [prompt],
            [turn.response_ids],
            allowed_tokens=[turn.allowed_tokens],
            temperature=turn.temperature,
        )[0]
        torch.testing.assert_close(lp, want, atol=1e-5, rtol=1e-5)
    # the view differs from the policy's own scores: the context changed the prompt
    own = turn_logprobs(policy, batch, keys, grad=False)
    assert not torch.allclose(torch.cat(got), torch.cat(own))


def test_scores_are_cached_per_turn_and_counted_once(policy, batch):
    b = Batch(copy.deepcopy(batch.trajectories))
    teachers = Teachers(policy, ref=copy.deepcopy(policy))
    keys = b.keys()
    first = teachers.logprobs(b, keys, "reference")
    forwards = b.metrics["teachers/forwards"]
    assert forwards == len(keys) and b.metrics["teachers/tokens"] > 0
    again = teachers.logprobs(b, keys, "reference")
    assert b.metrics["teachers/forwards"] == forwards
    assert all(x is y for x, y in zip(first, again, strict=True))
    # a subset (a mini-batch) reads the same cache through its renumbered keys
    sub = b.subset([1])
    assert teachers.logprobs(sub, sub.keys(), "reference")[0] is first[len(b.trajectories[0].turns)]
    # the reference view is the reference's own scoring of the turns
    torch.testing.assert_close(
        torch.cat(first), torch.cat(turn_logprobs(teachers.ref, b, keys, grad=False))
    )


def test_topk_holds_the_masked_tempered_distribution_and_its_tail(policy, batch):
    teachers = Teachers(policy)
    keys = batch.keys()
    key = next(k for k in keys if batch.turn(k).allowed_tokens is not None)
    turn = batch.turn(key)
    (dist,) = teachers.topk(batch, [key], "privileged", 5)
    assert dist.ids.shape == dist.logp.shape == (len(turn.response_ids), 5)
    # sorted, and the top ids are allowed ones wherever decoding was constrained
    assert torch.all(dist.logp[:, :-1] >= dist.logp[:, 1:])
    for t, allowed in enumerate(turn.allowed_tokens):
        assert int(dist.ids[t, 0]) in allowed
    # support + tail is a distribution
    torch.testing.assert_close(dist.with_tail().exp().sum(-1), torch.ones(len(dist.sampled)))
    # the sampled token's log-prob is the decoder's masked, tempered one
    prompt = teachers.privileged_prompt(batch.trajectories[key[0]], key[1], None)
    logits = policy.response_logits([prompt], [turn.response_ids])[0]
    temps = torch.full((len(turn.response_ids),), turn.temperature)
    want = masked_logprobs(logits, turn.response_ids, turn.allowed_tokens, temps)
    torch.testing.assert_close(dist.sampled, want, atol=1e-5, rtol=1e-5)


def test_the_student_side_carries_gradient_on_the_teachers_support(policy, batch):
    teachers = Teachers(policy)
    keys = batch.keys()[:3]
    support = teachers.topk(batch, keys, "privileged", 4)
    student = teachers.student(batch, keys, support)
    for s, t in zip(student, support, strict=True):
        assert torch.equal(s.ids, t.ids) and s.logp.requires_grad
    loss = torch.cat(
        [kl(t.with_tail(), s.with_tail()) for s, t in zip(student, support, strict=True)]
    ).mean()
    for p in policy.parameters():
        p.grad = None
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())
    for p in policy.parameters():
        p.grad = None


def test_a_custom_context_is_its_own_view(policy, batch):
    teachers = Teachers(policy)
    keys = batch.keys()[:2]
    env_view = teachers.logprobs(batch, keys, "privileged")
    skills = teachers.logprobs(
        batch, keys, "privileged", context=lambda t, k: "Skill: read.", tag="s"
    )
    assert not torch.allclose(torch.cat(env_view), torch.cat(skills))
    prompt = teachers.privileged_prompt(batch.trajectories[0], 0, lambda t, k: "Skill: read.")
    assert policy.tokenizer.decode(prompt.tolist()).startswith("Skill: read.")


def test_hugging_face_teachers_score_like_their_logprobs(tmp_path):
    from agentgym.baselines.policies.hf import HFPolicy

    model = write_hf_model(tmp_path / "m", collect_env_text(SMALL, episodes=4))
    hf = HFPolicy.from_pretrained(model)
    pool = EnvPool(SMALL, 2, split="train", privileged=True)
    b = Batch(collect(hf, pool, [("q00002", 1)], 2, RolloutConfig(max_new_tokens=8)))
    teachers = Teachers(hf, ref=HFPolicy.from_pretrained(model))
    keys = b.keys()
    dists = teachers.topk(b, keys, "reference", 3)
    own = turn_logprobs(teachers.ref, b, keys, grad=False)
    for d, lp in zip(dists, own, strict=True):
        torch.testing.assert_close(d.sampled, lp, atol=1e-4, rtol=1e-4)
        assert d.ids.shape[1] == 3
    assert teachers.logprobs(b, keys, "privileged")[0].shape == own[0].shape


def test_renyi_tends_to_kl_and_matches_hand_computed_values():
    p = torch.tensor([[0.5, 0.3, 0.2]]).log()
    q = torch.tensor([[0.2, 0.5, 0.3]]).log()
    direct = (
        0.5 * torch.log(torch.tensor(0.5 / 0.2))
        + 0.3 * torch.log(torch.tensor(0.3 / 0.5))
        + 0.2 * torch.log(torch.tensor(0.2 / 0.3))
    )
    torch.testing.assert_close(kl(p, q)[0], direct)
    for rho in (1.0 + 1e-3, 1.0 - 1e-3):
        assert abs(float(renyi(p, q, rho)[0] - direct)) < 1e-3
    torch.testing.assert_close(renyi(p, q, 1.0)[0], direct)
    # order 2: log Σ P² / Q
    want = torch.log(torch.tensor(0.25 / 0.2 + 0.09 / 0.5 + 0.04 / 0.3))
    torch.testing.assert_close(renyi(p, q, 2.0)[0], want)
    assert float(renyi(p, p, 0.5)[0]) == pytest.approx(0.0, abs=1e-6)
    torch.testing.assert_close(geometric(p, q, 1.0), p)
    mid = geometric(p, q, 0.5).exp()
    raw = torch.sqrt(torch.tensor([0.5 * 0.2, 0.3 * 0.5, 0.2 * 0.3]))
    torch.testing.assert_close(mid[0], raw / raw.sum())


def test_topk_kl_with_the_whole_vocabulary_is_the_full_kl():
    torch.manual_seed(0)
    lp, lq = torch.log_softmax(torch.randn(4, 6), -1), torch.log_softmax(torch.randn(4, 6), -1)
    ids = lp.topk(6, dim=-1).indices
    t = TokenDist(ids, lp.gather(-1, ids), lp[:, 0])
    s = TokenDist(ids, lq.gather(-1, ids), lq[:, 0])
    torch.testing.assert_close(kl(t.with_tail(), s.with_tail()), kl(lp, lq), atol=1e-4, rtol=1e-4)
    # with a partial support the tail bucket keeps both sides proper distributions
    ids2 = ids[:, :2]
    t2 = TokenDist(ids2, lp.gather(-1, ids2), lp[:, 0])
    torch.testing.assert_close(t2.with_tail().exp().sum(-1), torch.ones(4))


def test_teacher_specs_and_tokenizers_are_checked(policy, tmp_path):
    assert parse_teachers("a=/x, b=/y") == {"a": "/x", "b": "/y"}
    assert parse_teachers("") == {}
    for bad in ("a", "a=", "=x", "a=/x,a=/y"):
        with pytest.raises(BadInput):
            parse_teachers(bad)
    from agentgym.baselines.policies.hf import HFPolicy

    other = HFPolicy.from_pretrained(write_hf_model(tmp_path / "m", ["go north"] * 50))
    with pytest.raises(BadInput, match="tokenizer differs"):
        check_tokenizer(policy, other, "reference")
    check_tokenizer(policy, copy.deepcopy(policy), "reference")
