"""Rényi OPSD: on-policy self-distillation toward a reference-anchored target (CREDIT.md §14).

[D]: derived, the paper was not found (cross-checks: G-OPD, arXiv 2602.12125; OPSD, arXiv
2601.18734).

At every sampled response position ``t`` of every turn:

* the privileged self-teacher ``π_T(· | s⁺)``: the current policy, no gradient, on the turn's
  prompt rebuilt with the env's ``privileged_context`` at its head (the teachers'
  ``"privileged"`` view); its top-``k`` ids are the support, plus one tail bucket;
* the frozen reference ``π_ref(· | s)`` (the warm start, or ``--reference DIR``) on the
  turn's own prompt, scored on the *same* ids (and its own tail);
* the target ``q_α ∝ π_T^α · π_ref^{1−α}`` on those ``k + 1`` outcomes
  (:func:`~agentgym.baselines.divergence.geometric`);
* the loss ``D_ρ(q_α ‖ π_θ) = (1/(ρ−1)) log Σ_v q_α(v)^ρ π_θ(v | s)^{1−ρ}``
  (:func:`~agentgym.baselines.divergence.renyi`; ``ρ → 1`` is the KL), with ``π_θ`` the
  current policy on its own prompt, with gradient, on the same support + tail.

``L_aux = λ · mean_t D_ρ`` over the policy-mask tokens of the (mini-)batch. Teacher and
reference are constants (stop-gradient): only the student side ``π_θ`` is trained.

Modes: ``"add"`` (default) adds ``L_aux`` to the RL loss; ``"replace"`` switches the RL
surrogate off by zeroing every advantage in the ``shape`` hook (the clipped surrogate of
``A = 0`` is 0 with zero gradient), so only ``λ · D_ρ`` (and the trainer's KL penalty, if
``--kl-coef`` is set) trains the policy.

Choices where the spec leaves them open ([D]):

* ``rho = 0.5``: an order below 1 weighs each outcome by ``q^ρ π_θ^{1−ρ}``, i.e. it raises
  the teacher/student density ratio to the power ρ < 1, damping the gradient of positions
  where the ratio is extreme (the digest's "adaptive clipping" reading); ``D_0.5`` is
  ``−2 log`` of the Bhattacharyya coefficient, symmetric-like and finite even where the two
  disagree sharply. ``rho = 1`` gives the forward-KL OPSD.
* ``alpha = 0.5``: an even geometric mix of self-teacher and reference; ``alpha = 1`` is plain
  privileged self-distillation, ``alpha = 0`` distils toward the reference alone.
* ``coef = 0.1`` (λ), ``k = 16``: SDAR-like auxiliary weight and a support that holds most
  of a small model's mass; the tail bucket keeps both sides proper distributions.
* The geometric mix is taken on the ``k + 1`` outcomes, the tail bucket as one outcome.
* ``context = "none"`` (an ablation) gives the teacher the student's own prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, register
from agentgym.baselines.divergence import geometric, renyi
from agentgym.baselines.teachers import ContextFn, Teachers, TokenDist, log_distribution
from agentgym.core.errors import BadInput

MODES = ("add", "replace")
CONTEXTS = ("env", "none")


def opsd_divergence(
    teacher: Tensor, reference: Tensor, student: Tensor, alpha: float, rho: float
) -> Tensor:
    """``D_ρ(q_α ‖ student)`` per position, ``q_α ∝ teacher^α reference^{1−α}``.

    All three are ``[L, k + 1]`` log-prob tables on one support + tail; the teacher and the
    reference are detached (stop-gradient), so only ``student`` receives gradient.
    """
    target = geometric(teacher.detach(), reference.detach(), alpha)
    return renyi(target, student, rho)


def reference_on_support(
    teachers: Teachers, batch: Batch, keys: Sequence[Key], support: Sequence[TokenDist], tag: str
) -> list[TokenDist]:
    """The frozen reference on each turn's own prompt, on ``support[i].ids`` (no grad).

    Scored like :meth:`Teachers.topk` (the turn's temperature and decoding mask), cached in
    ``turn.extras[tag]`` and counted in ``batch.metrics["teachers/..."]``.
    """
    todo = [n for n, key in enumerate(keys) if tag not in batch.turn(key).extras]
    ref = teachers.model("reference")
    chunk: list[int] = []
    longest = 0
    for n in todo:
        turn = batch.turn(keys[n])
        size = len(turn.prompt_ids) + len(turn.response_ids)
        if chunk and (len(chunk) + 1) * max(longest, size) > max(1, teachers.max_tokens):
            _score_reference(ref, batch, [keys[m] for m in chunk], [support[m] for m in chunk], tag)
            chunk, longest = [], 0
        chunk.append(n)
        longest = max(longest, size)
    if chunk:
        _score_reference(ref, batch, [keys[m] for m in chunk], [support[m] for m in chunk], tag)
    return [batch.turn(key).extras[tag] for key in keys]


def _score_reference(
    ref: Any, batch: Batch, keys: list[Key], support: list[TokenDist], tag: str
) -> None:
    turns = [batch.turn(key) for key in keys]
    with torch.no_grad():
        logits = ref.response_logits(
            [t.prompt_ids for t in turns], [t.response_ids for t in turns], grad=False
        )
    for turn, lg, sup in zip(turns, logits, support, strict=True):
        L = len(turn.response_ids)
        temps = torch.full((L,), float(turn.temperature), device=lg.device)
        logp = log_distribution(lg, turn.allowed_tokens, temps)
        target = turn.response_ids.to(lg.device, torch.long)
        ids = sup.ids.to(lg.device, torch.long)
        turn.extras[tag] = TokenDist(
            ids=ids,
            logp=logp.gather(-1, ids),
            sampled=logp.gather(-1, target[:, None]).squeeze(-1),
        )
    m = batch.metrics
    m["teachers/forwards"] = m.get("teachers/forwards", 0.0) + len(keys)
    tokens = sum(len(t.prompt_ids) + len(t.response_ids) for t in turns)
    m["teachers/tokens"] = m.get("teachers/tokens", 0.0) + tokens


@register("renyi_opsd")
class RenyiOPSD(CreditVariant):
    """Rényi OPSD (CREDIT.md §14, [D]): ``λ · D_ρ(q_α ‖ π_θ)``, ``q_α ∝ π_T(·|s⁺)^α π_ref^{1−α}``.

    The module docstring gives the formula and the choices made.
    """

    requires_info = frozenset({"privileged_context"})
    requires_abilities = frozenset({"privileged"})

    @dataclass(frozen=True)
    class Config:
        """Rényi OPSD's settings: the target's mix, the divergence's order, the support."""

        alpha: float = 0.5
        """α in [0, 1]: weight of the privileged self-teacher in the geometric target (1: the
        teacher alone, 0: the frozen reference alone)."""
        rho: float = 0.5
        """ρ > 0: the Rényi order (1: KL). Below 1 damps extreme teacher/student ratios."""
        k: int = 16
        """the teacher's top-k ids kept as the support (plus one tail bucket)."""
        coef: float = 0.1
        """λ: the weight of the divergence in the loss."""
        mode: str = "add"
        """"add": RL loss + λ·D; "replace": every advantage zeroed (no RL surrogate), λ·D only."""
        context: str = "env"
        """the teacher's privileged text: "env" (the env's privileged_context of the state)
        or "none" (the student's own prompt; an ablation)."""

        def __post_init__(self):
            """Refuse settings outside their ranges."""
            if not 0.0 <= self.alpha <= 1.0:
                raise BadInput(f"renyi_opsd alpha must be in [0, 1], got {self.alpha}")
            if self.rho <= 0:
                raise BadInput(f"renyi_opsd rho must be > 0, got {self.rho}")
            if self.k < 1:
                raise BadInput(f"renyi_opsd k must be >= 1, got {self.k}")
            if self.coef < 0:
                raise BadInput(f"renyi_opsd coef must be >= 0, got {self.coef}")
            if self.mode not in MODES:
                raise BadInput(f"renyi_opsd mode must be one of {MODES}, got {self.mode!r}")
            if self.context not in CONTEXTS:
                raise BadInput(
                    f"renyi_opsd context must be one of {CONTEXTS}, got {self.context!r}"
                )

    @property
    def needs_reference(self) -> bool:
        """The target is anchored on the frozen reference."""
        return True

    def _context(self) -> tuple[ContextFn | None, str]:
        if self.cfg.context == "none":
            return (lambda traj, k: None), "plain"
        return None, ""

    def shape(self, batch: Batch, ctx: Context) -> None:
        """``mode="replace"``: zero every advantage, so the surrogate adds nothing."""
        if self.cfg.mode != "replace" or batch.advantages is None:
            return
        batch.advantages = {key: torch.zeros_like(a) for key, a in batch.advantages.items()}
        batch.metrics["renyi_opsd/replaced_turns"] = float(len(batch.advantages))

    def aux_loss(self, batch: Batch, ctx: Context) -> tuple[Tensor, dict[str, float]] | None:
        """``λ`` times the mean over policy tokens of ``D_ρ(q_α ‖ π_θ)``."""
        cfg = self.cfg
        every = batch.keys()
        keys = [key for key in every if float(batch.turn(key).mask().sum()) > 0]
        if not keys:
            return None
        teachers = ctx.need_teachers()
        context, tag = self._context()
        teacher = teachers.topk(batch, keys, "privileged", cfg.k, context=context, tag=tag)
        slot = f"topk/reference@privileged{'/' + tag if tag else ''}/{cfg.k}"
        reference = reference_on_support(teachers, batch, keys, teacher, slot)
        student = teachers.student(batch, keys, teacher)
        total, count = None, 0.0
        for key, t, r, s in zip(keys, teacher, reference, student, strict=True):
            m = batch.turn(key).mask().to(s.logp.device)
            d = opsd_divergence(t.with_tail(), r.with_tail(), s.with_tail(), cfg.alpha, cfg.rho)
            part = (d * m).sum()
            total = part if total is None else total + part
            count += float(m.sum())
        assert total is not None
        divergence = total / count
        return cfg.coef * divergence, {
            "renyi_opsd/divergence": float(divergence.detach()),
            "renyi_opsd/tokens": count,
        }
