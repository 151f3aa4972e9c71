"""The policy update: the clipped surrogate (+ KL), back-propagated in bounded micro-batches.

Every aggregation of :func:`~agentgym.baselines.losses.aggregate` is linear in the token
losses once the mask and the sequence and turn ids are fixed: the loss is ``Σ_t w_t ℓ_t``
with weights ``w_t`` that depend on the whole mini-batch (its token count, its sequences'
lengths, their active turns) but not on ``ℓ``. :func:`policy_backward` takes those weights
from the whole mini-batch once (the gradient of the aggregation at any point), then scores
and back-propagates the turns in micro-batches of at most ``cfg.rl.micro_batch_tokens``
padded tokens, each contributing ``Σ_{t in micro-batch} w_t ℓ_t``: the gradients add up to
the whole mini-batch's, while only one micro-batch's activations are alive at a time (verl's
``ppo_micro_batch_size``, with the global token normalisation its ``loss_agg_mode`` needs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentgym.baselines.batch import Batch, Key, StepContext, Turn
from agentgym.baselines.config import TrainConfig
from agentgym.baselines.losses import aggregate, clipped_surrogate, kl_k3
from agentgym.baselines.scoring import turn_logprobs


def policy_loss(batch: Batch, policy: Any, ref: Any, plan: Any, cfg: TrainConfig) -> tuple:
    """The clipped surrogate over the turns that have advantages, plus the k3 KL to the reference.

    The surrogate is aggregated as the plan says. Returns (loss, metrics), the loss's graph
    over the whole batch (:func:`policy_backward` bounds the memory of the same loss).
    """
    keys = list(batch.advantages or {})
    if not keys:
        return torch.zeros((), requires_grad=True), {"tokens": 0}
    weights = _token_weights(batch, keys, plan, cfg)
    loss, parts = _chunk_loss(batch, keys, weights, policy, ref, cfg)
    return loss, _metrics([parts], cfg)


def policy_backward(
    batch: Batch, policy: Any, ref: Any, plan: Any, cfg: TrainConfig
) -> tuple[float, dict[str, float]]:
    """Back-propagate :func:`policy_loss` in micro-batches; returns (loss value, metrics).

    The gradients equal ``policy_loss(...)[0].backward()``'s (to float rounding) whatever the
    micro-batch size; each micro-batch holds at most ``cfg.rl.micro_batch_tokens`` padded
    tokens (a turn longer than that is a micro-batch of its own; 0: one pass).

    Without a KL term, a turn whose advantages are all zero adds nothing to the loss or its
    gradient (the clipped surrogate of ``A = 0`` is 0 at every ratio), so it is not scored:
    in sparse-reward training every group whose rollouts all failed is skipped. The ratio
    statistics are then over the scored tokens (``tokens`` still counts all of them); when
    no turn is left, one is scored so that the same parameters receive their zero gradient.
    """
    keys = list(batch.advantages or {})
    if not keys:
        return 0.0, {"tokens": 0}
    weights = _token_weights(batch, keys, plan, cfg)
    scored = [k for k in keys if _contributes(batch, k, weights[k], ref, cfg)] or keys[:1]
    total, parts = 0.0, []
    for chunk in micro_batches(batch, scored, cfg.rl.micro_batch_tokens):
        loss, part = _chunk_loss(batch, chunk, weights, policy, ref, cfg)
        if loss.requires_grad:  # a chunk of empty responses has nothing to differentiate
            loss.backward()
        total += float(loss.detach())
        parts.append(part)
    metrics = _metrics(parts, cfg)
    metrics["tokens"] = float(batch.token_index(keys)[0].sum())
    return total, metrics


def _contributes(batch: Batch, key: Key, weights: torch.Tensor, ref: Any, cfg: TrainConfig) -> bool:
    """Whether ``key``'s tokens can move the loss: a KL term, or a weighted nonzero advantage."""
    if ref is not None and cfg.rl.kl_coef > 0:
        return True
    adv = (batch.advantages or {})[key]
    return bool(((adv != 0) & (weights.to(adv.device) != 0)).any())


def micro_batches(batch: Batch, keys: list[Key], limit: int) -> list[list[Key]]:
    """``keys`` cut into runs whose rows hold at most ``limit`` padded tokens.

    A run's cost is its rows times its longest row (prompt + response), as the padded
    scoring batch lays it out. A per-step turn is a row of its own; a concat rollout's turns
    are one row (its last turn's prompt and response), so they stay together. Rows are taken
    from the shortest up, so rows of like length share a run and little is padding; a row
    longer than ``limit`` is a run of its own. ``limit`` <= 0: one run, in ``keys``' order.
    """
    if limit <= 0:
        return [keys]
    runs: list[list[Key]] = []
    current: list[Key] = []
    rows = 0
    for row in sorted(_rows(batch, keys), key=lambda r: r.length):
        if current and (rows + 1) * row.length > limit:
            runs.append(current)
            current, rows = [], 0
        current.extend(row.keys)
        rows += 1
    runs.append(current)
    return runs


@dataclass
class _Row:
    """One row of the scoring batch: the turns it scores and its length in tokens."""

    keys: list[Key]
    length: int


def _rows(batch: Batch, keys: list[Key]) -> list[_Row]:
    """The scoring rows of ``keys`` in order: one per turn, one per concat rollout's run."""
    rows: list[_Row] = []
    for key in keys:
        turn = batch.turn(key)
        length = len(turn.prompt_ids) + len(turn.response_ids)
        prompt = getattr(batch.trajectories[key[0]], "prompt", None)
        concat = getattr(prompt, "layout", "") == "concat"
        if concat and rows and rows[-1].keys[-1][0] == key[0]:
            rows[-1].keys.append(key)  # the same sequence, extended to this turn
            rows[-1].length = length
        else:
            rows.append(_Row([key], length))
    return rows


def _token_weights(
    batch: Batch, keys: list[Key], plan: Any, cfg: TrainConfig
) -> dict[Key, torch.Tensor]:
    """Per key, ``w_t`` with ``aggregate(ℓ) = Σ_t w_t ℓ_t`` over ``keys``' tokens (module doc)."""
    mask, seq_ids, turn_ids = batch.token_index(keys)
    probe = torch.zeros(mask.shape, device=mask.device, requires_grad=True)
    agg = aggregate(
        probe,
        mask,
        plan.aggregation,
        seq_ids=seq_ids,
        turn_ids=turn_ids,
        constant=cfg.rl.constant_norm,
    )
    if agg.requires_grad:
        (flat,) = torch.autograd.grad(agg, probe)
    else:  # no token masked in: nothing to weigh
        flat = torch.zeros(mask.shape, device=mask.device)
    sizes = [len(batch.turn(k).mask()) for k in keys]
    return dict(zip(keys, flat.split(sizes), strict=True))


def _chunk_loss(
    batch: Batch,
    keys: list[Key],
    weights: dict[Key, torch.Tensor],
    policy: Any,
    ref: Any,
    cfg: TrainConfig,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted loss of ``keys``' tokens, and sums for the metrics."""
    logp = torch.cat(turn_logprobs(policy, batch, keys, grad=True))
    w = torch.cat([weights[k] for k in keys]).to(logp.device)
    logp_old = torch.cat([_behaviour_logp(batch.turn(k)) for k in keys]).to(logp.device)
    adv = batch.flat(batch.advantages or {}, keys).to(logp.device)
    mask = batch.token_index(keys)[0].to(logp.device).bool()
    token_loss = clipped_surrogate(logp, logp_old, adv, cfg.rl.clip, cfg.rl.clip)
    loss = (w * torch.where(mask, token_loss, 0.0)).sum()
    parts = _ratio_sums(logp, logp_old, adv, mask, cfg.rl.clip)
    if ref is not None and cfg.rl.kl_coef > 0:
        with torch.no_grad():
            ref_logp = torch.cat(turn_logprobs(ref, batch, keys, grad=False)).to(logp.device)
        kl = (w * torch.where(mask, kl_k3(logp, ref_logp), 0.0)).sum()
        loss = loss + cfg.rl.kl_coef * kl
        parts["kl"] = float(kl.detach())
    return loss, parts


def _ratio_sums(
    logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, eps: float
) -> dict[str, float]:
    """Token sums of how far the policy moved from the sampler, over the masked tokens.

    ``clip_frac``: tokens whose surrogate is clipped (ratio past ``1 ± eps`` on the side the
    advantage pushes toward, so their gradient is zero); ``approx_kl``: the k3 estimate of
    KL(π_old ‖ π_θ); ``tokens``: the count. :func:`_metrics` divides the first two by it.
    """
    with torch.no_grad():
        ratio = torch.exp(logp - logp_old)
        clipped = ((adv > 0) & (ratio > 1 + eps)) | ((adv < 0) & (ratio < 1 - eps))
        m = mask.float()
        return {
            "tokens": float(m.sum()),
            "clip_frac": float((clipped.float() * m).sum()),
            "approx_kl": float((kl_k3(logp_old, logp) * m).sum()),
        }


def _metrics(parts: Sequence[dict[str, float]], cfg: TrainConfig) -> dict[str, float]:
    """Per-token means of the ratio statistics over the micro-batches, the KL's total."""
    tokens = sum(p["tokens"] for p in parts)
    n = max(tokens, 1.0)
    out = {
        "tokens": tokens,
        "clip_frac": sum(p["clip_frac"] for p in parts) / n,
        "approx_kl": sum(p["approx_kl"] for p in parts) / n,
    }
    if any("kl" in p for p in parts):
        out["kl"] = sum(p.get("kl", 0.0) for p in parts)
    return out


def _behaviour_logp(turn: Turn) -> torch.Tensor:
    """``logp_old`` of a turn (the sampler records it; an edited rollout's is rescored)."""
    if turn.logp_old is None:
        raise ValueError("a turn reached the policy loss without its behaviour log-probs")
    return turn.logp_old


def adamw(params: Any, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """``torch.optim.AdamW``, its fused kernel where torch has one for these parameters.

    The fused step is the same update in one kernel per dtype and device (a third of the
    time of the per-tensor loop on a small model); without it, the per-tensor loop.
    """
    params = list(params)
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError):  # a device or dtype the fused kernel does not cover
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def update(
    batch: Batch,
    policy: Any,
    ref: Any,
    plan: Any,
    optimizer: Any,
    cfg: TrainConfig,
    ctx: StepContext,
) -> dict[str, float]:
    """PPO's updates on one batch: ``cfg.rl.epochs`` passes, each ``cfg.rl.minibatches`` steps.

    A pass shuffles the trajectories (with the run's generator, only when there are several
    mini-batches) and splits them into mini-batches of whole trajectories, so per-sequence
    aggregations see every token of a rollout. The first step's ratio is 1; later steps see
    the policy move and the clip bind (verl's ``ppo_epochs`` and mini-batches, TRL's
    ``num_iterations``). Each mini-batch's loss is back-propagated in micro-batches
    (:func:`policy_backward`), then the plan's auxiliary losses on the whole mini-batch.

    Returns:
        The metrics: ``tokens`` once per batch, the others averaged over the steps.
    """
    n, k = len(batch.trajectories), cfg.rl.minibatches
    seen: dict[str, list[float]] = {}
    for epoch in range(cfg.rl.epochs):
        order = ctx.need_rng().permutation(n) if k > 1 else np.arange(n)
        for chunk in np.array_split(order, min(k, max(n, 1))):
            mini = batch if k == 1 else batch.subset(sorted(int(i) for i in chunk))
            optimizer.zero_grad()
            loss, metrics = policy_backward(mini, policy, ref, plan, cfg)
            for aux, aux_metrics in plan.run("aux_loss", mini, ctx):
                aux.backward()
                loss += float(aux.detach())
                metrics.update(aux_metrics)
            plan.run("grad_hook", mini, ctx)
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.rl.max_grad_norm)
            optimizer.step()
            metrics["loss"] = loss
            if epoch > 0:
                metrics.pop("tokens", None)
            for name, value in metrics.items():
                seen.setdefault(name, []).append(value)
    return {
        name: float(sum(v)) if name == "tokens" else float(np.mean(v)) for name, v in seen.items()
    }
