"""SDAR: self-distilled agentic RL, as in CREDIT.md §2.

Lu et al., arXiv 2605.15155; official code ``asayu255/SDAR`` (``verl/trainer/ppo/sdar_utils.py``
and its run scripts).

The teacher is the policy itself reading a privileged prompt: the turn's prompt rebuilt with
the env's ``privileged_context`` of the state the turn acted from at its head (the teachers'
``"privileged"`` view). It scores the tokens the policy sampled, without gradient, once per
step (``score``). Per sampled token ``y_t`` of a response:

* gap ``Δ_t = log π_T(y_t | s_t⁺) − sg[log π_θ(y_t | s_t)]``;
* gate ``g_t = sg[σ(β Δ_t)]``;
* ``L_SDAR = token-mean_t g_t · (sg[log π_T(y_t | s_t⁺)] − log π_θ(y_t | s_t))`` over the
  policy-masked response tokens of the mini-batch; the auxiliary loss is ``λ · L_SDAR``.

Its gradient is ``−λ g_t ∇log π_θ(y_t) / N`` (``N`` masked tokens): a gate-weighted push up
on the sampled tokens the teacher endorses (``Δ_t > 0``, ``g_t → 1``), next to nothing on those
it rejects (``g_t → 0``), never a push down. The RL advantage is untouched: SDAR fills only
``score`` and ``aux_loss``, so it composes with any advantage estimator (``gigpo+sdar``).
Defaults from the official scripts: ``λ = 0.01`` (``sdar_coef``), ``β = 5.0`` (``gate_beta``).

Gates (``gate``); "entropy" and "soft_or" are named by a secondary summary of the paper, not
in the code read, so their formulas are derived here:

* "gap" (default): ``g_t = σ(β Δ_t)`` as above;
* "entropy" [D]: ``g_t = σ(β_H (H_t − H̄))``: distil where the student is more uncertain than
  usual. ``H_t`` is the student's entropy at ``t`` on the teacher's top-``k`` ids plus one
  tail bucket (a lower bound of the full entropy, exact as ``k`` reaches the vocabulary);
  ``H̄`` its mean over the mini-batch's masked tokens. This gate ignores the teacher's opinion
  of the token: the loss then pulls up every sampled token of uncertain positions;
* "soft_or" [D]: ``g_t = 1 − (1 − g_gap)(1 − g_ent)``: either signal opens the gate.

Choices the code read leaves open [D]:

* the teacher is scored once per step, before the update, with the weights that sampled the
  rollouts; over several epochs or mini-batches it stays fixed while the student moves (the
  student side, ``log π_θ``, is the current policy's at each update);
* every turn of the mini-batch counts, also those a zero-variance group leaves without an
  advantage (the distillation term does not need a reward signal).

The teacher's text (``context``): "env" (default) is the env's ``privileged_context`` of the
state each turn acted from; "skills" is SDAR's own, skills retrieved from the env family's
library (:mod:`agentgym.baselines.skills`) for the task (the first observation's text and the
task type), the same for every turn of a rollout. ``retrieval`` picks them: "keyword" (the
official code's default), "ucb" (UCB1 over the rollouts' outcomes: every skill shown for a
rollout is credited its outcome after the step's teacher pass, so one step's rollouts share
the choice the earlier steps made), "full" or "random" (an ablation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from agentgym.baselines.batch import Trajectory
from agentgym.baselines.credit import Batch, Context, Key, register
from agentgym.baselines.credit._privileged import PrivilegedTeacher, check_context, masked_mean
from agentgym.baselines.skills import HOWS, SkillLibrary, render
from agentgym.baselines.teachers import PRIVILEGED, Teachers, TokenDist
from agentgym.core.errors import BadInput

GATES = ("gap", "entropy", "soft_or")
CONTEXTS = ("env", "skills")
SKILLS = "sdar/skills"
"""``Trajectory.extras`` key of the skills' text a rollout's teacher read."""


def gap_gate(teacher_logp: Tensor, student_logp: Tensor, beta: float) -> Tensor:
    """``sg[σ(β (log π_T − sg[log π_θ]))]`` per token."""
    return torch.sigmoid(beta * (teacher_logp.detach() - student_logp.detach()))


def token_entropy(logp: Tensor) -> Tensor:
    """``H = −Σ_v p(v) log p(v)`` per row of a ``[L, n]`` log-prob table."""
    return -(logp.exp() * logp).sum(-1)


def entropy_gate(entropy: Tensor, mask: Tensor, beta: float) -> Tensor:
    """``sg[σ(β (H_t − H̄))]`` with ``H̄`` the masked mean of ``H``."""
    H = entropy.detach()
    return torch.sigmoid(beta * (H - masked_mean(H, mask)))


def soft_or(a: Tensor, b: Tensor) -> Tensor:
    """``1 − (1 − a)(1 − b)``."""
    return 1.0 - (1.0 - a) * (1.0 - b)


def sdar_loss(teacher_logp: Tensor, student_logp: Tensor, gate: Tensor, mask: Tensor) -> Tensor:
    """``token-mean_t g_t (sg[log π_T] − log π_θ)`` over the masked tokens (no λ)."""
    return masked_mean(gate.detach() * (teacher_logp.detach() - student_logp), mask)


def _skills_text(traj: Trajectory, k: int) -> str | None:
    """The skills' text a rollout's teacher reads at every turn (None: none retrieved)."""
    text = traj.extras.get(SKILLS)
    return str(text) if text else None


@dataclass
class SdarTokens:
    """SDAR's per-token terms over a list of turns, flat ``[T]``."""

    teacher: Tensor
    """log π_T(y_t | s_t⁺), the privileged view's (no gradient)."""
    student: Tensor
    """log π_θ(y_t | s_t), the current policy's (with gradient)."""
    gate: Tensor
    """g_t (no gradient)."""
    mask: Tensor
    """the policy mask."""
    entropy: Tensor | None
    """the student's entropy on the teacher's top-k + tail (entropy gates only)."""

    @property
    def delta(self) -> Tensor:
        """Δ_t = log π_T − sg[log π_θ]."""
        return self.teacher - self.student.detach()


@register("sdar")
class SDAR(PrivilegedTeacher):
    """SDAR (arXiv 2605.15155): a gated self-distillation term from the privileged view."""

    @dataclass(frozen=True)
    class Config:
        """SDAR's settings: the weight, the gate and the teacher's text."""

        coef: float = 0.01
        """λ, the weight of the distillation term (official ``sdar_coef``)."""
        gate_beta: float = 5.0
        """β of the gap gate ``σ(β Δ_t)`` (official ``gate_beta``)."""
        gate: str = "gap"
        """"gap" (σ(β Δ)), "entropy" (σ(β_H (H − H̄)), derived) or "soft_or" (either)."""
        entropy_beta: float = 5.0
        """β_H of the entropy gate, per nat (derived: the gap gate's β)."""
        entropy_k: int = 16
        """teacher top-k ids the student's entropy is taken on, plus a tail bucket."""
        context: str = "env"
        """the teacher's privileged text: "env" (the env's privileged_context) or "skills"
        (retrieved from the env family's skill library)."""
        retrieval: str = "keyword"
        """how skills are picked: "keyword" (official default), "ucb", "full" or "random"."""
        skills_k: int = 3
        """skills per task ("keyword": besides the general ones; "ucb", "random": in all)."""

        def __post_init__(self) -> None:
            """Refuse an unknown gate or context, a negative weight or a support below 1."""
            if self.gate not in GATES:
                raise BadInput(f"sdar gate must be one of {GATES}, got {self.gate!r}")
            check_context("sdar", self.context, CONTEXTS)
            if self.retrieval not in HOWS:
                raise BadInput(f"sdar retrieval must be one of {HOWS}, got {self.retrieval!r}")
            if self.coef < 0:
                raise BadInput(f"sdar coef must be >= 0, got {self.coef}")
            if self.entropy_k < 1:
                raise BadInput(f"sdar entropy_k must be >= 1, got {self.entropy_k}")

    def __init__(self, config: Any = None):
        """Read the settings; the skill library is made at the first step that needs it."""
        super().__init__(config)
        self._skills: SkillLibrary | None = None

    def _teacher(self, batch: Batch, teachers: Teachers, keys: list[Key]) -> list[TokenDist]:
        """The privileged view's scores of ``keys``, cached per turn.

        The sampled tokens' log-probs, with the top-k the entropy gate needs.
        """
        k = 0 if self.cfg.gate == "gap" else self.cfg.entropy_k
        if self.cfg.context == "env":
            return teachers.topk(batch, keys, PRIVILEGED, k)
        tag = f"skills-{self.cfg.retrieval}"
        return teachers.topk(batch, keys, PRIVILEGED, k, context=_skills_text, tag=tag)

    def info_problems(self, env_id: str, info: Mapping[str, Any]) -> list[str]:
        """The env's privileged text, or (skills) a skill library for its family."""
        if self.cfg.context == "env":
            return super().info_problems(env_id, info)
        try:
            SkillLibrary.for_env(env_id)
        except BadInput as e:
            return [f"a skill library for its teacher's context: {e}"]
        return []

    def score(self, batch: Batch, ctx: Context) -> None:
        """The teacher's pass over every turn of the step, without gradient."""
        if self.cfg.context == "skills":
            self._retrieve(batch, ctx)
        self._teacher(batch, ctx.need_teachers(), batch.keys())
        if self.cfg.context == "skills":
            for traj in batch.trajectories:
                self._library(ctx).update(traj.extras[SKILLS + "/names"], traj.outcome)

    def _library(self, ctx: Context) -> SkillLibrary:
        """The env family's skill library, made once (its UCB statistics live in it)."""
        if self._skills is None:
            self._skills = SkillLibrary.for_env(ctx.need_envs().env_id)
        return self._skills

    def _retrieve(self, batch: Batch, ctx: Context) -> None:
        """Each rollout's skills, by its task text and type, kept in its extras."""
        library = self._library(ctx)
        rng = ctx.rng if ctx.rng is not None else np.random.default_rng(ctx.step)
        for traj in batch.trajectories:
            if SKILLS in traj.extras or not traj.turns:
                continue
            first = traj.turns[0]
            task_type = first.info.get("task_type")
            skills = library.retrieve(
                str(first.extras.get("observation", "")),
                None if task_type is None else str(task_type),
                how=self.cfg.retrieval,
                k=self.cfg.skills_k,
                rng=rng,
            )
            traj.extras[SKILLS] = render(skills)
            traj.extras[SKILLS + "/names"] = [s.name for s in skills]

    def gates(
        self, teacher: Tensor, student: Tensor, entropy: Tensor | None, mask: Tensor
    ) -> Tensor:
        """The gate of each token under the configured ``gate`` (no gradient)."""
        cfg = self.cfg
        if cfg.gate == "gap":
            return gap_gate(teacher, student, cfg.gate_beta)
        if entropy is None:
            raise ValueError(f"the {cfg.gate!r} gate needs the student's entropy")
        g_ent = entropy_gate(entropy, mask, cfg.entropy_beta)
        if cfg.gate == "entropy":
            return g_ent
        return soft_or(gap_gate(teacher, student, cfg.gate_beta), g_ent)

    def tokens(self, batch: Batch, teachers: Teachers, keys: list[Key]) -> SdarTokens:
        """The per-token terms of ``keys`` (flat, in ``keys``' order): scores and gates."""
        dists = self._teacher(batch, teachers, keys)
        support = None if self.cfg.gate == "gap" else dists
        students = teachers.student(batch, keys, support)
        student = torch.cat([s.sampled for s in students])
        device = student.device
        teacher = torch.cat([d.sampled for d in dists]).to(device)
        mask = torch.cat([batch.turn(key).mask() for key in keys]).to(device)
        entropy = None
        if support is not None:
            entropy = torch.cat([token_entropy(s.with_tail().detach()) for s in students])
        gate = self.gates(teacher, student, entropy, mask)
        return SdarTokens(teacher, student, gate, mask, entropy)

    def aux_loss(self, batch: Batch, ctx: Context) -> tuple[Tensor, dict[str, float]] | None:
        """``λ · L_SDAR`` on the mini-batch, and its gate statistics."""
        keys = batch.keys()
        if not keys:
            return None
        t = self.tokens(batch, ctx.need_teachers(), keys)
        loss = self.cfg.coef * sdar_loss(t.teacher, t.student, t.gate, t.mask)
        metrics = {
            "sdar/loss": float(loss.detach()),
            "sdar/gate_mean": float(masked_mean(t.gate, t.mask)),
            "sdar/gate_open_frac": float(masked_mean((t.gate > 0.5).float(), t.mask)),
            "sdar/delta_mean": float(masked_mean(t.delta, t.mask)),
        }
        if t.entropy is not None:
            metrics["sdar/entropy_mean"] = float(masked_mean(t.entropy, t.mask))
        return loss, metrics
