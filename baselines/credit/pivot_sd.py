"""Pivot-SD: self-distillation on pivot tokens, unlikelihood on failure pivots (CREDIT.md §9).

[D]: derived, the paper was not found (its digest in ``seeds/`` describes masked diffusion
LMs); cross-checks named by CREDIT.md: RLRT "Rebellious Student", AntiSD.

The teacher is the policy itself reading the env's ``privileged_context`` at the head of each
turn's prompt (the teachers' ``"privileged"`` view), scored once per step without gradient
(``score``): its top-``k`` distribution at every sampled position, with a tail bucket. At each
update the current student is scored on the same ids, with gradient. Per token:

* gap ``Δ_t = log π_T(y_t | s_t⁺) − log π_θ(y_t | s_t)`` (student side without gradient);
* information gain ``IG_t = KL(π_T,t ‖ π_θ,t)`` on the top-``k`` + tail (``gain="kl"``), or
  ``|Δ_t|`` (``gain="abs_delta"``);
* pivots ``P``: per sequence (one trajectory, all its policy-masked response tokens, every
  turn) the ``⌈q · n⌉`` tokens of highest gain (ties: the earlier token);
* ``L_SD = mean_{t ∈ P, R > threshold} KL(π_T,t ‖ π_θ,t)``: distillation on the pivots of
  successful rollouts;
* ``L_UL = −mean_{t ∈ P, R ≤ threshold, Δ_t < −τ} log(1 − π_θ(y_t | s_t))``: targeted
  unlikelihood on the failure pivots the teacher strongly rejects;
* auxiliary loss ``λ_SD L_SD + λ_UL L_UL`` (a term without tokens is 0). The RL advantage is
  untouched (only ``score`` and ``aux_loss``), so it composes with any estimator.

Derived choices (the ``Config`` fields):

* ``q = 0.1``: the upper end of CREDIT.md's "5–10%" per sequence; the pivots are chosen anew
  at each update from the current student, so they follow it over epochs and mini-batches;
* ``k = 16``: enough of the distribution of an agent's short actions for the KL, with the
  tail bucket keeping both sides proper distributions;
* ``τ = 1.0``: the teacher gives the sampled token under ``e^{-1} ≈ 37%`` of the student's
  probability before it is pushed down;
* ``λ_SD = λ_UL = 0.1``: both terms are means over few tokens, each a KL or an NLL of order
  1, next to a policy loss of the advantages' scale;
* success: ``R_i > threshold = 0.5`` (binary outcomes: won; graded ones such as the shop's:
  more than half the credit); everything else is a failure;
* a certain student token (``log π_θ = 0``) is clamped to ``1 − 10⁻⁷`` in the unlikelihood.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from agentgym.baselines.credit import Batch, Context, Key, register
from agentgym.baselines.credit._privileged import (
    PrivilegedTeacher,
    check_context,
    log1mexp,
    masked_mean,
)
from agentgym.baselines.divergence import kl
from agentgym.baselines.teachers import PRIVILEGED, Teachers
from agentgym.core.errors import BadInput

GAINS = ("kl", "abs_delta")


def select_pivots(gain: Tensor, mask: Tensor, seq_ids: Tensor, q: float) -> Tensor:
    """Bool ``[T]``: per sequence, its ``⌈q · n⌉`` masked tokens of highest ``gain``.

    ``n`` is the sequence's masked token count; ties go to the earlier token.
    """
    pivots = torch.zeros(gain.shape, dtype=torch.bool, device=gain.device)
    keep = mask.to(gain.device).bool()
    seq_ids = seq_ids.to(gain.device)
    for s in torch.unique(seq_ids).tolist():
        idx = torch.nonzero((seq_ids == s) & keep).squeeze(-1)
        n = math.ceil(q * len(idx) - 1e-9)
        if n <= 0:
            continue
        order = torch.sort(gain[idx].detach(), descending=True, stable=True).indices
        pivots[idx[order[:n]]] = True
    return pivots


def sd_term(divergence: Tensor, chosen: Tensor) -> Tensor | None:
    """``mean_{t chosen} KL_t``, or None without a chosen token."""
    return divergence[chosen].mean() if bool(chosen.any()) else None


def ul_term(student_logp: Tensor, chosen: Tensor) -> Tensor | None:
    """``−mean_{t chosen} log(1 − π_θ(y_t))``, or None without a chosen token."""
    return -log1mexp(student_logp[chosen]).mean() if bool(chosen.any()) else None


@dataclass
class PivotTokens:
    """Pivot-SD's per-token terms over a list of turns, flat ``[T]``."""

    student: Tensor
    """log π_θ(y_t | s_t), the current policy's (with gradient)."""
    divergence: Tensor
    """KL(π_T,t ‖ π_θ,t) on the teacher's top-k + tail (gradient through the student)."""
    delta: Tensor
    """Δ_t = log π_T − sg[log π_θ]."""
    gain: Tensor
    """the information gain the pivots are ranked by (no gradient)."""
    mask: Tensor
    """the policy mask."""
    pivots: Tensor
    """bool: the pivots."""
    sd: Tensor
    """bool: the pivots of successful rollouts (distilled)."""
    ul: Tensor
    """bool: the failure pivots with Δ_t < −τ (pushed down)."""


@register("pivot_sd")
class PivotSD(PrivilegedTeacher):
    """Pivot-SD ([D]): distil the privileged view on successes' pivots, unlearn failures'."""

    @dataclass(frozen=True)
    class Config:
        """Pivot-SD's settings (all derived, see the module doc)."""

        q: float = 0.1
        """fraction of each sequence's response tokens taken as pivots (at least one)."""
        k: int = 16
        """teacher top-k ids the KL is taken on, plus a tail bucket."""
        tau: float = 1.0
        """a failure pivot is pushed down when Δ_t < −τ (nats)."""
        sd_coef: float = 0.1
        """λ_SD, weight of the distillation term on successes' pivots."""
        ul_coef: float = 0.1
        """λ_UL, weight of the unlikelihood term on failures' pivots."""
        gain: str = "kl"
        """information gain ranking the tokens: "kl" (KL(π_T ‖ π_θ) on top-k + tail) or
        "abs_delta" (|Δ_t|)."""
        threshold: float = 0.5
        """a rollout succeeded when its outcome R_i > threshold."""
        context: str = "env"
        """the teacher's privileged text: "env" (the env's privileged_context)."""

        def __post_init__(self) -> None:
            """Refuse an unknown gain or context, q outside (0, 1], k < 1 or negative weights."""
            if self.gain not in GAINS:
                raise BadInput(f"pivot_sd gain must be one of {GAINS}, got {self.gain!r}")
            check_context("pivot_sd", self.context)
            if not 0.0 < self.q <= 1.0:
                raise BadInput(f"pivot_sd q must be in (0, 1], got {self.q}")
            if self.k < 1:
                raise BadInput(f"pivot_sd k must be >= 1, got {self.k}")
            if self.sd_coef < 0 or self.ul_coef < 0:
                raise BadInput("pivot_sd sd_coef and ul_coef must be >= 0")

    def score(self, batch: Batch, ctx: Context) -> None:
        """The teacher's top-k over every turn of the step, without gradient."""
        ctx.need_teachers().topk(batch, batch.keys(), PRIVILEGED, self.cfg.k)

    def tokens(self, batch: Batch, teachers: Teachers, keys: list[Key]) -> PivotTokens:
        """The per-token terms of ``keys`` (flat, in ``keys``' order): gains and pivots."""
        cfg = self.cfg
        dists = teachers.topk(batch, keys, PRIVILEGED, cfg.k)
        students = teachers.student(batch, keys, dists)
        student = torch.cat([s.sampled for s in students])
        device = student.device
        pairs = zip(dists, students, strict=True)
        divergence = torch.cat([kl(t.with_tail().to(device), s.with_tail()) for t, s in pairs])
        delta = torch.cat([d.sampled for d in dists]).to(device) - student.detach()
        gain = divergence.detach() if cfg.gain == "kl" else delta.abs()
        mask, seq_ids, _ = (x.to(device) for x in batch.token_index(keys))
        pivots = select_pivots(gain, mask, seq_ids, cfg.q)
        won = (batch.outcomes().to(device) > cfg.threshold)[seq_ids]
        return PivotTokens(
            student=student,
            divergence=divergence,
            delta=delta,
            gain=gain,
            mask=mask,
            pivots=pivots,
            sd=pivots & won,
            ul=pivots & ~won & (delta < -cfg.tau),
        )

    def aux_loss(self, batch: Batch, ctx: Context) -> tuple[Tensor, dict[str, float]] | None:
        """``λ_SD L_SD + λ_UL L_UL`` on the mini-batch, and its pivot statistics."""
        cfg, keys = self.cfg, batch.keys()
        if not keys:
            return None
        t = self.tokens(batch, ctx.need_teachers(), keys)
        L_sd, L_ul = sd_term(t.divergence, t.sd), ul_term(t.student, t.ul)
        loss = t.student.sum() * 0.0  # a zero on the graph when neither term has a token
        if L_sd is not None:
            loss = loss + cfg.sd_coef * L_sd
        if L_ul is not None:
            loss = loss + cfg.ul_coef * L_ul
        metrics = {
            "pivot_sd/loss": float(loss.detach()),
            "pivot_sd/loss_sd": float(L_sd.detach()) if L_sd is not None else 0.0,
            "pivot_sd/loss_ul": float(L_ul.detach()) if L_ul is not None else 0.0,
            "pivot_sd/pivots": float(t.pivots.sum()),
            "pivot_sd/sd_tokens": float(t.sd.sum()),
            "pivot_sd/ul_tokens": float(t.ul.sum()),
            "pivot_sd/gain_mean": float(masked_mean(t.gain, t.mask)),
            "pivot_sd/gain_pivot_mean": float(masked_mean(t.gain, t.pivots)),
        }
        return loss, metrics
