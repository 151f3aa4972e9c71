"""Twin-world counterfactual credit: a twin rollout per selected turn, common random numbers.

CREDIT.md §7, status [D] (no primary source; cross-checks named there: C3's fixed-continuation
replay with leave-one-out, common-random-numbers planning).

* Sampling: the default groups, every rollout with a Gumbel key ``c`` for its sampling noise
  (turn ``k`` samples with ``c · 1000 + k``) and the same key for the env-side noise
  (``set_rng(c)``: the noise of turn ``t`` is a function of ``(c, t)`` alone), snapshots on.
* Twin of turn ``t`` of rollout ``τ``: the env is restored to the state turn ``t`` acted from,
  the policy draws an alternative action ``a′_t`` with a fresh key, and the rest is played
  with ``τ``'s own keys: wherever the twin's context equals ``τ``'s, it makes the same draws,
  and the env makes the same. Turn credit ``Â_t = G_t(τ) − mean_j G_t(τ′_j)`` over ``m``
  twins, ``G_t`` the return from turn ``t`` on (the rewards before ``t`` are the same in both
  worlds and cancel). ``a′_t`` is drawn from the policy itself, so it may equal ``a_t``: that
  twin then replays ``τ`` exactly and gives 0, and ``E[Â_t] = Q(s_t, a_t) − V(s_t)``, the
  advantage, with the twin noise cancelling what the two worlds share.
* Variance: with twin correlation ``ρ`` of ``G(τ)`` and ``G(τ′)``, ``Var(G − G′) = 2σ²(1 − ρ)``,
  a factor ``(1 − ρ)`` of what independent twins give. With ``independent=True`` the variant
  also plays, for every selected turn, a twin with fresh keys for every turn and the env, and
  reports ``ρ``, both variances and their ratio (``twin/rho``, ``twin/var_shared``,
  ``twin/var_independent``, ``twin/var_ratio``): the measured reduction against the
  predicted ``1 − ρ``.
* Selection under a budget: turn ``t`` is twinned with probability
  ``π_t = min(1, max(p_min, c · sqrt(d̂_t / c_t)))``, ``c`` set so that ``Σ_t π_t`` is
  ``budget`` times the batch's turns (water-filling over the capped turns). ``c_t`` is the
  predicted suffix cost, the turns left in ``τ`` after ``t`` (a twin plays about as many);
  ``d̂_t`` the predicted discordance ``P[G ≠ G′]``, a running mean of the discordance observed
  in earlier steps per relative-depth bin ``⌊bins · t / K⌋`` (``prior`` before any twin of
  that bin). Turns are drawn independently (Poisson sampling) from ``ctx.rng``.
* Horvitz–Thompson: ``Â^HT_t = 1[t selected] · Â_t / π_t``; an unselected turn contributes 0
  and ``E[Â^HT_t] = E[Â_t]``: no turn is biased by the budget, only noisier.
* Final, in ``shape`` (so it composes: ``grpo+twin``, ``gigpo+twin``):
  ``A_t = A_traj,t + ω · Â^HT_t / σ̂ · m_t`` on every key the advantage slot filled, ``σ̂``
  the batch std of ``Â^HT`` over the batch's turns (1 when at most ``eps``).

The twins are auxiliary rollouts (``Trajectory.auxiliary``): they are in the batch, so their
tokens count against a token budget, but no GRPO group holds them and the loss does not train
on them (``shape`` drops their keys).

Choices [D] and why: ``budget = 0.25`` twins a quarter of the turns (the suffix rollouts cost
about as much as the batch itself at that rate, for multi-turn envs of ~8 turns); ``ω = 0.5``
as TRACE's λ: the twin term refines the outcome's credit, flipping its sign on a turn only
beyond two batch stds; ``p_min = 0.05`` bounds the HT weight at 20.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentgym.baselines.credit import Batch, Context, CreditVariant, Key, Trajectory, register
from agentgym.baselines.policies.agent import stable_key
from agentgym.baselines.rollout import branch, collect, pick_tasks
from agentgym.baselines.truth import return_from
from agentgym.core.errors import BadInput

__all__ = ["Twin", "ht_credit", "inclusion_probabilities"]

KEY = "twin/key"
"""``Trajectory.extras`` key of a rollout's noise key (sampling and env)."""
CREDIT = "twin/credit"
"""``Turn.extras`` key of ``Â_t`` (selected turns only)."""
PROB = "twin/prob"
"""``Turn.extras`` key of ``π_t``."""
INDEPENDENT = "twin/independent"
"""``Trajectory.extras`` flag of an independent twin (fresh noise; ``independent=True``)."""


def inclusion_probabilities(weights: np.ndarray, budget: float, floor: float = 0.0) -> np.ndarray:
    """``π_t = min(1, max(floor, c · w_t))`` with ``c`` chosen so that ``Σ π_t = budget``.

    Water-filling: turns whose scaled weight reaches 1 are capped and the rest rescaled until
    no more cap. ``budget >= len(weights)`` gives all ones; a zero weight gets ``floor``.

    Args:
        weights: [n] non-negative weights (``sqrt(d̂ / c)``).
        budget: the expected number of selected turns.
        floor: the least probability of any turn.
    """
    w = np.asarray(weights, dtype=float)
    n = len(w)
    if n == 0:
        return w
    if budget >= n:
        return np.ones(n)
    pi = np.full(n, min(1.0, floor))
    free = np.ones(n, dtype=bool)
    left = budget
    for _ in range(n + 1):
        total = float(w[free].sum())
        if total <= 0.0:
            pi[free] = max(min(1.0, floor), left / max(1, int(free.sum())))
            break
        scaled = left * w / total
        over = free & (scaled >= 1.0)
        if not over.any():
            pi[free] = np.maximum(scaled[free], floor)
            break
        pi[over] = 1.0
        free &= ~over
        left = budget - float(pi[~free].sum())
    return np.minimum(pi, 1.0)


def ht_credit(credit: float, selected: bool, prob: float) -> float:
    """Horvitz–Thompson: ``1[selected] · credit / prob``."""
    return credit / prob if selected else 0.0


@register("twin")
class Twin(CreditVariant):
    """Twin-world credit (CREDIT.md §7): keyed twins of selected turns, HT-weighted, added to A."""

    requires_abilities = frozenset({"snapshot", "set_rng"})

    @dataclass(frozen=True)
    class Config:
        """Twin-world settings: the budget, the twins per turn and the weight of the term."""

        budget: float = 0.25
        """expected share of the batch's turns that get twins."""
        m: int = 1
        """twins per selected turn (their returns are averaged)."""
        omega: float = 0.5
        """ω, the weight of the normalised twin term."""
        min_prob: float = 0.05
        """the least selection probability of a turn (bounds the HT weight 1/π)."""
        prior: float = 0.5
        """predicted discordance P[G ≠ G′] of a depth bin before any twin of it."""
        bins: int = 4
        """relative-depth bins of the discordance model."""
        independent: bool = False
        """also play an independent twin per selected turn and report ρ and the variances."""
        eps: float = 1e-6
        """a std at most this is treated as none."""

        def __post_init__(self) -> None:
            """Refuse a budget outside (0, 1], m or bins below 1, probabilities outside [0, 1]."""
            if not 0.0 < self.budget <= 1.0:
                raise BadInput(f"twin budget must be in (0, 1], got {self.budget}")
            if self.m < 1 or self.bins < 1:
                raise BadInput(f"twin m and bins must be >= 1, got {self.m}, {self.bins}")
            for name in ("min_prob", "prior"):
                if not 0.0 <= getattr(self, name) <= 1.0:
                    raise BadInput(f"twin {name} must be in [0, 1], got {getattr(self, name)}")

    def __init__(self, config: Any = None):
        """Settings, and an empty discordance model (observed, twinned) per depth bin."""
        super().__init__(config)
        self.seen = np.zeros(self.cfg.bins)
        self.discordant = np.zeros(self.cfg.bins)

    # ------------------------------------------------------------------ sampling
    def sample(self, batch: Batch, ctx: Context) -> None:
        """The default groups with keyed noise and snapshots, then the twins of chosen turns."""
        pool = ctx.need_envs()
        if not pool.supports_snapshot:
            raise BadInput(f"twin needs env snapshots, which {pool.env_id} lacks")
        rollout = _with_snapshots(ctx.need_rollout())
        tasks = pick_tasks(pool, ctx.tasks_per_step, ctx.need_rng())
        n = len(tasks) * ctx.group_size
        draw = int(ctx.need_rng().integers(2**62))
        keys = [stable_key(ctx.step, draw, j) >> 24 for j in range(n)]
        trajs = collect(
            ctx.need_policy(), pool, tasks, ctx.group_size, rollout, gumbel_keys=keys, env_keys=keys
        )
        for traj, key in zip(trajs, keys, strict=True):
            traj.extras[KEY] = key
        batch.trajectories = trajs
        self.twin(batch, ctx)

    def depth_bin(self, k: int, turns: int) -> int:
        """The relative-depth bin of turn ``k`` of ``turns``."""
        return min(self.cfg.bins - 1, self.cfg.bins * k // max(1, turns))

    def predicted_discordance(self) -> np.ndarray:
        """``d̂`` per depth bin: observed discordance, the prior where nothing was observed."""
        out = np.full(self.cfg.bins, self.cfg.prior)
        seen = self.seen > 0
        out[seen] = self.discordant[seen] / self.seen[seen]
        return out

    def choose(self, batch: Batch, rng: np.random.Generator) -> list[Key]:
        """Draw the turns to twin (Poisson sampling); ``π_t`` into every turn's extras."""
        originals = [(i, t) for i, t in enumerate(batch.trajectories) if not t.auxiliary]
        turns: list[Key] = [(i, k) for i, t in originals for k in range(len(t.turns))]
        if not turns:
            return []
        d_hat = self.predicted_discordance()
        weights = []
        for i, k in turns:
            K = len(batch.trajectories[i].turns)
            weights.append(math.sqrt(d_hat[self.depth_bin(k, K)] / (K - k)))
        budget = self.cfg.budget * len(turns)
        pi = inclusion_probabilities(np.array(weights), budget, self.cfg.min_prob)
        chosen = rng.random(len(turns)) < pi
        for (i, k), p in zip(turns, pi, strict=True):
            batch.trajectories[i].turns[k].extras[PROB] = float(p)
        batch.metrics["twin/mean_prob"] = float(pi.mean())
        return [key for key, c in zip(turns, chosen, strict=True) if c]

    def twin(self, batch: Batch, ctx: Context) -> None:
        """Choose turns, play their twins, store ``Â_t`` and ``π_t`` in the turns' extras."""
        picked = self.choose(batch, ctx.need_rng())
        metrics = batch.metrics
        metrics["twin/selected"] = float(len(picked))
        if not picked:
            return
        m = self.cfg.m
        parents = [(batch.trajectories[i], k) for i, k in picked]
        for traj, _ in parents:
            if KEY not in traj.extras:
                raise ValueError(
                    f"twin: rollout {traj.node_id} has no noise key; twins need the rollouts "
                    "of twin's own sampler (keyed sampling and env noise)"
                )
        own = [traj.extras[KEY] for traj, _ in parents for _ in range(m)]
        fresh = [
            stable_key(t.extras[KEY], ctx.step, k, j) >> 24 for t, k in parents for j in range(m)
        ]
        twins = branch(
            ctx.need_policy(),
            ctx.need_envs(),
            parents,
            m,
            _with_snapshots(ctx.need_rollout()),
            gumbel_keys=own,
            env_keys=own,
            first_keys=fresh,
        )
        diffs, pairs = [], []
        for n_pick, (traj, k) in enumerate(parents):
            G = return_from(traj, k)
            mine = twins[n_pick * m : (n_pick + 1) * m]
            G_twins = [return_from(t, k) for t in mine]
            traj.turns[k].extras[CREDIT] = G - float(np.mean(G_twins))
            diffs.append(traj.turns[k].extras[CREDIT])
            b = self.depth_bin(k, len(traj.turns))
            self.seen[b] += len(G_twins)
            self.discordant[b] += sum(g != G for g in G_twins)
            pairs += [(G, g) for g in G_twins]
            for t in mine:
                t.auxiliary, t.twin_of = True, traj.node_id
        batch.trajectories.extend(twins)
        metrics["twin/rollouts"] = float(len(twins))
        metrics["twin/discordance"] = float(np.mean([g != g2 for g, g2 in pairs]))
        metrics["twin/credit_mean"] = float(np.mean(diffs))
        metrics["twin/rho"] = _corr([g for g, _ in pairs], [g2 for _, g2 in pairs])
        metrics["twin/var_shared"] = _var([g - g2 for g, g2 in pairs])
        if self.cfg.independent:
            self._independent(batch, ctx, parents)

    def _independent(
        self,
        batch: Batch,
        ctx: Context,
        parents: list[tuple[Trajectory, int]],
    ) -> None:
        """Independent twins of the same turns: the variance the shared noise is compared to."""
        rollout = _with_snapshots(ctx.need_rollout())
        keys = [stable_key(t.extras[KEY], ctx.step, k, 7_919) >> 24 for t, k in parents]
        alone = branch(
            ctx.need_policy(), ctx.need_envs(), parents, 1, rollout, gumbel_keys=keys, env_keys=keys
        )
        G, G_alone = [], []
        for (traj, k), t in zip(parents, alone, strict=True):
            G.append(return_from(traj, k))
            G_alone.append(return_from(t, k))
            t.auxiliary = True
            t.twin_of = traj.node_id
            t.extras[INDEPENDENT] = True
        batch.trajectories.extend(alone)
        metrics = batch.metrics
        var_ind = _var([g - g2 for g, g2 in zip(G, G_alone, strict=True)])
        metrics["twin/var_independent"] = var_ind
        metrics["twin/rho_independent"] = _corr(G, G_alone)
        var_sh = metrics.get("twin/var_shared", float("nan"))
        metrics["twin/var_ratio"] = var_sh / var_ind if var_ind > 0 else float("nan")

    # ------------------------------------------------------------------ advantages
    def ht(self, batch: Batch) -> dict[Key, float]:
        """``Â^HT_t`` of every turn of the batch's original rollouts."""
        out: dict[Key, float] = {}
        for i, traj in enumerate(batch.trajectories):
            if traj.auxiliary:
                continue
            for k, turn in enumerate(traj.turns):
                prob = float(turn.extras.get(PROB, 1.0))
                credit = turn.extras.get(CREDIT)
                out[(i, k)] = ht_credit(float(credit or 0.0), credit is not None, prob)
        return out

    def shape(self, batch: Batch, ctx: Context) -> None:
        """``A += ω · Â^HT / σ̂ · m`` on the originals' keys; the twins' keys are dropped."""
        if batch.advantages is None:
            return
        for key in [key for key in batch.advantages if batch.trajectories[key[0]].auxiliary]:
            del batch.advantages[key]
        ht = self.ht(batch)
        values = list(ht.values())
        scale = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        scale = scale if scale > self.cfg.eps else 1.0
        for key, adv in batch.advantages.items():
            if key in ht:
                mask = batch.turn(key).mask().to(adv.device)
                batch.advantages[key] = adv + self.cfg.omega * (ht[key] / scale) * mask
        batch.metrics["twin/ht_scale"] = scale


def _with_snapshots(rollout: Any) -> Any:
    """``rollout`` with snapshots on (twins restore the states turns acted from)."""
    return dataclasses.replace(rollout, snapshots=True)


def _var(x: list[float]) -> float:
    """The unbiased variance, NaN with fewer than two values."""
    return float(np.var(x, ddof=1)) if len(x) > 1 else float("nan")


def _corr(x: list[float], y: list[float]) -> float:
    """Pearson's correlation, NaN with fewer than two pairs or a constant side."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
