"""Critical-state RL: nested sampling at candidate turns, an ANOVA estimate, occurrence-local RL.

CREDIT.md §11, status [D] (no primary source; cross-checks named there: CARL, entropy as a
proxy for critical actions; SLATE, k continuations from a shared prefix).

* Rollouts: the default groups, snapshots on.
* Candidates: at most ``candidates`` turn occurrences ``o = (i, k)`` per step, pre-filtered by
  ``prefilter``: "entropy" takes the turns whose response was least certain (mean
  ``−log π_old`` over its tokens, the entropy of the sampled action as estimated from the one
  sample); "bucket" takes the turns of GiGPO's anchor-state buckets (same group, same
  ``state_key``) whose rollouts' returns from there disagree, most variance first; "random"
  draws them uniformly (the control).
* Nested sampling at ``o`` with state ``s``: ``n`` actions ``a_1..a_n``, each continued ``m``
  times to the end, returns ``G_{j,l}``. The first action is the rollout's own ``a_k``
  (replayed ``m`` times, teacher-forced, the policy acting afresh after it), so the rollout's
  own turn gets credit; the other ``n − 1`` are fresh draws from the policy, each of whose
  first continuation is the branch that drew it and ``m − 1`` more replay it. Returns are
  undiscounted from turn ``k`` on, rewards and invalid-action penalties included.
* One-way random-effects ANOVA: ``Ḡ_j = mean_l G_{j,l}``, ``Ḡ = mean_j Ḡ_j``,
  ``S²_b = Σ_j (Ḡ_j − Ḡ)² / (n − 1)``, ``S²_w = Σ_{j,l} (G_{j,l} − Ḡ_j)² / (n (m − 1))``,
  ``V_act = S²_b − S²_w / m``: unbiased for ``Var_a Q(s, a)``, the spread of the action
  values at ``s`` (it can be negative when the actions do not matter).
* Trainable occurrences: ``V_act > tau`` ("threshold") or the top ``q`` share of the
  candidates by ``V_act`` ("topq"; those with ``V_act <= 0`` never).
* Occurrence-local RL: the ``n`` action responses at each trainable occurrence get
  ``A_j = Ḡ_j − Ḡ`` (divided by the std of the ``Ḡ_j`` with ``normalize``); every other token
  of the batch gets no loss (no advantage key).

``critical`` owns the advantages slot and its own sampler, and stands alone: every credit
signal it trains on is its nested estimate. The nested continuations are auxiliary rollouts
(``Trajectory.auxiliary``) counted as generated tokens; the ``n − 1`` fresh actions are
trained on at their own turn ``k``.

Choices [D] and why: ``n = m = 4`` as the section's example (16 suffix rollouts per
candidate); ``candidates = 4`` per step keeps the nested cost near four groups of 16;
``select = "topq"`` with ``q = 0.5`` trains on half the candidates whatever the scale of the
returns (a fixed ``tau`` depends on the env's reward scale; ``tau = 0`` is offered).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, register
from agentgym.baselines.credit._kernels import state_buckets
from agentgym.baselines.credit._tree import response_nll
from agentgym.baselines.rollout import branch, collect, pick_tasks
from agentgym.baselines.truth import return_from
from agentgym.core.errors import BadInput

__all__ = ["Anova", "Critical", "anova"]

PREFILTERS = ("entropy", "bucket", "random")
SELECTS = ("topq", "threshold")
ADVANTAGE = "critical/advantage"
"""``Turn.extras`` key of ``A_j`` on an action response of a trained occurrence."""
V_ACT = "critical/v_act"
"""``Turn.extras`` key of a candidate turn's ``V_act``."""
NESTED = "critical/nested"
"""``Trajectory.extras`` flag: the rollout's candidates were nested-sampled."""


@dataclass(frozen=True)
class Anova:
    """The one-way random-effects ANOVA of one candidate's ``n × m`` returns."""

    means: list[float]
    """``Ḡ_j`` per action."""
    grand: float
    """``Ḡ``."""
    between: float
    """``S²_b``."""
    within: float
    """``S²_w``."""
    v_act: float
    """``S²_b − S²_w / m``."""


def anova(G: np.ndarray) -> Anova:
    """The ANOVA of returns ``G`` [n actions, m continuations each], ``n, m >= 2``."""
    G = np.asarray(G, dtype=float)
    n, m = G.shape
    if n < 2 or m < 2:
        raise ValueError(f"the ANOVA needs n, m >= 2, got {n} x {m}")
    means = G.mean(axis=1)
    grand = float(means.mean())
    between = float(((means - grand) ** 2).sum() / (n - 1))
    within = float(((G - means[:, None]) ** 2).sum() / (n * (m - 1)))
    return Anova([float(x) for x in means], grand, between, within, between - within / m)


@register("critical")
class Critical(CreditVariant):
    """Critical-state RL (CREDIT.md §11): nested sampling, ANOVA selection, local RL."""

    requires_abilities = frozenset({"snapshot"})

    @dataclass(frozen=True)
    class Config:
        """Critical-state settings: the nested sample sizes, the pre-filter and the selection."""

        n: int = 4
        """actions per candidate (the rollout's own and n − 1 fresh draws)."""
        m: int = 4
        """continuations per action."""
        candidates: int = 4
        """candidate occurrences per step."""
        prefilter: str = "entropy"
        """how candidates are picked: "entropy", "bucket" or "random" (see the module doc)."""
        select: str = "topq"
        """"topq": the top q share of candidates by V_act; "threshold": V_act > tau."""
        q: float = 0.5
        """the share of candidates "topq" keeps (at least one)."""
        tau: float = 0.0
        """the V_act threshold of "threshold"."""
        normalize: bool = False
        """divide A_j by the std of the Ḡ_j at its occurrence."""
        min_turn: int = 0
        """the earliest turn a candidate may be."""
        eps: float = 1e-6
        """a std at most this is treated as none."""

        def __post_init__(self) -> None:
            """Refuse unknown choices, n or m below 2, no candidates, q outside (0, 1]."""
            if self.prefilter not in PREFILTERS:
                raise BadInput(f"critical prefilter must be one of {PREFILTERS}")
            if self.select not in SELECTS:
                raise BadInput(f"critical select must be one of {SELECTS}")
            if self.n < 2 or self.m < 2:
                raise BadInput(f"critical n and m must be >= 2, got {self.n}, {self.m}")
            if self.candidates < 1:
                raise BadInput(f"critical candidates must be >= 1, got {self.candidates}")
            if not 0.0 < self.q <= 1.0:
                raise BadInput(f"critical q must be in (0, 1], got {self.q}")

    # ------------------------------------------------------------------ sampling
    def sample(self, batch: Batch, ctx: Context) -> None:
        """The default groups with snapshots, then the nested samples at the candidates."""
        pool = ctx.need_envs()
        if not pool.supports_snapshot:
            raise BadInput(f"critical needs env snapshots, which {pool.env_id} lacks")
        rollout = dataclasses.replace(ctx.need_rollout(), snapshots=True)
        tasks = pick_tasks(pool, ctx.tasks_per_step, ctx.need_rng())
        batch.trajectories = collect(ctx.need_policy(), pool, tasks, ctx.group_size, rollout)
        self.nest(batch, ctx)

    def candidates(self, batch: Batch, rng: np.random.Generator) -> list[Key]:
        """Up to ``candidates`` occurrences ``(i, k)`` of the original rollouts (``prefilter``)."""
        keys = [
            (i, k)
            for i, t in enumerate(batch.trajectories)
            if not t.auxiliary
            for k in range(self.cfg.min_turn, len(t.turns))
            if not t.turns[k].extras.get("shared")
        ]
        if not keys:
            return []
        how, want = self.cfg.prefilter, self.cfg.candidates
        if how == "random":
            order = rng.permutation(len(keys))
            return [keys[j] for j in order[:want]]
        if how == "entropy":
            score = [response_nll(batch.turn(key)) for key in keys]
            order = np.argsort(-np.array(score), kind="stable")
            return [keys[j] for j in order[:want]]
        scored = []
        for bucket in state_buckets(batch, keys, "critical"):
            G = [return_from(batch.trajectories[i], k) for i, k in bucket]
            if len(bucket) > 1 and np.ptp(G) > 0:
                scored.append((float(np.var(G)), bucket[int(rng.integers(len(bucket)))]))
        scored.sort(key=lambda pair: -pair[0])
        return [key for _, key in scored[:want]]

    def nest(self, batch: Batch, ctx: Context) -> None:
        """Nested samples at the candidates; ``V_act`` and ``A_j`` into the turns' extras.

        The nested rollouts join the batch (auxiliary); the fresh draws' own turns ``k``
        carry their ``A_j`` like the rollout's own turn does.
        """
        policy, pool = ctx.need_policy(), ctx.need_envs()
        rollout = dataclasses.replace(ctx.need_rollout(), snapshots=True)
        picked = self.candidates(batch, ctx.need_rng())
        for traj in batch.trajectories:
            if not traj.auxiliary:
                traj.extras[NESTED] = True
        metrics = batch.metrics
        metrics["critical/candidates"] = float(len(picked))
        if not picked:
            return
        n, m = self.cfg.n, self.cfg.m
        parents = [(batch.trajectories[i], k) for i, k in picked]
        own = branch(policy, pool, parents, m, rollout, forced=True)
        fresh = branch(policy, pool, parents, n - 1, rollout)
        at = [(t, k) for t, (_, k) in zip(fresh, _repeat(picked, n - 1), strict=True)]
        again = branch(policy, pool, at, m - 1, rollout, forced=True)
        returns = np.zeros((len(picked), n, m))
        for c, (_, k) in enumerate(picked):
            returns[c, 0] = [return_from(t, k) for t in own[c * m : (c + 1) * m]]
            for j in range(n - 1):
                first = fresh[c * (n - 1) + j]
                rest = again[(c * (n - 1) + j) * (m - 1) : (c * (n - 1) + j + 1) * (m - 1)]
                returns[c, j + 1] = [return_from(first, k), *(return_from(t, k) for t in rest)]
        for t in [*own, *fresh, *again]:
            t.auxiliary = True
        batch.trajectories.extend([*own, *fresh, *again])
        results = [anova(returns[c]) for c in range(len(picked))]
        keep = self.select([r.v_act for r in results])
        for c, (i, k) in enumerate(picked):
            r = results[c]
            A = np.array(r.means) - r.grand
            if self.cfg.normalize:
                std = float(np.std(r.means, ddof=1))
                A = A / std if std > self.cfg.eps else A * 0.0
            # the action responses: the rollout's own turn k and each fresh draw's turn k
            turns = [batch.trajectories[i].turns[k]]
            turns += [fresh[c * (n - 1) + j].turns[k] for j in range(n - 1)]
            turns[0].extras[V_ACT] = r.v_act
            for turn, a in zip(turns, A, strict=True):
                if c in keep:
                    turn.extras[ADVANTAGE] = float(a)
        v = [r.v_act for r in results]
        metrics["critical/v_act_mean"] = float(np.mean(v))
        metrics["critical/v_act_max"] = float(np.max(v))
        metrics["critical/trained"] = float(len(keep))
        metrics["critical/rollouts"] = float(len(own) + len(fresh) + len(again))

    def select(self, v_act: list[float]) -> set[int]:
        """The candidates trained on: ``V_act > tau``, or the top ``q`` share with ``V_act > 0``."""
        v = np.asarray(v_act, dtype=float)
        if self.cfg.select == "threshold":
            return {c for c in range(len(v)) if v[c] > self.cfg.tau}
        want = max(1, round(self.cfg.q * len(v)))
        order = np.argsort(-v, kind="stable")[:want]
        return {int(c) for c in order if v[c] > 0.0}

    # ------------------------------------------------------------------ advantages
    def advantages(self, batch: Batch, ctx: Context) -> None:
        """``A_j`` on the action responses of the trained occurrences; no other key.

        A batch another sampler filled is nested-sampled here first.
        """
        if not any(t.extras.get(NESTED) for t in batch.trajectories):
            self.nest(batch, ctx)
        out: dict[Key, torch.Tensor] = {}
        for i, traj in enumerate(batch.trajectories):
            for k, turn in enumerate(traj.turns):
                if ADVANTAGE in turn.extras and not turn.extras.get("shared"):
                    out[(i, k)] = float(turn.extras[ADVANTAGE]) * turn.mask()
        batch.advantages = out
        batch.metrics["critical/trained_samples"] = float(len(out))


def _repeat(items: list[Key], per: int) -> list[Key]:
    """Each item repeated ``per`` times, in order (the fresh draws' branch points)."""
    return [item for item in items for _ in range(per)]
