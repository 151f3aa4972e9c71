"""The true per-turn advantage of a policy, estimated by restoring env snapshots.

``A^π(s_t, a_t) = Q^π(s_t, a_t) − V^π(s_t)``, with returns undiscounted and counted from the
turn on (every turn's reward, invalid-action penalties included, plus the outcome): the
return the trainer's rollouts carry. For each turn of a rollout played with snapshots, K
continuations restart from the state it acted from and let the policy act afresh (V), and K
more take the rollout's own action first and then let the policy act (Q). Continuation ``j``
of both sets shares its sampling noise (the keyed Gumbel sampler) and its env-side noise
(``set_rng`` where the env has it): common random numbers, so that the paired difference
``d_j = G^Q_j − G^V_j`` cancels what the two do alike, and the estimate is ``mean d_j`` with
standard error ``std(d) / √K``.

Where an env states the values analytically (``info["credit_values"]`` of the ``Credit-*``
envs, for the uniform and the optimal policy), :func:`analytic` reads them instead.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from agentgym.baselines.batch import Key, Trajectory, generated_tokens
from agentgym.baselines.policies.agent import stable_key
from agentgym.baselines.policies.base import Policy
from agentgym.baselines.rollout import EnvPool, RolloutConfig, branch
from agentgym.terminal import Progress

VALUES_KEY = "credit_values"
"""The privileged info key of the analytic values (per policy: value, q, advantage)."""


@dataclass(frozen=True)
class TurnTruth:
    """The true advantage of one turn, or its estimate.

    Attributes:
        advantage: A(s_t, a_t).
        se: its standard error (0 for an analytic value).
        q: Q(s_t, a_t).
        v: V(s_t).
        halves: the advantage estimated from each half of the continuations (split-half
            reliability of the estimate; equal to ``advantage`` for an analytic value).
        n: the paired continuations behind the estimate (0 for an analytic value).
    """

    advantage: float
    se: float
    q: float
    v: float
    halves: tuple[float, float]
    n: int = 0

    @property
    def exact(self) -> bool:
        """Whether the value is analytic (no sampling error)."""
        return self.n == 0

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The estimate's confidence interval (Student's t with n − 1 degrees of freedom)."""
        if self.exact:
            return self.advantage, self.advantage
        half = float(stats.t.ppf(0.5 + confidence / 2, self.n - 1)) * self.se
        return self.advantage - half, self.advantage + half


@dataclass
class TruthCost:
    """What an estimate spent: continuations played, tokens generated, seconds."""

    rollouts: int = 0
    tokens: int = 0
    seconds: float = 0.0


def scored_turns(trajectories: list[Trajectory]) -> list[Key]:
    """The ``(i, k)`` turns whose credit is measured: each state-action the policy chose once.

    Edited rollouts (off-policy copies), auxiliary ones (a variant's twins and nested
    continuations) and the shared prefixes of branches (copies of the parent's turns) are left
    out; so are turns without a snapshot.
    """
    return [
        (i, k)
        for i, traj in enumerate(trajectories)
        if not traj.edited and not traj.auxiliary
        for k, turn in enumerate(traj.turns)
        if not turn.extras.get("shared") and "snapshot" in turn.extras
    ]


def return_from(traj: Trajectory, k: int) -> float:
    """The undiscounted return of ``traj`` from turn ``k`` on (its outcome included)."""
    return sum(t.reward for t in traj.turns[k:]) + traj.outcome


def monte_carlo(
    policy: Policy,
    pool: EnvPool,
    trajectories: list[Trajectory],
    keys: list[Key],
    k: int,
    cfg: RolloutConfig,
    *,
    seed: int = 0,
    chunk: int = 256,
) -> tuple[dict[Key, TurnTruth], TruthCost]:
    """Estimate A(s_t, a_t) at each turn ``keys`` names, with ``k`` paired continuations.

    Args:
        policy: the policy whose advantage is estimated (the one that played the rollouts).
        pool: envs of the rollouts' id (grown as needed; at most ``chunk`` are used at once).
        trajectories: rollouts played with ``RolloutConfig(snapshots=True)``.
        keys: the turns to estimate (see :func:`scored_turns`).
        k: continuations per turn and per set (K >= 2).
        cfg: how the continuations generate (the rollouts' own settings, snapshots on).
        seed: keys the continuations' noise; the same seed gives the same estimate.
        chunk: most continuations in flight at once (envs in the pool).

    Returns:
        The estimate per turn, and the cost of making it.
    """
    if k < 2:
        raise ValueError(f"k must be at least 2 to estimate a standard error, got {k}")
    cost, start = TruthCost(), time.perf_counter()
    keyed = bool(callable(getattr(pool.envs[0].unwrapped, "set_rng", None)))
    out: dict[Key, TurnTruth] = {}
    per = max(1, chunk // k)
    with Progress("true advantages (Monte Carlo)", len(keys), unit="turns") as progress:
        for first in range(0, len(keys), per):
            part = keys[first : first + per]
            parents = [(trajectories[i], t) for i, t in part]
            noise = [stable_key(seed, i, t, j) >> 24 for i, t in part for j in range(k)]
            env_noise = noise if keyed else None
            fresh = branch(policy, pool, parents, k, cfg, gumbel_keys=noise, env_keys=env_noise)
            forced = branch(
                policy, pool, parents, k, cfg, gumbel_keys=noise, env_keys=env_noise, forced=True
            )
            for n, (i, t) in enumerate(part):
                v = [return_from(c, t) for c in fresh[n * k : (n + 1) * k]]
                q = [return_from(c, t) for c in forced[n * k : (n + 1) * k]]
                out[(i, t)] = paired(q, v)
            cost.rollouts += len(fresh) + len(forced)
            cost.tokens += generated_tokens(fresh) + generated_tokens(forced)
            progress.advance(len(part), continuations=cost.rollouts)
    cost.seconds = time.perf_counter() - start
    return out, cost


def paired(q: list[float], v: list[float]) -> TurnTruth:
    """The advantage from paired returns ``q[j]`` (action taken first) and ``v[j]`` (fresh)."""
    d = np.asarray(q, dtype=float) - np.asarray(v, dtype=float)
    half = len(d) // 2
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.inf
    return TurnTruth(
        advantage=float(d.mean()),
        se=se,
        q=float(np.mean(q)),
        v=float(np.mean(v)),
        halves=(float(d[:half].mean()), float(d[half:].mean())),
        n=len(d),
    )


def has_analytic(trajectories: list[Trajectory], keys: list[Key], policy: str) -> bool:
    """Whether every turn of ``keys`` carries the env's analytic values for ``policy``."""
    return bool(keys) and all(
        policy in (_values(trajectories[i].turns[t].extras) or {}) for i, t in keys
    )


def analytic(
    trajectories: list[Trajectory], keys: list[Key], policy: str = "uniform"
) -> dict[Key, TurnTruth]:
    """The env's analytic advantage of each turn under ``policy`` ("uniform" or "optimal").

    Read from ``info["credit_values"]`` of the state the turn acted from (the rollouts must be
    played with snapshots on a privileged env, which keeps that info).

    Raises:
        ValueError: a turn lacks the values, or its action is not among them.
    """
    out: dict[Key, TurnTruth] = {}
    for i, t in keys:
        turn = trajectories[i].turns[t]
        values = (_values(turn.extras) or {}).get(policy)
        action = str(turn.extras.get("action"))
        if values is None or action not in values["q"]:
            raise ValueError(
                f"turn {t} of rollout {i} has no analytic {policy} value for {action!r}: "
                f"play the rollouts on a privileged env that states {VALUES_KEY}"
            )
        a, q, v = float(values["advantage"][action]), float(values["q"][action]), values["value"]
        out[(i, t)] = TurnTruth(advantage=a, se=0.0, q=q, v=float(v), halves=(a, a))
    return out


def _values(extras: dict[str, Any]) -> dict[str, Any] | None:
    info = extras.get("observation_info") or {}
    values = info.get(VALUES_KEY)
    return values if isinstance(values, dict) else None
