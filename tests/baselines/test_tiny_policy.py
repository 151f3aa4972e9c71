"""The tiny from-scratch policy: tokenizer, generation, constrained decoding, scoring,
checkpoints, the agent that plays it, and a short supervised fine-tuning smoke run."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

import agentgym  # noqa: E402
from agentgym.agents import load_agent  # noqa: E402
from agentgym.agents.checkpoint import CHECKPOINT_FILE, checkpoint_sha256  # noqa: E402
from agentgym.baselines.policies import (  # noqa: E402
    GenOut,
    Policy,
    PolicyAgent,
    TinyConfig,
    TinyPolicy,
    Tokenizer,
    TokenTrie,
    collect_env_text,
    save_policy_checkpoint,
    train_tokenizer,
)
from agentgym.baselines.prompt import prompt_ids  # noqa: E402
from agentgym.harness.evaluate import evaluate  # noqa: E402

ENV = "agentgym/Search-Menu-Small-v0"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return collect_env_text(ENV, episodes=10)


@pytest.fixture(scope="module")
def tok(texts: list[str]) -> Tokenizer:
    return train_tokenizer(texts, vocab_size=1000)


@pytest.fixture(scope="module")
def menus(texts: list[str]) -> list[list[str]]:
    """Admissible-action lists from real episodes."""
    env = agentgym.make(ENV)
    found = []
    for seed in range(5):
        _, info = env.reset(seed=seed)
        done = False
        while not done:
            found.append(list(info["admissible_actions"]))
            _, _, terminated, truncated, info = env.step(env.unwrapped.oracle_action())  # type: ignore[attr-defined]
            done = terminated or truncated
    return found


def fresh(tok: Tokenizer, preset: str = "nano", seed: int = 0) -> TinyPolicy:
    torch.manual_seed(seed)
    return TinyPolicy.from_preset(preset, tok).eval()


def observations(texts: list[str], n: int) -> list[str]:
    return [t for t in texts if t.startswith("Question:")][:n]


# -- tokenizer ---------------------------------------------------------------------------


def test_tokenizer_round_trips_env_text(texts: list[str], tok: Tokenizer, tmp_path: Path):
    assert (tok.pad_id, tok.eos_id, tok.bos_id) == (0, 1, 2)
    assert 259 < tok.vocab_size <= 1000
    for text in [*texts, "unseen: Zürich ✓ 𝔸 \t\n  two  spaces"]:
        assert tok.decode(tok.encode(text)) == text
    tok.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(tmp_path / "tokenizer.json")
    assert [again.encode(t) for t in texts[:50]] == [tok.encode(t) for t in texts[:50]]
    assert tok.decode([tok.bos_id, *tok.encode("answer: x"), tok.eos_id]) == "answer: x"


def test_tokenizer_training_is_deterministic(texts: list[str], tok: Tokenizer):
    assert collect_env_text(ENV, episodes=10) == texts
    assert train_tokenizer(texts, vocab_size=1000).backend.to_str() == tok.backend.to_str()


# -- generation --------------------------------------------------------------------------


def test_presets_have_the_advertised_sizes():
    sizes = {}
    for name in ("nano", "micro", "small", "base"):
        torch.manual_seed(0)
        sizes[name] = TinyPolicy(TinyConfig.preset(name, 2000), _dummy_tok()).num_parameters()
    assert 0.15e6 < sizes["nano"] < 0.3e6
    assert 0.3e6 < sizes["micro"] < 0.5e6
    assert 1.5e6 < sizes["small"] < 2.5e6
    assert 6e6 < sizes["base"] < 10e6


def test_policy_follows_the_protocol(tok: Tokenizer):
    assert isinstance(fresh(tok), Policy)


def test_generate_is_batched_and_seeded(tok: Tokenizer, texts: list[str]):
    policy = fresh(tok)
    prompts = [policy.encode_prompt(o) for o in observations(texts, 6)]
    assert len({len(p) for p in prompts}) > 1  # real left padding

    torch.manual_seed(1)
    a = policy.generate(prompts, max_new_tokens=12)
    torch.manual_seed(1)
    b = policy.generate(prompts, max_new_tokens=12)
    assert [o.ids for o in a] == [o.ids for o in b]
    assert all(isinstance(o, GenOut) and len(o.ids) == len(o.logps) <= 12 for o in a)

    # a row's output does not depend on its batch mates
    keys = [11, 12, 13, 14, 15, 16]
    batched = policy.generate(prompts, max_new_tokens=12, gumbel_keys=keys)
    alone = [
        policy.generate([p], max_new_tokens=12, gumbel_keys=[k])[0]
        for p, k in zip(prompts, keys, strict=True)
    ]
    assert [o.ids for o in batched] == [o.ids for o in alone]


def test_gumbel_keys_fix_the_noise(tok: Tokenizer, texts: list[str]):
    policy = fresh(tok)
    prompt = policy.encode_prompt(observations(texts, 1)[0])
    torch.manual_seed(5)  # the keyed path must not read the global generator
    twins = policy.generate([prompt] * 4, max_new_tokens=10, gumbel_keys=[7, 7, 8, 9])
    torch.manual_seed(6)
    again = policy.generate([prompt], max_new_tokens=10, gumbel_keys=[7])[0]
    assert twins[0].ids == twins[1].ids == again.ids
    assert twins[0].logps == pytest.approx(again.logps, abs=1e-6)
    assert len({tuple(o.ids) for o in twins}) == 3  # different keys differ


def test_greedy_ignores_keys_and_rejects_bad_settings(tok: Tokenizer, texts: list[str]):
    policy = fresh(tok)
    prompt = policy.encode_prompt(observations(texts, 1)[0])
    a = policy.generate([prompt], max_new_tokens=8, greedy=True, gumbel_keys=[1])[0]
    b = policy.generate([prompt], max_new_tokens=8, greedy=True, gumbel_keys=[2])[0]
    assert a.ids == b.ids
    with pytest.raises(ValueError, match="temperature"):
        policy.generate([prompt], max_new_tokens=4, temperature=0.0)
    with pytest.raises(ValueError, match="gumbel_keys"):
        policy.generate([prompt], max_new_tokens=4, gumbel_keys=[1, 2])
    with pytest.raises(ValueError, match="at least one token"):
        policy.generate([[]], max_new_tokens=4)


def test_long_prompts_keep_the_most_recent_context(tok: Tokenizer):
    policy = TinyPolicy(TinyConfig.preset("nano", tok.vocab_size, max_len=64), tok).eval()
    long = [tok.bos_id, *list(range(3, 203))]
    out = policy.generate([long], max_new_tokens=16, gumbel_keys=[3])[0]
    cut = policy.generate([long[-(64 + 1 - 16) :]], max_new_tokens=16, gumbel_keys=[3])[0]
    assert out.ids == cut.ids


# -- constrained decoding ----------------------------------------------------------------


def test_token_trie():
    trie = TokenTrie([[5, 6], [5, 7, 8], [5, 6], [9]], eos_id=1)
    assert trie.allowed([]) == [5, 9]
    assert trie.allowed([5]) == [6, 7]
    assert trie.allowed([5, 6]) == [1]
    assert trie.allowed([5, 6, 1]) == []
    assert trie.depth == 4
    assert [5, 7, 8] in trie and [5, 7, 8, 1] in trie
    assert [5, 7] not in trie and [5] not in trie
    with pytest.raises(KeyError, match="not allowed"):
        trie.allowed([6])
    with pytest.raises(ValueError, match="eos"):
        TokenTrie([[5, 1, 6]], eos_id=1)
    with pytest.raises(ValueError, match="at least one"):
        TokenTrie([], eos_id=1)


def test_constrained_generation_always_returns_an_allowed_string(
    tok: Tokenizer, menus: list[list[str]]
):
    policy = fresh(tok, seed=3)
    rng = random.Random(0)
    for round_ in range(6):
        batch = 8
        prompts = [
            [tok.bos_id] + [rng.randrange(3, tok.vocab_size) for _ in range(rng.randrange(1, 80))]
            for _ in range(batch)
        ]
        options = [rng.sample(m, rng.randint(1, len(m))) for m in rng.choices(menus, k=batch)]
        options[0] = ["", "answer: a", "answer: a b", "answer: ab"]  # prefixes of each other
        allowed = [[tok.encode(s) for s in opts] for opts in options]
        outs = policy.generate(
            prompts,
            max_new_tokens=2,  # shorter than the items: the budget must grow to fit them
            temperature=[1.0, 3.0, 0.3][round_ % 3],
            greedy=round_ == 5,
            gumbel_keys=list(range(round_ * batch, (round_ + 1) * batch)),
            allowed=allowed,
        )
        for out, opts in zip(outs, options, strict=True):
            assert out.text in opts
            assert out.ids[-1] == tok.eos_id and out.ids[:-1] == tok.encode(out.text)
            assert all(lp <= 1e-6 and lp > float("-inf") for lp in out.logps)


def test_constrained_and_free_rows_mix(tok: Tokenizer, menus: list[list[str]]):
    policy = fresh(tok)
    prompts = [[tok.bos_id, 10, 11], [tok.bos_id, 12]]
    allowed = [[tok.encode(s) for s in menus[3]], None]
    outs = policy.generate(prompts, max_new_tokens=5, allowed=allowed, gumbel_keys=[1, 2])
    assert outs[0].text in menus[3]
    assert len(outs[1].ids) <= 5


# -- scoring -----------------------------------------------------------------------------


def test_logprobs_equal_behaviour_logps(tok: Tokenizer, texts: list[str]):
    policy = fresh(tok)
    prompts = [policy.encode_prompt(o) for o in observations(texts, 6)] + [[tok.bos_id]]
    outs = policy.generate(prompts, max_new_tokens=20, gumbel_keys=list(range(7)))
    scored = policy.logprobs(
        [torch.tensor(p) for p in prompts], [torch.tensor(o.ids) for o in outs]
    )
    for out, lp in zip(outs, scored, strict=True):
        assert lp.shape == (len(out.ids),) and not lp.requires_grad
        torch.testing.assert_close(lp, torch.tensor(out.logps), atol=1e-5, rtol=0)
    values = policy.values([torch.tensor(p) for p in prompts], [torch.tensor(o.ids) for o in outs])
    assert [v.shape for v in values] == [lp.shape for lp in scored]


def test_backward_reaches_every_parameter(tok: Tokenizer, texts: list[str]):
    policy = fresh(tok)
    prompts = [torch.tensor(policy.encode_prompt(o)) for o in observations(texts, 3)]
    responses = [torch.tensor([*tok.encode(a), tok.eos_id]) for a in ("search: x", "read: y", "")]
    logps = policy.logprobs(prompts, responses, grad=True)
    values = policy.values(prompts, responses, grad=True)
    (torch.cat(logps).sum() + torch.cat(values).pow(2).sum()).backward()
    for name, p in policy.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_save_load_round_trip(tok: Tokenizer, texts: list[str], tmp_path: Path):
    policy = fresh(tok, seed=4)
    policy.save(tmp_path / "a")
    policy.save(tmp_path / "b")
    names = sorted(f.name for f in (tmp_path / "a").iterdir())
    assert names == ["model.safetensors", "policy.json", "tokenizer.json"]
    for name in names:  # the same policy writes the same bytes
        assert _sha(tmp_path / "a" / name) == _sha(tmp_path / "b" / name)

    loaded = TinyPolicy.load(tmp_path / "a")
    assert loaded.config == policy.config
    prompts = [torch.tensor(policy.encode_prompt(o)) for o in observations(texts, 3)]
    responses = [torch.tensor([5, 6, tok.eos_id]), torch.tensor([7]), torch.tensor([8, 9])]
    for a, b in zip(
        policy.logprobs(prompts, responses), loaded.logprobs(prompts, responses), strict=True
    ):
        assert torch.equal(a, b)
    for a, b in zip(
        policy.values(prompts, responses), loaded.values(prompts, responses), strict=True
    ):
        assert torch.equal(a, b)


# -- the agent ---------------------------------------------------------------------------


def test_policy_agent_plays_from_a_checkpoint(tok: Tokenizer, tmp_path: Path):
    ckpt = tmp_path / "tiny-ckpt"
    save_policy_checkpoint(fresh(tok), ckpt, metadata={"env_id": ENV})
    manifest = json.loads((ckpt / CHECKPOINT_FILE).read_text())
    assert manifest["agent"] == "agentgym.baselines.policies.agent:PolicyAgent"
    assert manifest["config"]["policy_class"] == "agentgym.baselines.policies.tiny:TinyPolicy"
    assert manifest["config"]["constrained"] is True

    doc = evaluate(str(ckpt), [ENV], seeds=3)
    assert doc["agent"]["checkpoint_sha256"] == checkpoint_sha256(ckpt)
    assert len(doc["episodes"]) == 3
    assert all(e["error"] is None and e["tokens"] > 0 for e in doc["episodes"])

    agent = load_agent(str(ckpt))
    assert isinstance(agent, PolicyAgent)
    env = agentgym.make(ENV, split="test")
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        agent.reset(ENV, seed)
        done = False
        while not done:
            action = agent.act(obs, info)
            assert action in info["admissible_actions"]
            obs, _, terminated, truncated, info = env.step(action)
            assert info["action_valid"]
            done = terminated or truncated
        assert agent.tokens_used > 0


def test_sampling_agent_replays_and_free_agent_returns_text(tok: Tokenizer, tmp_path: Path):
    ckpt = tmp_path / "sampling"
    save_policy_checkpoint(fresh(tok), ckpt, metadata={"greedy": False, "seed": 3})
    env = agentgym.make(ENV)

    def play(agent: PolicyAgent) -> list[str]:
        obs, info = env.reset(seed=1)
        agent.reset(ENV, 1)
        actions: list[str] = []
        for _ in range(5):
            actions.append(agent.act(obs, info))
            obs, _, terminated, truncated, info = env.step(actions[-1])
            if terminated or truncated:
                break
        return actions

    assert play(load_agent(str(ckpt))) == play(load_agent(str(ckpt)))

    free = PolicyAgent(fresh(tok), constrained=False, max_new_tokens=6)
    obs, info = env.reset(seed=0)
    free.reset(ENV, 0)
    assert isinstance(free.act(obs, info), str) and 0 < free.tokens_used <= 6


# -- learning ----------------------------------------------------------------------------


def test_sft_smoke_raises_oracle_log_likelihood(tok: Tokenizer):
    env = agentgym.make(ENV)
    policy = fresh(tok)
    prompts, responses = [], []
    for seed in range(8):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            action = env.unwrapped.oracle_action()  # type: ignore[attr-defined]
            prompts.append(torch.tensor(prompt_ids(policy, obs)))
            responses.append(torch.tensor([*tok.encode(action), tok.eos_id]))
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated

    def mean_loglik() -> float:
        return torch.cat(policy.logprobs(prompts, responses)).mean().item()

    before = mean_loglik()
    opt = torch.optim.AdamW(policy.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        mb = torch.randint(len(prompts), (4,), generator=gen).tolist()
        logps = policy.logprobs([prompts[i] for i in mb], [responses[i] for i in mb], grad=True)
        loss = -torch.cat(logps).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = mean_loglik()
    assert after > before + 3.0, (before, after)


# -- helpers -----------------------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _dummy_tok() -> Tokenizer:
    return train_tokenizer(["a tiny corpus for a tokenizer"], vocab_size=300)
