"""The lean forward computes what transformers' forward computes: tokens, log-probs, values,
losses and gradients agree to 1e-5, with and without a group's shared prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

import agentgym.baselines.policies.hf_decode as hf_decode  # noqa: E402
from agentgym.baselines.policies.hf import HFPolicy, LoraSettings  # noqa: E402
from agentgym.baselines.policies.tokenizer import hf_tokenizer  # noqa: E402

CORPUS = ["go north", "go south", "take key", "open door", "look around", "go"] * 20
PROMPTS = ["go north", "take key and open door", "go north", "look", "take key and open door"]


def _model_dir(out: Path, arch: str = "gpt2", **config) -> Path:
    tok = hf_tokenizer(CORPUS, 320)
    ids = {"pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2}
    torch.manual_seed(0)
    if arch in ("llama", "qwen2"):
        family = {
            "llama": (LlamaConfig, LlamaForCausalLM),
            "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        }
        config_class, model_class = family[arch]
        settings = {
            "hidden_size": 64,
            "intermediate_size": 96,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,  # grouped-query attention
            "max_position_embeddings": 128,
            "initializer_range": 0.2,
            **config,
        }
        model = model_class(config_class(vocab_size=len(tok), **settings, **ids))
    else:
        settings = {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, **config}
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), **settings, **ids))
    tok.save_pretrained(out)
    model.save_pretrained(out)
    return out


ARCHS = ["gpt2", "llama", "qwen2"]


@pytest.fixture(scope="module", params=ARCHS)
def model(request, tmp_path_factory) -> Path:
    return _model_dir(tmp_path_factory.mktemp(request.param), request.param)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> Path:
    return _model_dir(tmp_path_factory.mktemp("gpt2"))


def _prompts(policy: HFPolicy) -> list[list[int]]:
    return [policy.tokenizer.encode(p) for p in PROMPTS]


def test_the_lean_forward_serves_plain_models_of_the_families_it_knows(model, tmp_path):
    assert HFPolicy.from_pretrained(model)._lean_forward() is not None
    lora = HFPolicy.from_pretrained(model, lora=LoraSettings(r=2))
    assert lora._lean_forward() is None  # adapters: transformers' forward


@pytest.mark.parametrize(
    ("arch", "config"),
    [
        ("gpt2", {"add_cross_attention": True}),
        ("qwen2", {"use_sliding_window": True, "sliding_window": 8}),
        ("llama", {"hidden_act": "gelu"}),
    ],
)
def test_an_unsupported_setting_keeps_transformers_forward(tmp_path, arch, config):
    assert HFPolicy.from_pretrained(_model_dir(tmp_path, arch, **config))._lean_forward() is None


@pytest.mark.parametrize("greedy", [False, True])
def test_generation_takes_the_same_tokens_with_the_same_logps(model, greedy):
    policy = HFPolicy.from_pretrained(model)
    prompts = _prompts(policy)
    allowed = [None, None, [[5, 6], [7]], None, None]  # one constrained row
    outs = {}
    for lean in (True, False):
        policy.lean = lean
        outs[lean] = policy.generate(
            prompts, max_new_tokens=9, greedy=greedy, gumbel_keys=[3, 1, 4, 1, 5], allowed=allowed
        )
    assert [o.ids for o in outs[True]] == [o.ids for o in outs[False]]
    for a, b in zip(outs[True], outs[False], strict=True):
        torch.testing.assert_close(torch.tensor(a.logps), torch.tensor(b.logps), atol=1e-5, rtol=0)
        assert a.text == b.text


@pytest.mark.parametrize("share", [True, False])
def test_scoring_gives_the_same_logps_values_and_gradients(model, monkeypatch, share):
    monkeypatch.setattr(hf_decode, "SHARE_AT_LEAST", 0.0 if share else 2.0)
    policy = HFPolicy.from_pretrained(model)
    prompts = [torch.tensor(p) for p in _prompts(policy)]
    gen = torch.Generator().manual_seed(0)
    vocab = policy.model.config.vocab_size
    responses = [torch.randint(3, vocab, (n,), generator=gen) for n in (4, 1, 7, 3, 5)]
    allowed = [None, [[5, 6, 7]], None, None, None]
    weights = [torch.randn(len(r), generator=gen) for r in responses]
    got = {}
    for lean in (True, False):
        policy.lean = lean
        for p in policy.parameters():
            p.grad = None
        lps = policy.logprobs(
            prompts, responses, grad=True, temperature=0.7, allowed_tokens=allowed
        )
        _, values = policy.logprobs_and_values(prompts, responses, grad=True)
        loss = sum((w * lp).sum() for w, lp in zip(weights, lps, strict=True))
        loss = loss + sum(v.sum() for v in values)
        loss.backward()
        grads = [p.grad.clone() for p in policy.parameters()]
        got[lean] = (lps, values, float(loss.detach()), grads)
    for i in range(2):
        for a, b in zip(got[True][i], got[False][i], strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert got[True][2] == pytest.approx(got[False][2], abs=1e-5)
    for a, b in zip(got[True][3], got[False][3], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_the_shared_prompt_pass_equals_one_padded_pass(model, monkeypatch):
    policy = HFPolicy.from_pretrained(model)
    prompts = [torch.tensor(p) for p in _prompts(policy)]
    responses = [torch.tensor([5, 6, 7, 1]), torch.tensor([9]), torch.tensor([4, 4, 1])] * 2
    prompts = prompts[:3] * 2
    out = {}
    for share in (0.0, 2.0):
        monkeypatch.setattr(hf_decode, "SHARE_AT_LEAST", share)
        out[share] = policy.logprobs(prompts, responses)
    for a, b in zip(out[0.0], out[2.0], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_other_activations_and_attention_scalings_agree(tmp_path, activation):
    path = _model_dir(
        tmp_path / "m", activation_function=activation, scale_attn_by_inverse_layer_idx=True
    )
    policy = HFPolicy.from_pretrained(path)
    assert policy._lean_forward() is not None
    prompts = [torch.tensor(p) for p in _prompts(policy)]
    responses = [torch.tensor([5, 6, 7, 1])] * len(prompts)
    policy.lean = False
    plain = policy.logprobs(prompts, responses)
    policy.lean = True
    for a, b in zip(policy.logprobs(prompts, responses), plain, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_the_trainers_loss_and_gradients_on_a_fixed_batch_match(model):
    from agentgym.baselines.batch import Batch, Trajectory, Turn
    from agentgym.baselines.config import TrainConfig
    from agentgym.baselines.credit import compose
    from agentgym.baselines.update import policy_loss

    policy = HFPolicy.from_pretrained(model, value_head=False)
    prompts = [p for p in _prompts(policy) for _ in range(2)]
    outs = policy.generate(prompts, max_new_tokens=6, gumbel_keys=list(range(len(prompts))))
    batch = Batch(
        trajectories=[
            Trajectory(
                task_id="t",
                group_id=str(i // 2),
                turns=[
                    Turn(
                        prompt_ids=torch.tensor(p),
                        response_ids=torch.tensor(o.ids),
                        terminated=True,
                        logp_old=torch.tensor(o.logps),
                    )
                ],
                outcome=float(i % 3 == 0),
                terminated=True,
            )
            for i, (p, o) in enumerate(zip(prompts, outs, strict=True))
        ]
    )
    cfg = TrainConfig.from_options(credit="grpo", policy=str(model))
    plan = compose("grpo", cfg)
    ctx = None
    for hook in ("transform", "score", "advantages", "shape"):
        plan.run(hook, batch, ctx)
    got = {}
    for lean in (True, False):
        policy.lean = lean
        for p in policy.parameters():
            p.grad = None
        loss, _ = policy_loss(batch, policy, None, plan, cfg)
        loss.backward()
        got[lean] = (float(loss.detach()), [p.grad.clone() for p in policy.parameters()])
    assert got[True][0] == pytest.approx(got[False][0], abs=1e-5)
    for a, b in zip(got[True][1], got[False][1], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
