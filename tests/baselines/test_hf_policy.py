"""HFPolicy on tiny random Hugging Face models built on the spot (nothing is downloaded)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from agentgym.baselines.policies.base import Policy  # noqa: E402
from agentgym.baselines.policies.hf import (  # noqa: E402
    ADAPTER_DIR,
    MODEL_FILE,
    SETTINGS_FILE,
    VALUE_HEAD_FILE,
    HFPolicy,
    LoraSettings,
)
from agentgym.baselines.policies.tokenizer import CHAT_TEMPLATE, hf_tokenizer  # noqa: E402

CORPUS = ["go north", "go south", "take key", "open door", "look around", "go"] * 20


def _tokenizer() -> PreTrainedTokenizerFast:
    roles = ["<|user|>", "<|assistant|>", "<|system|>"]
    return hf_tokenizer(CORPUS, 320, extra_special_tokens=roles, chat_template=CHAT_TEMPLATE)


def _save_model(out: Path, arch: str) -> Path:
    tok = _tokenizer()
    ids = {"pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2}
    torch.manual_seed(0)
    if arch == "llama":
        model = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(tok),
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=256,
                initializer_range=0.2,  # peaky distributions: sampling differences show
                tie_word_embeddings=False,
                **ids,
            )
        )
    elif arch == "qwen2":
        model = Qwen2ForCausalLM(
            Qwen2Config(
                vocab_size=len(tok),
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=256,
                tie_word_embeddings=True,
                **ids,
            )
        )
    else:
        model = GPT2LMHeadModel(
            GPT2Config(vocab_size=len(tok), n_embd=64, n_layer=2, n_head=4, n_positions=256, **ids)
        )
    tok.save_pretrained(out)
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save_model(tmp_path_factory.mktemp("tiny-llama"), "llama")


@pytest.fixture(scope="module")
def policy(model_dir: Path) -> HFPolicy:
    return HFPolicy.from_pretrained(model_dir)


def _prompts(policy: HFPolicy) -> list[list[int]]:
    tok = policy.tokenizer
    return [
        policy.chat_prompt([{"role": "user", "content": "go north"}]),
        tok.encode("take key"),
        [tok.bos_id],
    ]


def _perturb_lora_b(policy: HFPolicy) -> None:
    """LoRA's B starts at zero (so A gets no gradient yet); give it a trained-looking value."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)


def _tensors(rows: list[list[int]]) -> list[torch.Tensor]:
    return [torch.tensor(r, dtype=torch.long) for r in rows]


# ------------------------------------------------------------------------------- loading


def test_from_pretrained_loads_offline(policy: HFPolicy, model_dir: Path) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert isinstance(policy, Policy)
    tok = policy.tokenizer
    assert (tok.pad_id, tok.eos_id, tok.bos_id) == (0, 1, 2)
    assert tok.vocab_size == len(tok.backend)
    assert tok.decode(tok.encode("open door")) == "open door"
    assert policy.dtype == torch.float32 and policy.device == torch.device("cpu")
    assert policy.lora is None and policy.value_head is not None
    # no LoRA: the whole model (and the value head) trains
    assert policy.num_parameters(trainable_only=True) == policy.num_parameters()


def test_chat_prompt_uses_template_else_plain_join(policy: HFPolicy) -> None:
    tok = policy.tokenizer
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
    ids = policy.chat_prompt(msgs)
    text = tok.backend.decode(ids)
    assert text == "<|system|>be brief<eos><|user|>go<eos><|assistant|>"
    template = tok.backend.chat_template
    try:
        tok.backend.chat_template = None
        plain = policy.chat_prompt(msgs)
    finally:
        tok.backend.chat_template = template
    assert plain[0] == tok.bos_id
    assert tok.decode(plain[1:]) == "system: be brief\nuser: go\nassistant: "


def test_from_pretrained_refuses_non_directories(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        HFPolicy.from_pretrained("Qwen/Qwen2-0.5B")  # a hub id, never fetched
    with pytest.raises(FileNotFoundError):
        HFPolicy.from_pretrained(tmp_path / "missing")


# ---------------------------------------------------------------------------- generation


def test_generate_is_batched_and_seeded(policy: HFPolicy) -> None:
    prompts = _prompts(policy)
    torch.manual_seed(123)
    a = policy.generate(prompts, max_new_tokens=10)
    torch.manual_seed(123)
    b = policy.generate(prompts, max_new_tokens=10)
    assert [o.ids for o in a] == [o.ids for o in b]
    assert [o.logps for o in a] == [o.logps for o in b]
    eos = policy.tokenizer.eos_id
    for out in a:
        assert 1 <= len(out.ids) <= 10 and len(out.logps) == len(out.ids)
        assert eos not in out.ids[:-1]
        assert all(lp <= 0.0 for lp in out.logps)
        assert out.text == policy.tokenizer.decode(out.ids)
    greedy = [policy.generate(prompts, max_new_tokens=10, greedy=True) for _ in range(2)]
    assert [o.ids for o in greedy[0]] == [o.ids for o in greedy[1]]
    assert policy.generate(prompts, max_new_tokens=0) == [
        type(a[0])(ids=[], logps=[], text="") for _ in prompts
    ]


def test_gumbel_keys_fix_the_noise(policy: HFPolicy) -> None:
    prompts = _prompts(policy)
    keys = [11, 22, 33]
    a = policy.generate(prompts, max_new_tokens=12, gumbel_keys=keys)
    torch.manual_seed(999)  # the global generator plays no part
    b = policy.generate(prompts, max_new_tokens=12, gumbel_keys=keys)
    assert [o.ids for o in a] == [o.ids for o in b]
    # a row's result does not depend on the rest of the batch (padding, other rows)
    alone = policy.generate([prompts[1]], max_new_tokens=12, gumbel_keys=[22])[0]
    assert alone.ids == a[1].ids
    assert alone.logps == pytest.approx(a[1].logps, abs=1e-5)
    twins = policy.generate([prompts[0], prompts[0]], max_new_tokens=12, gumbel_keys=[11, 11])
    assert twins[0].ids == twins[1].ids == a[0].ids
    others = policy.generate([prompts[0]] * 4, max_new_tokens=12, gumbel_keys=[1, 2, 3, 4])
    assert len({tuple(o.ids) for o in others}) > 1


def test_constrained_generation_returns_only_allowed_strings(policy: HFPolicy) -> None:
    tok = policy.tokenizer
    choices = ["go north", "go south", "go", "open door"]
    allowed = [tok.encode(c) for c in choices]
    prompts = _prompts(policy)
    seen: set[str] = set()
    for key in range(12):
        outs = policy.generate(
            prompts,
            max_new_tokens=1,  # grows to fit the longest allowed sequence plus eos
            gumbel_keys=[key, key + 100, key + 200],
            allowed=[allowed, None, allowed],
        )
        for i in (0, 2):
            assert outs[i].text in choices
            assert outs[i].ids == [*tok.encode(outs[i].text), tok.eos_id]
            seen.add(outs[i].text)
        assert len(outs[1].ids) == 1  # the free row keeps its own budget
    assert len(seen) > 1
    greedy = policy.generate(prompts, max_new_tokens=8, greedy=True, allowed=[allowed] * 3)
    assert all(o.text in choices for o in greedy)
    with pytest.raises(ValueError):
        policy.generate(prompts[:1], max_new_tokens=4, allowed=[[[tok.eos_id]]])


def test_constrained_behaviour_logps_are_scored_under_the_same_mask(policy: HFPolicy) -> None:
    """The PPO ratio starts at 1 for constrained rollouts: training log-probs renormalise over
    the tokens the trie allowed, as sampling did; unmasked ones are lower."""
    from agentgym.baselines.policies.constrained import allowed_tokens

    tok = policy.tokenizer
    allowed = [tok.encode(c) for c in ["go north", "go south", "go", "open door"]]
    prompts = _prompts(policy)
    outs = policy.generate(prompts, max_new_tokens=8, gumbel_keys=[1, 2, 3], allowed=[allowed] * 3)
    masks = [allowed_tokens(o.ids, allowed, tok.eos_id) for o in outs]
    responses = _tensors([o.ids for o in outs])
    masked = policy.logprobs(_tensors(prompts), responses, allowed_tokens=masks)
    free = policy.logprobs(_tensors(prompts), responses)
    for out, m, f in zip(outs, masked, free, strict=True):
        torch.testing.assert_close(m, torch.tensor(out.logps), atol=1e-4, rtol=0)
        assert bool((f <= m + 1e-6).all()) and bool((f < m - 1e-3).any())


def test_logprobs_equal_behaviour_logps(policy: HFPolicy) -> None:
    prompts = _prompts(policy)
    torch.manual_seed(5)
    outs = policy.generate(prompts, max_new_tokens=16, temperature=1.0)
    lps = policy.logprobs(_tensors(prompts), _tensors([o.ids for o in outs]))
    for out, lp in zip(outs, lps, strict=True):
        assert lp.shape == (len(out.ids),) and lp.dtype == torch.float32
        assert not lp.requires_grad
        torch.testing.assert_close(lp, torch.tensor(out.logps), atol=1e-4, rtol=0)
    values = policy.values(_tensors(prompts), _tensors([o.ids for o in outs]))
    assert [v.shape for v in values] == [lp.shape for lp in lps]
    lps2, values2 = policy.logprobs_and_values(
        _tensors(prompts), _tensors([o.ids for o in outs]), grad=True
    )
    assert all(lp.requires_grad for lp in lps2)
    for a, b in zip(values, values2, strict=True):
        torch.testing.assert_close(a, b.detach())
    empty = policy.logprobs(_tensors(prompts[:1]), [torch.zeros(0, dtype=torch.long)])
    assert empty[0].shape == (0,)


# ---------------------------------------------------------------------------------- LoRA


def test_lora_trains_only_adapters_and_value_head(model_dir: Path) -> None:
    pytest.importorskip("peft")
    torch.manual_seed(0)
    policy = HFPolicy.from_pretrained(model_dir, lora=LoraSettings(r=4, alpha=8.0))
    assert policy.lora is not None and policy.lora.target_modules is not None
    assert {"q_proj", "v_proj", "down_proj"} <= set(policy.lora.target_modules)
    named = dict(policy.named_parameters())
    assert named and all("lora_" in n or n.startswith("value_head.") for n in named)
    assert {n for n in named if n.startswith("value_head.")} == {
        "value_head.weight",
        "value_head.bias",
    }
    frozen = [n for n, p in policy.model.named_parameters() if not p.requires_grad]
    assert frozen and all("lora_" not in n for n in frozen)
    assert policy.num_parameters(trainable_only=True) < policy.num_parameters() // 2

    _perturb_lora_b(policy)
    prompts = _prompts(policy)
    responses = [policy.tokenizer.encode(t) for t in ("go north", "take key", "open door")]
    lps, values = policy.logprobs_and_values(_tensors(prompts), _tensors(responses), grad=True)
    loss = -torch.cat(lps).sum() + torch.cat(values).square().sum()
    loss.backward()
    for name, p in named.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert all(p.grad is None for p in policy.model.parameters() if not p.requires_grad)


# ------------------------------------------------------------------------------ save/load


def _no_pickles(path: Path) -> None:
    bad = [p.name for p in path.rglob("*") if p.suffix in {".bin", ".pt", ".pth", ".pkl"}]
    assert not bad


def test_save_load_round_trip(policy: HFPolicy, tmp_path: Path) -> None:
    policy.save(tmp_path / "ckpt")
    root = tmp_path / "ckpt"
    for name in (MODEL_FILE, "config.json", "tokenizer.json", VALUE_HEAD_FILE, SETTINGS_FILE):
        assert (root / name).is_file(), name
    _no_pickles(root)
    loaded = HFPolicy.load(root)
    prompts, responses = _prompts(policy), [[5, 6, 7], [8, 1], [9]]
    a_lp, a_v = policy.logprobs_and_values(_tensors(prompts), _tensors(responses))
    b_lp, b_v = loaded.logprobs_and_values(_tensors(prompts), _tensors(responses))
    for x, y in zip(a_lp + a_v, b_lp + b_v, strict=True):
        assert torch.equal(x, y)
    assert loaded.chat_prompt([{"role": "user", "content": "go"}]) == policy.chat_prompt(
        [{"role": "user", "content": "go"}]
    )
    out_a = policy.generate(prompts, max_new_tokens=6, gumbel_keys=[1, 2, 3])
    out_b = loaded.generate(prompts, max_new_tokens=6, gumbel_keys=[1, 2, 3])
    assert [o.ids for o in out_a] == [o.ids for o in out_b]


def test_checkpoints_record_the_hf_module_class_path(policy: HFPolicy) -> None:
    from agentgym.baselines.policies.agent import import_policy_class

    spec = f"{type(policy).__module__}:{type(policy).__qualname__}"  # what manifests record
    assert spec == "agentgym.baselines.policies.hf:HFPolicy"
    assert import_policy_class(spec) is HFPolicy


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_lora_save_load_round_trip(arch: str, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    src = _save_model(tmp_path / "base", arch)
    torch.manual_seed(0)
    policy = HFPolicy.from_pretrained(src, lora=LoraSettings(r=4, alpha=8.0))
    _perturb_lora_b(policy)
    prompts, responses = _prompts(policy), [[5, 6, 7], [8, 1], [9]]
    want_lp, want_v = policy.logprobs_and_values(_tensors(prompts), _tensors(responses))

    policy.save(tmp_path / "adapter")  # base weights + adapter: bit-identical, still LoRA
    assert (tmp_path / "adapter" / ADAPTER_DIR / "adapter_model.safetensors").is_file()
    _no_pickles(tmp_path / "adapter")
    loaded = HFPolicy.load(tmp_path / "adapter")
    assert loaded.lora == policy.lora
    assert sorted(n for n, _ in loaded.named_parameters()) == sorted(
        n for n, _ in policy.named_parameters()
    )
    got_lp, got_v = loaded.logprobs_and_values(_tensors(prompts), _tensors(responses))
    for x, y in zip(want_lp + want_v, got_lp + got_v, strict=True):
        assert torch.equal(x, y)

    policy.save(tmp_path / "merged", merge=True)  # a plain model with the update folded in
    assert not (tmp_path / "merged" / ADAPTER_DIR).exists()
    merged = HFPolicy.load(tmp_path / "merged")
    assert merged.lora is None
    got_lp, got_v = merged.logprobs_and_values(_tensors(prompts), _tensors(responses))
    for x, y in zip(want_lp + want_v, got_lp + got_v, strict=True):
        torch.testing.assert_close(x, y, atol=1e-4, rtol=0)
