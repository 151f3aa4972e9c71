"""Divergences between two distributions kept on a shared top-k support plus a tail bucket.

The teachers (:mod:`agentgym.baselines.teachers`) keep, at each sampled position, a
teacher's top-``k`` ids and log-probs and the student's log-probs on the same ids; the mass
outside the support is one more outcome, the tail. On those ``k + 1`` outcomes both are
proper distributions, so every divergence below is exact for them and, as ``k`` grows to the
vocabulary, tends to the full-vocabulary divergence. All take log-probs ``[L, k + 1]``
(:meth:`~agentgym.baselines.teachers.TokenDist.with_tail`) and return ``[L]``, one value per
position, differentiable in both arguments.
"""

from __future__ import annotations

import torch
from torch import Tensor

RHO_KL = 1e-4
"""|ρ − 1| below which the Rényi divergence is computed as its limit, the KL divergence."""


def kl(logp: Tensor, logq: Tensor) -> Tensor:
    """``KL(P ‖ Q) = Σ_v P(v) (log P(v) − log Q(v))`` per position."""
    return (logp.exp() * (logp - logq)).sum(-1)


def renyi(logp: Tensor, logq: Tensor, rho: float) -> Tensor:
    """Rényi divergence of order ``rho``: ``(1 / (ρ − 1)) log Σ_v P(v)^ρ Q(v)^{1−ρ}``.

    ``ρ → 1`` is the KL divergence (used within :data:`RHO_KL` of 1); ``ρ = 0.5`` is
    ``−2 log`` of the Bhattacharyya coefficient. Computed in log space (``logsumexp``).
    """
    if rho <= 0:
        raise ValueError(f"the Rényi order must be > 0, got {rho}")
    if abs(rho - 1.0) < RHO_KL:
        return kl(logp, logq)
    return torch.logsumexp(rho * logp + (1.0 - rho) * logq, dim=-1) / (rho - 1.0)


def geometric(logp: Tensor, logq: Tensor, alpha: float) -> Tensor:
    """``log`` of the normalised geometric mean ``P^α Q^{1−α}`` on the same outcomes."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    mixed = alpha * logp + (1.0 - alpha) * logq
    return mixed - torch.logsumexp(mixed, dim=-1, keepdim=True)
