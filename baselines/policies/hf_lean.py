"""A lean forward pass over a Hugging Face model's own weights, for the shapes RL needs.

``transformers`` builds a general forward: per call it rebuilds the causal/padding mask,
grows a dynamic cache by concatenation, and goes through a stack of modules, hooks and
config lookups. For a small model that bookkeeping costs more than the arithmetic: on a
2-layer, 128-wide GPT-2 about 60% of a decode step. :class:`LeanForward` computes the same
function with plain tensor ops on the same ``nn.Parameter`` objects (so gradients land where
the optimiser looks), and with what RL's shapes allow:

* a KV cache preallocated for prompt + response (:meth:`LeanForward.new_cache`), written in
  place, and one padding mask built per batch, sliced per decode step;
* a past (keys and values of a shared prompt, computed once per group and expanded over the
  group's rows) that the scoring pass attends to, gradients included, so a group's prompt
  goes through the network once instead of G times;
* fused kernels where ``transformers`` composes them (``F.gelu(approximate="tanh")`` for
  GPT-2's ``gelu_new``; the same formula, one kernel forward and backward).

Supported: GPT-2 (``GPT2LMHeadModel``, :class:`LeanGPT2`) without cross-attention, with
``gelu_new``, ``gelu_pytorch_tanh``, ``gelu`` or ``relu`` activations, any ``scale_attn_*``
setting; Llama and Qwen2 (``LlamaForCausalLM``, ``Qwen2ForCausalLM``, :class:`LeanLlama`)
with SiLU gates, grouped-query attention, biases where the config has them, and the model's
own rotary embedding module (so every RoPE scaling it knows), without sliding windows. Any
other model (and any model wrapped by ``peft``) returns None from :func:`lean_forward`, and
the policy keeps ``transformers``' forward. Dropout is not applied: the policy keeps the
model in ``eval()`` mode. Results equal ``transformers``' to float rounding (tested to 1e-5
on log-probabilities, losses and gradients).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from agentgym.baselines.policies.base import BlockHook

KV = tuple[torch.Tensor, torch.Tensor]
"""One layer's keys and values, each ``[B, heads, T, head_dim]``."""
Attend = Callable[[int, torch.Tensor, torch.Tensor], KV]
"""``attend(layer, k, v)``: the keys and values layer ``layer`` attends to (see ``hidden``)."""

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "relu": F.relu,
}


class LeanForward:
    """A model's forward as plain tensor ops on its parameters (one subclass per family).

    Attributes:
        layers: number of transformer blocks.
        kv_heads: key/value heads per block (the cache's width).
        head_dim: width of one head.
    """

    layers: int
    kv_heads: int
    head_dim: int

    def __init__(self, lm: Any):
        """Keep ``lm``'s output layer; the weights stay the model's own."""
        self._lm = lm
        self._head: Any = lm.get_output_embeddings()
        self.block_hook: BlockHook | None = None

    def new_cache(self, rows: int, length: int) -> list[KV]:
        """Zeroed keys and values for ``rows`` rows of ``length`` columns, one pair per layer."""
        w = self._head.weight
        shape = (rows, self.kv_heads, length, self.head_dim)
        return [(w.new_zeros(shape), w.new_zeros(shape)) for _ in range(self.layers)]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The output layer on final hidden states ``[..., width]``."""
        return F.linear(hidden, self._head.weight, self._head.bias)

    def hidden(
        self,
        ids: torch.Tensor,
        pos: torch.Tensor,
        mask: torch.Tensor | None,
        *,
        cache: list[KV] | None = None,
        start: int = 0,
        past: list[KV] | None = None,
        keep_kv: bool = False,
    ) -> tuple[torch.Tensor, list[KV]]:
        """Final hidden states (after the last norm) of ``ids`` ``[B, T]``.

        Args:
            ids: token ids.
            pos: position ids, ``[B, T]``.
            mask: ``[B, 1, T, T_k]`` bool, True where a query may attend to a key; ``T_k``
                counts the keys before ``ids`` (the cache up to ``start``, or ``past``) and
                ``ids``' own. None: plain causal attention over ``ids`` alone.
            cache: preallocated keys/values (:meth:`new_cache`): ``ids``' keys and values are
                written at columns ``start ..`` and attention reads columns ``.. start + T``
                (no gradient through the cache: decoding only).
            start: the cache column of ``ids[:, 0]``.
            past: keys/values ``[B, kv_heads, T_p, head_dim]`` per layer that ``ids`` follow
                and attend to (with gradient: a shared prompt expanded over its group).
            keep_kv: also return ``ids``' own keys and values per layer (for a later ``past``).

        Returns:
            ``([B, T, width] hidden states, [per-layer (k, v)] when keep_kv else [])``.
        """
        kept: list[KV] = []

        def attend(i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            """Layer ``i``'s keys and values to attend to: ``k, v`` after the cache or past."""
            if keep_kv:
                kept.append((k, v))
            T = k.shape[2]
            if cache is not None:
                keys, values = cache[i]
                keys[:, :, start : start + T] = k
                values[:, :, start : start + T] = v
                return keys[:, :, : start + T], values[:, :, : start + T]
            if past is not None:
                return torch.cat([past[i][0], k], dim=2), torch.cat([past[i][1], v], dim=2)
            return k, v

        x, positions = self._embed(ids, pos)
        hook = self.block_hook
        for i in range(self.layers):
            if hook is not None:
                x = hook(i, x, pos)
            x = self._block(i, x, mask, positions, attend)
        return self._final(x), kept

    def _embed(self, ids: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """The input states ``[B, T, width]`` and what the blocks need of the positions."""
        raise NotImplementedError

    def _block(
        self, i: int, x: torch.Tensor, mask: torch.Tensor | None, positions: Any, attend: Attend
    ) -> torch.Tensor:
        """Block ``i`` on ``x``; ``attend(i, k, v)`` gives the keys and values to attend to."""
        raise NotImplementedError

    def _final(self, x: torch.Tensor) -> torch.Tensor:
        """The last norm."""
        raise NotImplementedError


class LeanGPT2(LeanForward):
    """GPT-2's forward (``GPT2LMHeadModel``)."""

    def __init__(self, lm: Any):
        """Read the structure of ``lm``; the weights stay its own."""
        super().__init__(lm)
        cfg = lm.config
        self._t: Any = lm.transformer
        self.layers = int(cfg.n_layer)
        self.heads = self.kv_heads = int(cfg.n_head)
        self.head_dim = int(cfg.n_embd) // self.heads
        self._act = _ACTIVATIONS[cfg.activation_function]
        base = 1.0 / math.sqrt(self.head_dim) if cfg.scale_attn_weights else 1.0
        by_layer = bool(cfg.scale_attn_by_inverse_layer_idx)
        self._scales = [base / (i + 1) if by_layer else base for i in range(self.layers)]

    def _embed(self, ids: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, Any]:
        wte, wpe = self._t.wte, self._t.wpe
        return F.embedding(ids, wte.weight, wte.padding_idx) + F.embedding(pos, wpe.weight), None

    def _block(
        self, i: int, x: torch.Tensor, mask: torch.Tensor | None, positions: Any, attend: Attend
    ) -> torch.Tensor:
        (B, T, C), block = x.shape, self._t.h[i]
        attn, mlp = block.attn, block.mlp
        h = F.layer_norm(x, (C,), block.ln_1.weight, block.ln_1.bias, block.ln_1.eps)
        qkv = torch.addmm(attn.c_attn.bias, h.reshape(B * T, C), attn.c_attn.weight)
        q, k, v = qkv.view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        k, v = attend(i, k, v)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, scale=self._scales[i]
        )
        y = y.transpose(1, 2).reshape(B * T, C)
        x = x + torch.addmm(attn.c_proj.bias, y, attn.c_proj.weight).view(B, T, C)
        h = F.layer_norm(x, (C,), block.ln_2.weight, block.ln_2.bias, block.ln_2.eps)
        h = self._act(torch.addmm(mlp.c_fc.bias, h.reshape(B * T, C), mlp.c_fc.weight))
        return x + torch.addmm(mlp.c_proj.bias, h, mlp.c_proj.weight).view(B, T, C)

    def _final(self, x: torch.Tensor) -> torch.Tensor:
        ln = self._t.ln_f
        return F.layer_norm(x, (x.shape[-1],), ln.weight, ln.bias, ln.eps)


class LeanLlama(LeanForward):
    """The Llama family's forward (``LlamaForCausalLM``, ``Qwen2ForCausalLM``).

    RMSNorm in float32 as ``transformers`` computes it, rotary embeddings from the model's
    own ``rotary_emb`` module, grouped-query attention (keys and values repeated per query
    head group), the SiLU-gated MLP.
    """

    def __init__(self, lm: Any):
        """Read the structure of ``lm``; the weights stay its own."""
        super().__init__(lm)
        cfg = lm.config
        self._m: Any = lm.model
        self.layers = int(cfg.num_hidden_layers)
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads)
        self._scale = self.head_dim**-0.5

    @staticmethod
    def _norm(x: torch.Tensor, norm: Any) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
        return norm.weight * h.to(x.dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def _embed(self, ids: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, Any]:
        emb = self._m.embed_tokens
        x = F.embedding(ids, emb.weight, emb.padding_idx)
        cos, sin = self._m.rotary_emb(x, pos)
        return x, (cos[:, None], sin[:, None])

    def _block(
        self, i: int, x: torch.Tensor, mask: torch.Tensor | None, positions: Any, attend: Attend
    ) -> torch.Tensor:
        (B, T, _), layer = x.shape, self._m.layers[i]
        H, G, D = self.heads, self.kv_heads, self.head_dim
        attn, mlp, (cos, sin) = layer.self_attn, layer.mlp, positions
        h = self._norm(x, layer.input_layernorm)
        q = F.linear(h, attn.q_proj.weight, attn.q_proj.bias).view(B, T, H, D).transpose(1, 2)
        k = F.linear(h, attn.k_proj.weight, attn.k_proj.bias).view(B, T, G, D).transpose(1, 2)
        v = F.linear(h, attn.v_proj.weight, attn.v_proj.bias).view(B, T, G, D).transpose(1, 2)
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        k, v = attend(i, k, v)
        if G != H:  # grouped-query attention: each key/value head serves H // G queries
            k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, scale=self._scale
        )
        y = y.transpose(1, 2).reshape(B, T, H * D)
        x = x + F.linear(y, attn.o_proj.weight, attn.o_proj.bias)
        h = self._norm(x, layer.post_attention_layernorm)
        gate = F.silu(F.linear(h, mlp.gate_proj.weight, mlp.gate_proj.bias))
        up = F.linear(h, mlp.up_proj.weight, mlp.up_proj.bias)
        return x + F.linear(gate * up, mlp.down_proj.weight, mlp.down_proj.bias)

    def _final(self, x: torch.Tensor) -> torch.Tensor:
        return self._norm(x, self._m.norm)


def lean_forward(lm: Any) -> LeanForward | None:
    """A :class:`LeanForward` over ``lm``, or None when ``lm`` is not a supported model.

    Supported: a plain ``GPT2LMHeadModel`` (no cross-attention, a known activation, the stock
    ``Conv1D`` projections), or a plain ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` (SiLU,
    no sliding window, no tensor-parallel split, stock ``nn.Linear`` projections). A model
    wrapped by ``peft`` has other modules in place of those and is not supported.
    """
    name = type(lm).__name__
    if name == "GPT2LMHeadModel":
        return LeanGPT2(lm) if _plain_gpt2(lm) else None
    if name in ("LlamaForCausalLM", "Qwen2ForCausalLM"):
        return LeanLlama(lm) if _plain_llama(lm) else None
    return None


def _plain_gpt2(lm: Any) -> bool:
    cfg = lm.config
    if getattr(cfg, "add_cross_attention", False) or cfg.activation_function not in _ACTIVATIONS:
        return False
    from transformers.pytorch_utils import Conv1D

    for block in lm.transformer.h:
        linears = (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj)
        if any(type(m) is not Conv1D for m in linears):
            return False  # adapters or other wrappers: keep transformers' forward
    return True


def _plain_llama(lm: Any) -> bool:
    cfg = lm.config
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "pretraining_tp", 1) != 1:
        return False
    if getattr(cfg, "use_sliding_window", False):
        return False
    if any(t != "full_attention" for t in getattr(cfg, "layer_types", None) or ()):
        return False
    for layer in lm.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        parts = [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj]
        parts += [mlp.gate_proj, mlp.up_proj, mlp.down_proj]
        if any(type(m) is not nn.Linear for m in parts) or hasattr(attn, "q_norm"):
            return False
    return type(lm.get_output_embeddings()) is nn.Linear


# ---------------------------------------------------------------------------- masks


def after_past_mask(past_valid: torch.Tensor, queries: int) -> torch.Tensor:
    """``[B, 1, queries, T_p + queries]``: every past column a row holds, then causal."""
    B, T_p = past_valid.shape
    dev = past_valid.device
    before = past_valid.bool()[:, None, None, :].expand(B, 1, queries, T_p)
    causal = torch.ones(queries, queries, dtype=torch.bool, device=dev).tril()
    return torch.cat([before, causal.expand(B, 1, queries, queries)], dim=-1)
