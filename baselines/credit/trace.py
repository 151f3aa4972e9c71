"""TRACE: a frozen reference model's belief in the gold answer as a state value, TD-backed up.

CREDIT.md §17. [D]: derived, the paper was not found; cross-checks: answer-belief probing
for GRPO, IPVRM (TD differences of prefix values), PAV (progress = change of success
likelihood under a prover).

* Probe: ``ℓ(h) = log π_ref(y* | h)``, the frozen reference's log-likelihood of the gold
  answer ``y*`` (``info["gold_answer"]``) forced after a context ``h``, reduced over the
  answer's tokens by ``reduce`` ("mean" or "sum"). ``h_t`` = turn ``t``'s prompt (the history
  the policy saw, its own token ids) followed by ``answer_prompt`` encoded with the policy's
  tokenizer; the answer's tokens follow, each segment encoded on its own as
  :mod:`agentgym.baselines.prompt` does (no eos after the answer: its end is not probed).
* Anchors, per rollout: ``h_0`` = its first turn's prompt + answer prompt; ``h⁺`` = the first
  observation with the gold evidence text put before it (the privileged view's prompt,
  :class:`~agentgym.baselines.prompt.History` with ``privileged=True``) + answer prompt. All
  rollouts of a group share the first observation, so ``h_0`` and ``h⁺`` are one probe per
  task (probes are deduplicated by their tokens).
* Gap closure: ``V(s_t) = clip((ℓ(h_t) − ℓ(h_0)) / (ℓ(h⁺) − ℓ(h_0)), 0, 1)``. When the
  denominator is at most ``eps`` (the evidence does not raise the reference's belief: nothing
  to close) every ``V`` of that rollout is 0, so its TD terms carry the outcome alone
  (counted in ``trace/degenerate_rollouts``).
* K-step TD backup, intermediate rewards 0: ``A^TD_{i,k} = γ^K V(s_{k+K}) − V(s_k)``; a
  target at or past the end is the outcome ``R_i``, discounted by the turns left,
  ``γ^{K_i − k} R_i`` (the n-step return cut at the terminal; the same as ``γ^K R_i`` at the
  default γ = 1). A truncated rollout also takes its outcome (usually 0) as its last value,
  as GRPO scores it.
* Final, in the ``shape`` hook (so it composes with any advantage slot, ``grpo+trace`` by
  default): ``A_{i,k,t} = A_{i,t} + λ · norm(A^TD_{i,k}) · m_t`` for every key the slot
  filled (a sample the slot dropped stays dropped). ``norm`` = "std": divided by the std of
  ``A^TD`` over every turn of the batch (left as is when that std is at most ``eps`` or the
  batch has one turn); "none": raw.

Choices [D] and why:

* ``lam = 0.5``: GRPO's term is a z-score (unit scale within a group) and "std" puts the TD
  term on unit scale too; at 0.5 the value-based term refines the outcome's credit but flips
  its sign on a turn only when that turn's TD is more than two batch stds from 0, so a
  mis-calibrated reference cannot overturn the outcome on most turns.
* ``evidence = "facts"``: the search family's ``gold_evidence`` holds sentence ids
  (``"s:22:2"``), which read as nothing to a model, and its ``privileged_context`` states the
  answer outright; ``gold_facts`` holds the gold sentences themselves, in reasoning order, so
  the evidence text of ``h⁺`` is those sentences, one a line: the upper anchor is what finding
  all the evidence would show, not the answer. "context" takes the first turn's
  ``privileged_context`` instead, and "gold" joins the ``gold_evidence`` strings (for envs
  whose evidence is text); "facts" falls back to "context", then "gold", where an env has no
  ``gold_facts``.
* ``reduce = "mean"``: a per-token mean does not make long answers look less believed. All
  probes of a rollout force the same answer, so "sum" scales every ℓ by its length and ``V``
  (a ratio) is unchanged; ``reduce`` only moves the ``eps`` guard and the logged ℓ.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.prompt import PRIVILEGED_KEY, History, PromptFormat
from agentgym.core.errors import BadInput

NORMS = ("std", "none")
REDUCES = ("mean", "sum")
EVIDENCE = ("facts", "context", "gold")
VALUE = "trace/value"
"""``Turn.extras`` key of ``V(s_t)``; ``"trace/ell"`` holds ``ℓ(h_t)``."""
ANCHORS = "trace/anchors"
"""``Trajectory.extras`` key of ``(ℓ(h_0), ℓ(h⁺))``."""

Probe = tuple[tuple[int, ...], tuple[int, ...]]
"""(context ids, answer ids) of one forced decoding."""


def gap_closure(ell: float, ell_0: float, ell_plus: float, eps: float) -> float:
    """``clip((ℓ − ℓ_0) / (ℓ⁺ − ℓ_0), 0, 1)``; 0 when ``ℓ⁺ − ℓ_0 <= eps``."""
    gap = ell_plus - ell_0
    if gap <= eps:
        return 0.0
    return min(max((ell - ell_0) / gap, 0.0), 1.0)


def td_backup(values: Sequence[float], outcome: float, k: int, gamma: float) -> list[float]:
    """``A^TD_j = γ^K V_{j+K} − V_j`` per turn; past the end the target is ``γ^{n−j} R``."""
    n = len(values)
    out = []
    for j, v in enumerate(values):
        target = gamma**k * values[j + k] if j + k < n else gamma ** (n - j) * outcome
        out.append(target - v)
    return out


def td_scale(td: Sequence[float], norm: str, eps: float) -> float:
    """What ``norm`` divides the TD terms by: the unbiased std over turns, or 1."""
    if norm == "none" or len(td) < 2:
        return 1.0
    std = float(torch.tensor(list(td), dtype=torch.float64).std())
    return std if std > eps else 1.0


def reduce_logp(logp: torch.Tensor, how: str) -> float:
    """The answer's token log-probs reduced to one number ("mean" or "sum")."""
    total = float(logp.double().sum())
    return total / max(1, logp.numel()) if how == "mean" else total


@register("trace")
class Trace(CreditVariant):
    """TRACE (CREDIT.md §17): reference-model gap-closure values, K-step TD, added to A."""

    requires_info = frozenset({"gold_answer", "gold_evidence"})
    requires_abilities = frozenset({"privileged"})

    @dataclass(frozen=True)
    class Config:
        """TRACE's settings: the probe, the TD backup and the weight of its term."""

        answer_prompt: str = "\nanswer: "
        """text put after each context before the forced gold answer."""
        reduce: str = "mean"
        """ℓ over the answer's tokens: "mean" or "sum" of their log-probs."""
        k: int = 1
        """K, the turns of the TD backup."""
        gamma: float = 1.0
        """γ per turn."""
        lam: float = 0.5
        """λ, the weight of the normalised TD term (see the module doc)."""
        norm: str = "std"
        """"std": A^TD divided by its std over the batch's turns; "none": raw."""
        evidence: str = "facts"
        """h⁺'s evidence text: "facts" (the gold_facts sentences, one a line), "context" (the
        first turn's privileged_context) or "gold" (the gold_evidence strings, one a line)."""
        eps: float = 1e-6
        """a gap ℓ(h⁺) − ℓ(h_0) or a TD std at most this is treated as none."""
        probe_rows: int = 64
        """probes per reference forward."""

        def __post_init__(self):
            """Refuse unknown choices, K or probe_rows below 1, γ outside (0, 1]."""
            for name, value, valid in (
                ("reduce", self.reduce, REDUCES),
                ("norm", self.norm, NORMS),
                ("evidence", self.evidence, EVIDENCE),
            ):
                if value not in valid:
                    raise BadInput(f"trace {name} must be one of {valid}, got {value!r}")
            if self.k < 1 or self.probe_rows < 1:
                raise BadInput(
                    f"trace k and probe_rows must be >= 1, got {self.k}, {self.probe_rows}"
                )
            if not 0.0 < self.gamma <= 1.0:
                raise BadInput(f"trace gamma must be in (0, 1], got {self.gamma}")

    aggregation: ClassVar[str | None] = None

    @property
    def needs_reference(self) -> bool:
        """The probes read the frozen reference."""
        return True

    # ------------------------------------------------------------------ probes
    def _plan(self, traj: Trajectory, policy: Any) -> tuple[list[Probe], Probe, Probe] | None:
        """The probes of one rollout: every turn's, ``h_0``'s and ``h⁺``'s (None: no answer)."""
        info = traj.turns[0].info if traj.turns else {}
        tok = policy.tokenizer
        answer = tuple(tok.encode(str(info.get("gold_answer", ""))))
        if not answer:
            return None
        suffix = tuple(tok.encode(self.cfg.answer_prompt))
        turns = [(tuple(t.prompt_ids.tolist()) + suffix, answer) for t in traj.turns]
        first = traj.turns[0]
        if "observation" not in first.extras:
            raise ValueError(
                f"trace: the first turn of {traj.node_id} has no recorded observation; h⁺ is "
                "built from the rollout engine's turns"
            )
        evidence = self._evidence(
            info.get("gold_facts"), first.extras.get(PRIVILEGED_KEY), info.get("gold_evidence")
        )
        fmt = dataclasses.replace(traj.prompt or PromptFormat(), privileged=True)
        h = History(policy, fmt, [first.extras["observation"]], privileged_context=evidence)
        return turns, turns[0], (tuple(h.prompt()) + suffix, answer)

    def _evidence(self, facts: Any, context: Any, gold: Any) -> str:
        """h⁺'s evidence text (``evidence`` setting; see the module doc for the fallbacks)."""
        joined = gold if isinstance(gold, str) else "\n".join(str(g) for g in gold or [])
        if self.cfg.evidence == "facts" and facts:
            return "\n".join(str(f) for f in facts)
        if self.cfg.evidence in ("facts", "context") and context:
            return str(context)
        return joined

    def _ell(self, ref: Any, probes: list[Probe]) -> dict[Probe, float]:
        """ℓ of each distinct probe, ``probe_rows`` rows per reference forward."""
        unique = list(dict.fromkeys(probes))
        out: dict[Probe, float] = {}
        step = self.cfg.probe_rows
        for start in range(0, len(unique), step):
            rows = unique[start : start + step]
            with torch.no_grad():
                logps = ref.logprobs(
                    [torch.tensor(p, dtype=torch.long) for p, _ in rows],
                    [torch.tensor(a, dtype=torch.long) for _, a in rows],
                )
            for row, lp in zip(rows, logps, strict=True):
                out[row] = reduce_logp(lp.detach().float().cpu(), self.cfg.reduce)
        return out

    def score(self, batch: Batch, ctx: Context) -> None:
        """Probe the reference: ℓ and ``V`` of every turn into ``extras`` (one pass per batch)."""
        if ctx.ref is None:
            raise ValueError("trace needs ctx.ref, the frozen reference model")
        policy = ctx.policy if ctx.policy is not None else ctx.ref
        start = time.perf_counter()
        plans = [self._plan(t, policy) for t in batch.trajectories]
        wanted = [p for plan in plans if plan for p in (*plan[0], plan[1], plan[2])]
        ell = self._ell(ctx.ref, wanted)
        degenerate = no_answer = 0
        for traj, plan in zip(batch.trajectories, plans, strict=True):
            if plan is None:
                no_answer += 1
                for turn in traj.turns:
                    turn.extras[VALUE] = 0.0
                continue
            per_turn, h_0, h_plus = plan
            l0, lp = ell[h_0], ell[h_plus]
            traj.extras[ANCHORS] = (l0, lp)
            degenerate += lp - l0 <= self.cfg.eps
            for turn, probe in zip(traj.turns, per_turn, strict=True):
                turn.extras["trace/ell"] = ell[probe]
                turn.extras[VALUE] = gap_closure(ell[probe], l0, lp, self.cfg.eps)
        m = batch.metrics
        m["trace/probes"] = m.get("trace/probes", 0.0) + len(set(wanted))
        m["trace/seconds"] = m.get("trace/seconds", 0.0) + time.perf_counter() - start
        m["trace/degenerate_rollouts"] = float(degenerate)
        m["trace/rollouts_without_answer"] = float(no_answer)

    # ------------------------------------------------------------------ advantages
    def td(self, batch: Batch) -> dict[Key, float]:
        """``A^TD_{i,k}`` of every turn from the values :meth:`score` left in ``extras``."""
        out: dict[Key, float] = {}
        for i, traj in enumerate(batch.trajectories):
            values = [float(t.extras[VALUE]) for t in traj.turns]
            backed = td_backup(values, traj.outcome, self.cfg.k, self.cfg.gamma)
            out.update({(i, k): a for k, a in enumerate(backed)})
        return out

    def shape(self, batch: Batch, ctx: Context) -> None:
        """``A += λ · norm(A^TD) · m`` on every turn the advantage slot filled."""
        if any(VALUE not in t.extras for traj in batch.trajectories for t in traj.turns):
            self.score(batch, ctx)
        if batch.advantages is None:
            return
        td = self.td(batch)
        scale = td_scale(list(td.values()), self.cfg.norm, self.cfg.eps)
        for key, adv in batch.advantages.items():
            m = batch.turn(key).mask().to(adv.device)
            batch.advantages[key] = adv + self.cfg.lam * (td[key] / scale) * m
        values = [float(t.extras[VALUE]) for traj in batch.trajectories for t in traj.turns]
        if values:
            batch.metrics["trace/value_mean"] = sum(values) / len(values)
            batch.metrics["trace/td_mean"] = sum(td.values()) / len(td)
            batch.metrics["trace/td_scale"] = scale
