"""A small decoder-only transformer trained from scratch, small enough for a CPU.

nanoGPT's shape (Radford et al. 2019): pre-LayerNorm blocks, learned absolute positions,
output projection tied to the token embedding, plus a scalar value head for PPO. Generation
is batched over left-padded prompts with a preallocated KV cache; scoring runs one causal
forward over right-padded ``prompt + response``. Both paths see the same tokens at the same
positions, so generate's behaviour log-probs equal ``logprobs`` of its output (up to float
error) whenever no masking or temperature changed the distribution.

    tok = train_tokenizer(collect_env_text("agentgym/Search-Menu-Small-v0"))
    policy = TinyPolicy(TinyConfig.preset("small", tok.vocab_size), tok)
    outs = policy.generate([policy.encode_prompt(obs)], max_new_tokens=32, allowed=[seqs])
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from agentgym.baselines.policies.base import AllowedSequences, BlockHook, GenOut
from agentgym.baselines.policies.constrained import (
    AllowedTokens,
    masked_logprobs,
    position_temperatures,
)
from agentgym.baselines.policies.sampling import Responses, attend_mask, choose, distinct
from agentgym.baselines.policies.tokenizer import TOKENIZER_FILE, Tokenizer

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "policy.json"


@dataclass(frozen=True)
class TinyConfig:
    """Shape of a :class:`TinyPolicy`."""

    vocab_size: int = 2000
    """Token ids the model reads and writes (the tokenizer's ``vocab_size``)."""
    n_layer: int = 5
    """Transformer blocks."""
    n_head: int = 5
    """Attention heads per block; must divide ``n_embd``."""
    n_embd: int = 160
    """Width of the residual stream."""
    max_len: int = 1024
    """Longest prompt + response, in tokens (learned positions)."""

    @classmethod
    def preset(cls, name: str, vocab_size: int = 2000, **overrides: Any) -> TinyConfig:
        """A named size; ``overrides`` replace single fields.

        The sizes are ``nano`` (~0.2M parameters at 2,000 tokens), ``micro`` (~0.4M; four
        layers, enough depth for menu look-ups, still a few CPU minutes to warm up), ``small``
        (~2M) and ``base`` (~8M).
        """
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(vocab_size=vocab_size, **{**PRESETS[name], **overrides})

    def __post_init__(self) -> None:
        """Refuse a head count that does not divide the width."""
        if self.n_embd % self.n_head:
            raise ValueError(f"n_head ({self.n_head}) must divide n_embd ({self.n_embd})")


PRESETS: dict[str, dict[str, int]] = {
    "nano": {"n_layer": 2, "n_head": 2, "n_embd": 48, "max_len": 1024},
    "micro": {"n_layer": 4, "n_head": 4, "n_embd": 64, "max_len": 1024},
    "small": {"n_layer": 5, "n_head": 5, "n_embd": 160, "max_len": 1024},
    "base": {"n_layer": 9, "n_head": 8, "n_embd": 256, "max_len": 1024},
}


# -- the network -------------------------------------------------------------------------

KV = tuple[torch.Tensor, torch.Tensor]
"""One layer's cache: keys and values, each ``[B, n_head, T_max, head_dim]``."""


class SelfAttention(nn.Module):
    """Multi-head self-attention that can write into and read from a KV cache."""

    def __init__(self, cfg: TinyConfig):
        """The query/key/value and output projections for ``cfg``'s width and heads."""
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, kv: KV | None, start: int
    ) -> torch.Tensor:
        """Attend from ``x`` (``[B, T, C]``) to the cache (when given) and itself.

        ``mask`` is ``[B, 1, T, T_k]`` bool (True = may attend) or None for plain causal
        attention without a cache; ``start`` is where ``x``'s keys go in the cache.
        """
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if kv is not None:
            kv[0][:, :, start : start + T] = k
            kv[1][:, :, start : start + T] = v
            k, v = kv[0][:, :, : start + T], kv[1][:, :, : start + T]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Pre-LN transformer block: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: TinyConfig):
        """The layer norms, attention and 4x-wide MLP for ``cfg``'s width."""
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = SelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, 4 * cfg.n_embd),
            nn.GELU(),
            nn.Linear(4 * cfg.n_embd, cfg.n_embd),
        )

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, kv: KV | None, start: int
    ) -> torch.Tensor:
        """Apply the block to ``x`` (the other arguments as in :meth:`SelfAttention.forward`)."""
        x = x + self.attn(self.ln_1(x), mask, kv, start)
        return x + self.mlp(self.ln_2(x))


# -- the policy --------------------------------------------------------------------------


class TinyPolicy(nn.Module):
    """A from-scratch decoder-only transformer that follows the ``Policy`` protocol.

    Prompts are ``[bos] + tokenizer.encode(text)`` (see ``encode_prompt``); responses end
    with eos. All randomness comes from torch's global generator (initialisation, unkeyed
    sampling) or from the Gumbel keys handed to ``generate``, so a run is reproducible under
    ``torch.manual_seed``.
    """

    def __init__(self, config: TinyConfig, tokenizer: Tokenizer):
        """Build a freshly initialised model for ``tokenizer`` (GPT-2 initialisation)."""
        super().__init__()
        if config.vocab_size < tokenizer.vocab_size:
            raise ValueError(
                f"config.vocab_size ({config.vocab_size}) is smaller than the tokenizer's "
                f"({tokenizer.vocab_size}); use TinyConfig.preset(name, tokenizer.vocab_size)"
            )
        self.config = config
        self.tokenizer = tokenizer
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.max_len, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.value_head = nn.Linear(config.n_embd, 1)
        self.block_hook: BlockHook | None = None
        """Called on the input of each block (:data:`~.base.BlockHook`); None: no hook."""
        self.apply(_init_weights)
        for name, p in self.named_parameters():  # residual projections, scaled as in GPT-2
            if name.endswith(("attn.proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @classmethod
    def from_preset(cls, name: str, tokenizer: Tokenizer, **overrides: Any) -> TinyPolicy:
        """A fresh policy of a named size (see ``TinyConfig.preset``) for ``tokenizer``."""
        return cls(TinyConfig.preset(name, tokenizer.vocab_size, **overrides), tokenizer)

    @property
    def device(self) -> torch.device:
        """Where the parameters live."""
        return self.wte.weight.device

    @property
    def num_blocks(self) -> int:
        """Transformer blocks (the layers a :data:`~.base.BlockHook` sees: 0 .. n - 1)."""
        return self.config.n_layer

    def set_block_hook(self, hook: BlockHook | None) -> None:
        """Install ``hook`` on every block's input (None removes it)."""
        self.block_hook = hook

    def num_parameters(self) -> int:
        """Number of trainable scalars (the tied output projection counted once)."""
        return sum(p.numel() for p in self.parameters())

    def encode_prompt(self, text: str) -> list[int]:
        """The prompt for an observation: ``[bos] + encode(text)``."""
        return [self.tokenizer.bos_id, *self.tokenizer.encode(text)]

    # -- forward -------------------------------------------------------------------------

    def hidden(
        self,
        idx: torch.Tensor,
        pos: torch.Tensor,
        mask: torch.Tensor | None = None,
        cache: list[KV] | None = None,
        start: int = 0,
    ) -> torch.Tensor:
        """Final hidden states.

        Args:
            idx: ``[B, T]`` token ids.
            pos: ``[B, T]`` positions (< ``max_len``).
            mask: ``[B, 1, T, T_k]`` bool attention mask, or None for causal attention.
            cache: one ``KV`` per layer to write ``idx``'s keys into at ``start`` and read.
            start: cache offset of ``idx[:, 0]``.

        Returns:
            ``[B, T, n_embd]`` after the final LayerNorm.
        """
        x = self.wte(idx) + self.wpe(pos)
        hook = self.block_hook
        for i, block in enumerate(self.blocks):
            if hook is not None:
                x = hook(i, x, pos)
            x = block(x, mask, None if cache is None else cache[i], start)
        return self.ln_f(x)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Next-token logits from hidden states (``[..., n_embd]`` -> ``[..., V]``)."""
        return h @ self.wte.weight.T

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Causal logits ``[B, T, V]`` of right-padded (or unpadded) ``idx`` ``[B, T]``."""
        pos = torch.arange(idx.shape[1], device=idx.device).expand_as(idx)
        return self.logits(self.hidden(idx, pos))

    # -- generation ----------------------------------------------------------------------

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        greedy: bool = False,
        gumbel_keys: list[int] | None = None,
        allowed: Sequence[AllowedSequences | None] | None = None,
    ) -> list[GenOut]:
        """Sample one response per prompt; see ``Policy.generate``.

        Prompts longer than ``max_len + 1 - max_new_tokens`` keep their last tokens (the
        most recent context); ``logprobs`` truncates by the actual response length, so the
        two agree on such prompts only for responses of exactly ``max_new_tokens``. A
        constrained row always completes one allowed sequence: when its longest sequence
        (plus eos) exceeds ``max_new_tokens``, its budget grows to fit it (free rows keep
        ``max_new_tokens``; the prompt truncation uses the grown budget). ``logps`` are
        ``log_softmax(masked logits / temperature)`` at the chosen tokens, also when greedy.
        """
        B = len(prompts)
        if B == 0:
            return []
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0 (use greedy=True), got {temperature}")
        if gumbel_keys is not None and len(gumbel_keys) != B:
            raise ValueError(f"{len(gumbel_keys)} gumbel_keys for {B} prompts")
        responses = Responses(allowed, B, max_new_tokens, self.tokenizer.eos_id)
        steps = responses.steps
        if not 1 <= steps <= self.config.max_len:
            limit = self.config.max_len
            raise ValueError(f"need 1 <= new tokens <= max_len ({limit}), got {steps}")
        # the last new token is never fed back, so prompt + response - 1 tokens must fit
        prompts = [list(p)[-(self.config.max_len + 1 - steps) :] for p in prompts]
        if any(not p for p in prompts):
            raise ValueError("every prompt needs at least one token (TinyPolicy uses [bos])")

        h, cache, valid, lengths = self._prefill(prompts, steps)

        # decode: choose, record, feed back, one column at a time
        P = valid.shape[1] - steps
        for t in range(steps):
            mask = responses.mask(self.config.vocab_size, self.device)
            tok, logp = choose(
                self.logits(h), mask, t, temperature=temperature, greedy=greedy, keys=gumbel_keys
            )
            responses.take(tok, logp)
            if responses.finished or t == steps - 1:
                break
            c = P + t  # the cache column of the token just chosen
            step_mask = valid[:, None, None, : c + 1].clone()
            step_mask[..., c] = True  # finished rows keep running on garbage, never read
            h = self.hidden(tok[:, None], (lengths + t)[:, None], step_mask, cache, c)[:, -1]
        return responses.results(self.tokenizer)

    def _prefill(
        self, prompts: list[list[int]], steps: int
    ) -> tuple[torch.Tensor, list[KV], torch.Tensor, torch.Tensor]:
        """Run the prompts, left-padded so that each ends at column ``P - 1``.

        Returns:
            ``([B, n_embd] last hidden states, a KV cache per layer with room for ``steps``
            more columns, [B, P + steps] bool mask of real columns, [B] prompt lengths)``.
        """
        dev, P = self.device, max(len(p) for p in prompts)
        unique, index = distinct(prompts)  # a group's G rows share one prompt: run it once
        index = index.to(dev)
        U = len(unique)
        lengths = torch.tensor([len(p) for p in unique], device=dev)
        idx = torch.full((U, P), self.tokenizer.pad_id, dtype=torch.long, device=dev)
        for i, p in enumerate(unique):
            idx[i, P - len(p) :] = torch.tensor(p, dtype=torch.long)
        cols = torch.arange(P + steps, device=dev)
        valid = cols[None, :] >= (P - lengths)[:, None]
        pos = (cols[None, :P] - (P - lengths)[:, None]).clamp(min=0)
        mask = attend_mask(valid[:, :P])  # pads attend only to themselves
        shape = (U, self.config.n_head, P + steps, self.config.n_embd // self.config.n_head)
        zeros = self.wte.weight.new_zeros
        cache = [(zeros(shape), zeros(shape)) for _ in self.blocks]
        h = self.hidden(idx, pos, mask, cache, 0)[:, -1]
        if len(prompts) > U:
            cache = [(k[index], v[index]) for k, v in cache]
        return h[index], cache, valid[index], lengths[index]

    # -- scoring -------------------------------------------------------------------------

    def logprobs(
        self,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        *,
        grad: bool = False,
        allowed_tokens: Sequence[AllowedTokens | None] | None = None,
        temperature: float | Sequence[float] = 1.0,
    ) -> list[torch.Tensor]:
        """Per-token ``log p(response_t | prompt, response_<t)`` under softmax(logits / T).

        Args:
            prompts: ``B`` 1-D long tensors (left-truncated to fit ``max_len``).
            responses: ``B`` 1-D long tensors.
            grad: keep the autograd graph.
            allowed_tokens: per row, per response position, the token ids constrained
                decoding allowed (None: any); the log-probs are then renormalised over them,
                the distribution the decoder sampled from.
            temperature: the sampling temperature, one for all rows or one per row.

        Returns:
            ``B`` float32 tensors of shapes ``[len(responses[i])]``.
        """
        return self.logprobs_and_values(
            prompts, responses, grad=grad, allowed_tokens=allowed_tokens, temperature=temperature
        )[0]

    def response_logits(
        self, prompts: list[torch.Tensor], responses: list[torch.Tensor], *, grad: bool = False
    ) -> list[torch.Tensor]:
        """Raw next-token logits at every response position, ``[len(responses[i]), V]`` each.

        The positions are those of :meth:`logprobs` (the teachers' top-k distributions read
        them); no temperature or decoding mask is applied.
        """
        with torch.set_grad_enabled(grad):
            h, _, sizes = self._response_states(prompts, responses)
            return list(self.logits(h).float().split(sizes))

    def values(
        self,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        *,
        grad: bool = False,
    ) -> list[torch.Tensor]:
        """Value estimates per response token, read at the state that predicts the token.

        These are the same positions as ``logprobs``; shapes ``[len(responses[i])]``.
        """
        return self.logprobs_and_values(prompts, responses, grad=grad)[1]

    def logprobs_and_values(
        self,
        prompts: list[torch.Tensor],
        responses: list[torch.Tensor],
        *,
        grad: bool = False,
        allowed_tokens: Sequence[AllowedTokens | None] | None = None,
        temperature: float | Sequence[float] = 1.0,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """``logprobs`` and ``values`` from one forward pass (values ignore temperature)."""
        with torch.set_grad_enabled(grad):
            h, targets, sizes = self._response_states(prompts, responses)
            flat: list[Sequence[int] | None] | None = None
            if allowed_tokens is not None:
                flat = []
                for row, size in zip(allowed_tokens, sizes, strict=True):
                    flat.extend([None] * size if row is None else list(row))
            temps = position_temperatures(temperature, sizes, h.device)
            logp = masked_logprobs(self.logits(h), targets, flat, temps)
            value = self.value_head(h).squeeze(-1).float()
            return list(logp.split(sizes)), list(value.split(sizes))

    def _response_states(
        self, prompts: list[torch.Tensor], responses: list[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """Hidden states that predict each response token.

        Returns:
            ``([N, n_embd] states, [N] target tokens, per-row response lengths)`` with
            ``N`` the total response length.
        """
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts for {len(responses)} responses")
        dev, max_len = self.device, self.config.max_len
        seqs, cols, targets, sizes = [], [], [], []
        for p, r in zip(prompts, responses, strict=True):
            p, r = p.reshape(-1).to(dev, torch.long), r.reshape(-1).to(dev, torch.long)
            if len(r) > max_len:
                raise ValueError(f"a response of {len(r)} tokens does not fit max_len {max_len}")
            p = p[-(max_len + 1 - max(len(r), 1)) :]  # the most recent context
            if len(p) == 0:
                raise ValueError("every prompt needs at least one token (TinyPolicy uses [bos])")
            seqs.append(torch.cat([p, r[:-1]]))  # the last response token is only a target
            cols.append(torch.arange(len(p) - 1, len(p) - 1 + len(r), device=dev))
            targets.append(r)
            sizes.append(len(r))
        T = max(len(s) for s in seqs)
        idx = torch.full((len(seqs), T), self.tokenizer.pad_id, dtype=torch.long, device=dev)
        for i, s in enumerate(seqs):
            idx[i, : len(s)] = s
        pos = torch.arange(T, device=dev).expand_as(idx)
        h = self.hidden(idx, pos)  # right padding: causal attention never reaches a pad
        rows = torch.repeat_interleave(
            torch.arange(len(seqs), device=dev), torch.tensor(sizes, device=dev)
        )
        return h[rows, torch.cat(cols)], torch.cat(targets), sizes

    # -- files ---------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write ``model.safetensors``, ``policy.json`` and ``tokenizer.json`` into ``path``.

        The folder is created if needed. The bytes depend only on the weights and the config.
        """
        from safetensors.torch import save_file

        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in self.state_dict().items()}
        save_file(tensors, str(root / WEIGHTS_FILE))
        doc = {"format": 1, "class": _class_spec(type(self)), "config": asdict(self.config)}
        (root / CONFIG_FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        self.tokenizer.save(root / TOKENIZER_FILE)

    @classmethod
    def load(cls, path: Path, device: str | torch.device = "cpu") -> TinyPolicy:
        """Read a policy written by ``save``; no pickle is involved.

        Raises:
            FileNotFoundError: a file is missing.
            ValueError: the config names unknown fields.
        """
        from safetensors.torch import load_file

        root = Path(path)
        doc = json.loads((root / CONFIG_FILE).read_text(encoding="utf-8"))
        known = {f.name for f in fields(TinyConfig)}
        unknown = set(doc["config"]) - known
        if unknown:
            raise ValueError(f"{root / CONFIG_FILE}: unknown config fields {sorted(unknown)}")
        policy = cls(TinyConfig(**doc["config"]), Tokenizer.load(root / TOKENIZER_FILE))
        policy.load_state_dict(load_file(str(root / WEIGHTS_FILE)))
        return policy.to(device)


# -- helpers -----------------------------------------------------------------------------


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


def _class_spec(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"
