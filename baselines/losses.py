"""Pure loss and advantage kernels: tensors in, tensors out, no batch objects, no config.

Shapes: ``T`` = number of tokens (or steps) of a flat sequence; kernels that say ``[..., T]``
also accept leading batch dimensions. Formulas and names follow CREDIT.md §0-§1; ``done`` is
never one flag: ``terminated`` stops bootstrapping, ``truncated`` only ends the episode
(TorchRL ``objectives/value/functional.py``, CleanRL #457).
"""

from __future__ import annotations

import torch
from torch import Tensor

AGGREGATIONS = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "constant-norm",
    "turn-normalized",
)
"""Loss aggregation modes (CREDIT.md §0)."""


def clipped_surrogate(
    logp: Tensor, logp_old: Tensor, adv: Tensor, eps_lo: float = 0.2, eps_hi: float = 0.2
) -> Tensor:
    """PPO's clipped surrogate as a per-token loss (Schulman et al. 2017, arXiv 1707.06347).

    ``ρ_t = exp(logp − logp_old)``; loss_t = ``−min(ρ_t A_t, clip(ρ_t, 1−ε_lo, 1+ε_hi) A_t)``.
    Asymmetric ε (``eps_hi > eps_lo``) is DAPO's clip-higher.

    Args:
        logp: [T] log π_θ(y_t), with grad.
        logp_old: [T] log π_old(y_t).
        adv: [T] advantages A_t.
        eps_lo: ε_lo, the clip range below 1 (ratios under ``1 − eps_lo`` are clipped).
        eps_hi: ε_hi, the clip range above 1 (ratios over ``1 + eps_hi`` are clipped).

    Returns:
        [T] token losses, to be reduced by :func:`aggregate`.
    """
    ratio = torch.exp(logp - logp_old)
    pg_losses = -adv * ratio
    pg_losses_clipped = -adv * torch.clamp(ratio, 1.0 - eps_lo, 1.0 + eps_hi)
    return torch.maximum(pg_losses, pg_losses_clipped)


def _segment_sum(x: Tensor, ids: Tensor) -> Tensor:
    """Sum ``x`` [T] per distinct id of ``ids`` [T]; returns [n_ids] (order of sorted ids)."""
    _, inverse = torch.unique(ids, return_inverse=True)
    n = int(inverse.max()) + 1 if inverse.numel() else 0
    return torch.zeros(n, dtype=x.dtype, device=x.device).index_add(0, inverse, x)


def aggregate(
    token_loss: Tensor,
    mask: Tensor,
    mode: str = "token-mean",
    *,
    seq_ids: Tensor | None = None,
    turn_ids: Tensor | None = None,
    constant: float | None = None,
) -> Tensor:
    """Reduce token losses to a scalar with one of :data:`AGGREGATIONS` (CREDIT.md §0).

    With ``ℓ_t`` the token loss, ``m_t`` the mask, ``S`` the sequences (rollouts) and ``K`` the
    turns that have at least one masked token:

    * ``token-mean``: ``Σ_t m_t ℓ_t / Σ_t m_t`` (DAPO, verl's default).
    * ``seq-mean-token-mean``: ``1/|S| Σ_s (Σ_{t∈s} m_t ℓ_t / Σ_{t∈s} m_t)`` (GRPO, 2402.03300).
    * ``seq-mean-token-sum``: ``1/|S| Σ_s Σ_{t∈s} m_t ℓ_t``.
    * ``constant-norm``: ``1/|S| Σ_s Σ_{t∈s} m_t ℓ_t / constant`` (Dr. GRPO, 2503.20783, as in
      its code: per-response sums over a fixed constant such as the generation budget, then a
      mean over responses; no length bias).
    * ``turn-normalized``: ``1/|S| Σ_s (Σ_{t∈s} m_t ℓ_t / |K_s|)``: each rollout's token sum
      over its active turns ``K_s``, then a mean over rollouts (TSBPO, CREDIT.md §5).

    Masked-out tokens never contribute, even if ``token_loss`` is nan or inf there.

    Args:
        token_loss: [T] or [B, T] token losses.
        mask: same shape, 1/True where the token counts.
        mode: one of :data:`AGGREGATIONS`.
        seq_ids: [T] sequence index per token (needed by the ``seq-*`` modes and
            ``constant-norm``); for [B, T] inputs the row is the default.
        turn_ids: [T] turn index per token, unique across the batch (``turn-normalized``, with
            ``seq_ids``); for [B, T] inputs the row is the default (per-step layout: one row
            per turn).
        constant: the divisor of ``constant-norm``.

    Returns:
        A scalar tensor (0 when no token is masked in).
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {mode!r}: choose one of {', '.join(AGGREGATIONS)}")
    if token_loss.dim() == 2:
        rows = torch.arange(token_loss.shape[0], device=token_loss.device)[:, None]
        rows = rows.expand_as(token_loss)
        seq_ids = rows if seq_ids is None else seq_ids
        turn_ids = rows if turn_ids is None else turn_ids
    m = mask.reshape(-1).to(torch.bool)
    loss = torch.where(m, token_loss.reshape(-1), 0.0)
    m = m.to(loss.dtype)

    if mode == "token-mean":
        return loss.sum() / m.sum().clamp_min(1.0)
    if seq_ids is None:
        raise ValueError(f"{mode} aggregation needs seq_ids")
    seq_ids = seq_ids.reshape(-1)
    seq_loss = _segment_sum(loss, seq_ids)
    if mode == "turn-normalized":
        if turn_ids is None:
            raise ValueError("turn-normalized aggregation needs turn_ids")
        turns = _active_turns_per_seq(m, seq_ids, turn_ids.reshape(-1))
        active = turns > 0
        return (seq_loss[active] / turns[active]).sum() / active.sum().clamp_min(1)
    seq_len = _segment_sum(m, seq_ids)
    n_seqs = (seq_len > 0).sum().clamp_min(1)
    if mode == "seq-mean-token-mean":
        return (seq_loss / seq_len.clamp_min(1.0)).sum() / n_seqs
    if mode == "seq-mean-token-sum":
        return seq_loss.sum() / n_seqs
    if constant is None or constant <= 0:
        raise ValueError(f"constant-norm aggregation needs a positive constant, got {constant}")
    return seq_loss.sum() / (constant * n_seqs)


def _active_turns_per_seq(m: Tensor, seq_ids: Tensor, turn_ids: Tensor) -> Tensor:
    """The number of active turns of each sequence (sorted id order, like :func:`_segment_sum`).

    A turn is active when at least one of its tokens is masked in.
    """
    seqs, seq_index = torch.unique(seq_ids, return_inverse=True)
    turns, turn_index = torch.unique(turn_ids, return_inverse=True)
    active = (_segment_sum(m, turn_ids) > 0).to(m.dtype)
    seq_of_turn = torch.zeros(len(turns), dtype=torch.long, device=m.device)
    seq_of_turn.scatter_(0, turn_index, seq_index)  # a turn lies in one sequence
    return torch.zeros(len(seqs), dtype=m.dtype, device=m.device).index_add(0, seq_of_turn, active)


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(π_θ‖π_ref), verl's ``low_var_kl``.

    From Schulman, "Approximating KL divergence", 2020: with ``x = ref_logp − logp``,
    ``k3 = eˣ − x − 1 ≥ 0``.

    Clamped like verl: ``x`` to [−20, 20] and the result to [−10, 10], so one outlier token
    cannot blow up the loss.

    Args:
        logp: [..., T] log π_θ(y_t).
        ref_logp: [..., T] log π_ref(y_t).

    Returns:
        [..., T] k3 per token (0 where the log-probs are equal).
    """
    x = torch.clamp(ref_logp - logp, min=-20.0, max=20.0)
    return torch.clamp(torch.exp(x) - x - 1.0, min=-10.0, max=10.0)


def _td_errors(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float,
    lam: float,
) -> tuple[Tensor, Tensor]:
    """TD errors δ_t = r_t + γ V(s_{t+1}) (1 − terminated_t) − V(s_t), and trace factors.

    The trace factor c_t = γλ (1 − done_t) links step t to step t+1.
    """
    terminated = terminated.to(torch.bool)
    done = terminated | truncated.to(torch.bool)
    delta = rewards + gamma * next_values * (~terminated) - values
    c = gamma * lam * (~done).to(rewards.dtype)
    return delta, c


def gae_loop(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation, the reference loop.

    Schulman et al. 2016, arXiv 1506.02438; see :func:`gae` for the arguments. Kept as the
    readable definition that the vectorised version is tested against.
    """
    delta, c = _td_errors(rewards, values, next_values, terminated, truncated, gamma, lam)
    advantages = torch.zeros_like(delta)
    lastgaelam = torch.zeros_like(delta[..., 0])
    for t in reversed(range(delta.shape[-1])):
        lastgaelam = delta[..., t] + c[..., t] * lastgaelam
        advantages[..., t] = lastgaelam
    return advantages, advantages + values


def gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over a flat sequence of policy-token steps, vectorised.

    Schulman et al. 2016, arXiv 1506.02438.

    ``δ_t = r_t + γ V(s_{t+1})(1 − terminated_t) − V(s_t)`` and
    ``A_t = δ_t + γλ (1 − done_t) A_{t+1}`` with ``done = terminated | truncated``: a truncated
    end bootstraps from ``next_values`` and a terminated one does not. Several episodes may be
    concatenated; each ends where ``done`` is set. Observation tokens must be removed by the
    caller (CREDIT.md §1.4: the next value of a turn's last token is the value at the first
    policy token of the next turn, i.e. simply the next step here).

    The linear recurrence is solved by a reverse Hillis-Steele scan: after pass ``j`` each step
    holds the affine map of the next ``2^j`` steps, so ``⌈log2 T⌉`` vector passes replace ``T``
    Python iterations; only products of trace factors ≤ 1 occur, so it is as stable as the loop.

    Args:
        rewards: [..., T] r_t.
        values: [..., T] V(s_t).
        next_values: [..., T] V(s_{t+1}); at an episode's last step, the value of the state
            after it (used only if that step is truncated, not terminated).
        terminated: [..., T] bool, the episode reached a terminal state after step t.
        truncated: [..., T] bool, the episode was cut after step t (time limit, batch end).
        gamma: discount γ.
        lam: GAE λ.

    Returns:
        ``(advantages, returns)``, both [..., T], with ``returns = advantages + values``.
    """
    a, b = _td_errors(rewards, values, next_values, terminated, truncated, gamma, lam)
    T = a.shape[-1]
    k = 1
    while k < T:
        # compose step t's map with the map starting k steps later: A ↦ a_t + b_t (a_{t+k} + ...)
        a_next, b_next = a.clone(), b.clone()
        a_next[..., : T - k] = a[..., : T - k] + b[..., : T - k] * a[..., k:]
        b_next[..., : T - k] = b[..., : T - k] * b[..., k:]
        b_next[..., T - k :] = 0.0  # those maps already reach the end of the sequence
        a, b = a_next, b_next
        k *= 2
    return a, a + values


def value_loss(values: Tensor, old_values: Tensor, returns: Tensor, clip: float | None) -> Tensor:
    """Clipped value loss per token (PPO as in verl/CleanRL).

    ``½ max((V − G)², (clip(V, V_old − c, V_old + c) − G)²)``, or ``½ (V − G)²`` if clip is None.

    Args:
        values: [T] V_θ(s_t), with grad.
        old_values: [T] V at rollout time.
        returns: [T] targets G_t.
        clip: the value clip c (0.5 in verl), or None.

    Returns:
        [T] token losses, to be reduced by :func:`aggregate`.
    """
    vf_losses = (values - returns) ** 2
    if clip is None:
        return 0.5 * vf_losses
    values_clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    return 0.5 * torch.maximum(vf_losses, (values_clipped - returns) ** 2)


def whiten(x: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """Whiten ``x`` over the masked entries: ``(x − mean) / (std + eps)`` with the unbiased std.

    Entries outside the mask become 0 (the convention for advantages of non-policy tokens).

    Args:
        x: [...] values.
        mask: same shape, 1/True where the entry counts.
        eps: added to the std, so that equal entries divide by ``eps`` rather than 0.
    """
    m = mask.to(torch.bool)
    n = m.sum()
    if n == 0:
        return torch.zeros_like(x)
    xm = x[m]
    std = xm.std() if n > 1 else torch.zeros((), dtype=x.dtype, device=x.device)
    return torch.where(m, (x - xm.mean()) / (std + eps), 0.0)
