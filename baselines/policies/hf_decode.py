"""The network calls of :class:`~agentgym.baselines.policies.hf.HFPolicy`'s decode and scoring.

A decoder turns "the token each row took" into "the logits of each row's next token"; the
sampling loop around it (:mod:`~agentgym.baselines.policies.sampling`) is the same for both:

* :class:`PlainDecoder`: ``transformers``' forward with its own dynamic cache, for any model;
* :class:`LeanDecoder`: :class:`~agentgym.baselines.policies.hf_lean.LeanForward` with a
  cache preallocated for prompt + response, one padding mask per batch, and each distinct
  prompt run once (the G rows of a group share their prompt's keys and values).

:func:`lean_response_states` is the scoring pass on the lean forward: the final hidden states
that predict each response token, with a group's shared prompt run once and attended to by
every row of the group (gradients flow through the shared keys and values).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from agentgym.baselines.policies.hf_batch import left_padded, scoring_batch
from agentgym.baselines.policies.hf_lean import LeanForward, after_past_mask
from agentgym.baselines.policies.sampling import attend_mask, distinct

Forward = Callable[..., tuple[torch.Tensor, Any, Any]]
"""``HFPolicy._forward``: ``(ids, mask, pos, keep=, cache=, use_cache=) -> (logits, _, cache)``."""


class PlainDecoder:
    """Decoding through ``transformers``' forward and its dynamic cache (any model)."""

    def __init__(self, forward: Forward, rows: list[list[int]], pad: int, device: torch.device):
        """Run the left-padded prompts; :attr:`logits` then holds each row's first logits."""
        self._forward, self._pad = forward, pad
        ids, self._mask, pos = left_padded(rows, pad, device)
        self._pos = torch.tensor([len(r) for r in rows], dtype=torch.long, device=device)
        logits, _, self._cache = forward(ids, self._mask, pos, keep=1, use_cache=True)
        self.logits: torch.Tensor = logits[:, -1, :]

    def feed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Append ``tokens`` ``[B]`` (padding for finished rows); the next logits ``[B, V]``."""
        mask = torch.cat([self._mask, self._mask.new_ones((len(tokens), 1))], dim=1)
        self._mask = mask
        logits, _, self._cache = self._forward(
            tokens[:, None], mask, self._pos[:, None], keep=1, cache=self._cache, use_cache=True
        )
        self._pos = self._pos + 1
        return logits[:, -1, :]


class LeanDecoder:
    """Decoding through :class:`LeanForward` with a preallocated cache and shared prompts."""

    def __init__(
        self, lean: LeanForward, rows: list[list[int]], pad: int, steps: int, device: torch.device
    ):
        """Run each distinct prompt once and copy its cache to its rows.

        ``steps``: the most tokens that will be fed back (the cache's room past the prompts).
        """
        self._lean = lean
        unique, index = distinct(rows)
        index = index.to(device)
        ids, mask, pos = left_padded(unique, pad, device)
        P = ids.shape[1]
        prefill = lean.new_cache(len(unique), P)
        h, _ = lean.hidden(ids, pos, attend_mask(mask), cache=prefill)
        self._cache = lean.new_cache(len(rows), P + steps)
        for (keys, values), (k, v) in zip(self._cache, prefill, strict=True):
            keys[:, :, :P] = k[index]
            values[:, :, :P] = v[index]
        valid = torch.ones((len(rows), P + steps), dtype=torch.bool, device=device)
        valid[:, :P] = mask.bool()[index]
        self._valid = valid[:, None, None, :]
        self._col = P
        self._pos = torch.tensor([len(r) for r in rows], dtype=torch.long, device=device)
        self.logits: torch.Tensor = lean.logits(h[index, -1])

    def feed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Append ``tokens`` ``[B]`` (padding for finished rows); the next logits ``[B, V]``."""
        c = self._col
        mask = self._valid[..., : c + 1]
        h, _ = self._lean.hidden(
            tokens[:, None], self._pos[:, None], mask, cache=self._cache, start=c
        )
        self._col, self._pos = c + 1, self._pos + 1
        return self._lean.logits(h[:, -1])


SHARE_AT_LEAST = 0.1
"""Run a group's shared prompt once in scoring when that skips at least this share of the
batch's tokens (below it, the second pass costs more than the tokens it saves)."""


def lean_response_states(
    lean: LeanForward,
    p_rows: list[list[int]],
    r_rows: list[list[int]],
    pad: int,
    device: torch.device,
) -> torch.Tensor:
    """``[n, width_r, width]`` final hidden states predicting each (right-padded) response token.

    Rows whose prompts are equal share one prompt pass when that skips at least
    :data:`SHARE_AT_LEAST` of the tokens; otherwise one padded pass as ``transformers`` would.
    """
    width_r = max(len(r) for r in r_rows)
    unique, index = distinct(p_rows)
    saved = sum(len(p) for p in p_rows) - sum(len(p) for p in unique)
    total = sum(len(p) + len(r) for p, r in zip(p_rows, r_rows, strict=True))
    if saved < SHARE_AT_LEAST * total:
        ids, mask, pos, _ = scoring_batch(p_rows, r_rows, pad, device)
        h, _ = lean.hidden(ids, pos, attend_mask(mask))
        return h[:, -width_r:]
    index = index.to(device)
    ids, mask, pos = left_padded(unique, pad, device)
    h, kv = lean.hidden(ids, pos, attend_mask(mask), keep_kv=True)
    first = h[index, -1][:, None]  # the prompt's last state predicts response token 0
    if width_r == 1:
        return first
    n, queries = len(r_rows), width_r - 1
    ids = torch.full((n, queries), pad, dtype=torch.long)
    for i, r in enumerate(r_rows):
        ids[i, : len(r) - 1] = torch.tensor(r[:-1], dtype=torch.long)
    lengths = torch.tensor([len(p) for p in p_rows], dtype=torch.long)
    pos = (lengths[:, None] + torch.arange(queries)[None, :]).to(device)
    past = [(k[index], v[index]) for k, v in kv]
    rest, _ = lean.hidden(ids.to(device), pos, after_past_mask(mask[index], queries), past=past)
    return torch.cat([first, rest], dim=1)
