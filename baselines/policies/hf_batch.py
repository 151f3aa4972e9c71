"""Padded batch layouts of :class:`~agentgym.baselines.policies.hf.HFPolicy`.

Prompts are left-padded and responses right-padded, so every response starts in the same
column and only the response positions go through the output layer. Position ids count real
tokens only (``cumsum(mask) − 1``, clamped at 0 on the padding), so padding never changes a
row's result beyond floating-point noise.

    ids, mask, pos = left_padded(rows, pad, device)                 # generation's first call
    ids, mask, pos, targets = scoring_batch(prompts, responses, pad, device)   # scoring
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agentgym.baselines.policies.constrained import AllowedTokens

__all__ = ["as_ids", "flat_allowed", "left_padded", "response_targets", "scoring_batch"]


def as_ids(x: Sequence[int] | torch.Tensor) -> list[int]:
    """The token ids of one row as plain ints.

    Raises:
        ValueError: ``x`` is a tensor that is not 1-D.
    """
    if isinstance(x, torch.Tensor):
        if x.dim() != 1:
            raise ValueError(f"token tensors must be 1-D, got shape {tuple(x.shape)}")
        return [int(i) for i in x.tolist()]
    return [int(i) for i in x]


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that count the real tokens of each row (0 on the left padding)."""
    return (mask.cumsum(-1) - 1).clamp_(min=0)


def left_padded(
    rows: list[list[int]], pad: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Non-empty prompts left-padded with ``pad`` into ``[n, width]``.

    Returns:
        ``(ids, mask, pos)`` on ``device``: token ids, attention mask and position ids.
    """
    n = len(rows)
    width = max(len(r) for r in rows)
    ids = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    return ids, mask, _positions(mask)


def scoring_batch(
    p_rows: list[list[int]], r_rows: list[list[int]], pad: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[left-padded prompt | right-padded response minus its last token]`` per row.

    Args:
        p_rows: the prompts (non-empty).
        r_rows: the responses, at least one of them non-empty.
        pad: the padding id.
        device: where the tensors go.

    Returns:
        ``(ids, mask, pos, targets)`` on ``device``: ``[n, width_p + width_r − 1]`` token
        ids, attention mask and position ids, and the ``[n, width_r]`` response ids
        (right-padded with 0) the last ``width_r`` positions predict.
    """
    n = len(p_rows)
    width_p = max((len(p) for p in p_rows), default=0)
    width_r = max((len(r) for r in r_rows), default=0)
    length = width_p + width_r - 1
    ids = torch.full((n, length), pad, dtype=torch.long)
    mask = torch.zeros((n, length), dtype=torch.long)
    for i, (p, r) in enumerate(zip(p_rows, r_rows, strict=True)):
        seq = p + r[:-1]
        start = width_p - len(p)
        ids[i, start : start + len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[i, start : start + len(seq)] = 1
    ids, mask = ids.to(device), mask.to(device)
    return ids, mask, _positions(mask), response_targets(r_rows, device)


def response_targets(r_rows: list[list[int]], device: torch.device) -> torch.Tensor:
    """The responses right-padded with 0 into ``[n, width_r]``: what scoring predicts."""
    width_r = max((len(r) for r in r_rows), default=0)
    targets = torch.zeros((len(r_rows), width_r), dtype=torch.long)
    for i, r in enumerate(r_rows):
        targets[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return targets.to(device)


def flat_allowed(
    allowed_tokens: Sequence[AllowedTokens | None] | None, r_rows: list[list[int]], width_r: int
) -> list[Sequence[int] | None] | None:
    """The allowed token ids of every ``[n, width_r]`` response position, row after row.

    ``None`` for a free position (a free row, or the right padding); ``None`` overall when no
    row is constrained.
    """
    if allowed_tokens is None:
        return None
    flat: list[Sequence[int] | None] = []
    for row, r in zip(allowed_tokens, r_rows, strict=True):
        flat.extend([None] * len(r) if row is None else list(row))
        flat.extend([None] * (width_r - len(r)))
    return flat
