"""How well a credit variant's per-turn advantages match the true ones: the statistics.

* rank correlation (Spearman) between the variant's advantage of each turn and the true one,
  with a bootstrap interval over groups (a group's rollouts share a task and a baseline, so
  its turns are not independent; over rollouts when there are fewer than
  :data:`MIN_CLUSTERS` groups);
* sign agreement over the turns whose true sign is resolved (its 95% interval excludes
  zero, or an analytic value other than zero): a turn the variant gives
  no credit (0) counts as a disagreement;
* the ground truth's own reliability: the rank correlation of its two half-estimates
  corrected to the full K by Spearman-Brown, the ceiling no variant can be shown to pass;
* batch noise: how much a turn's advantage moves when the other rollouts of its group are
  resampled, as a share of the spread of advantages over turns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from agentgym.baselines.batch import Key
from agentgym.baselines.truth import TurnTruth

MIN_CLUSTERS = 5
"""Fewest groups the bootstrap resamples; with fewer it resamples rollouts."""
BOOTSTRAP_REPS = 2000
EPS = 1e-9
"""Advantages this close to zero count as zero (floating-point residue of exact values)."""


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation, 0 where either side is constant (no ranking to agree on)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(stats.spearmanr(a, b).statistic)


def clusters(keys: Sequence[Key], groups: Mapping[int, str]) -> np.ndarray:
    """The resampling unit of each turn: its group, or its rollout when groups are too few."""
    by_group = [groups[i] for i, _ in keys]
    if len(set(by_group)) >= MIN_CLUSTERS:
        names = {g: n for n, g in enumerate(dict.fromkeys(by_group))}
        return np.array([names[g] for g in by_group])
    return np.array([i for i, _ in keys])


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float],
    unit: np.ndarray,
    *,
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> tuple[float, float]:
    """95% percentile interval of ``statistic(rows)``, resampling whole clusters ``unit``."""
    rng = np.random.default_rng(seed)
    ids = np.unique(unit)
    members = [np.flatnonzero(unit == u) for u in ids]
    draws = []
    for _ in range(reps):
        pick = np.concatenate([members[j] for j in rng.integers(len(ids), size=len(ids))])
        draws.append(statistic(pick))
    low, high = np.nanpercentile(draws, [2.5, 97.5])  # NaN: a resample without the turns
    return float(low), float(high)


def paired_difference(
    credit: Mapping[Key, float],
    baseline: Mapping[Key, float],
    truth: Mapping[Key, TurnTruth],
    groups: Mapping[int, str],
    *,
    seed: int = 0,
) -> dict[str, float]:
    """Rank correlation of ``credit`` minus that of ``baseline`` on the same turns.

    The interval resamples the same clusters for both, so what the two share (the batch, the
    truth's noise) cancels.
    """
    keys = [key for key in truth if key in credit and key in baseline]
    a = np.array([credit[key] for key in keys], dtype=float)
    b = np.array([baseline[key] for key in keys], dtype=float)
    y = np.array([truth[key].advantage for key in keys], dtype=float)

    def diff(rows: np.ndarray) -> float:
        return spearman(a[rows], y[rows]) - spearman(b[rows], y[rows])

    low, high = bootstrap_interval(diff, clusters(keys, groups), seed=seed)
    return {"diff": diff(np.arange(len(keys))), "ci_low": low, "ci_high": high}


def resolved(truth: TurnTruth) -> bool:
    """Whether the true sign of a turn is known.

    It is for an analytic value other than zero, and for an estimate whose 95% interval
    (Student's t) excludes zero.
    """
    low, high = truth.interval()
    return low > EPS or high < -EPS


def sign_agreement(x: np.ndarray, truths: Sequence[TurnTruth]) -> tuple[float, int]:
    """The share of resolved turns whose credit has the true sign, and how many were resolved."""
    agree = [
        np.sign(value) == np.sign(t.advantage)
        for value, t in zip(x, truths, strict=True)
        if resolved(t)
    ]
    return (float(np.mean(agree)) if agree else float("nan")), len(agree)


def reliability(truths: Sequence[TurnTruth]) -> float:
    """Split-half rank reliability of the ground truth, Spearman-Brown corrected (1 if exact)."""
    if all(t.exact for t in truths):
        return 1.0
    r = spearman([t.halves[0] for t in truths], [t.halves[1] for t in truths])
    return float(2 * r / (1 + r)) if r > -1 else float("nan")


def batch_noise(full: Mapping[Key, float], resampled: Sequence[Mapping[Key, float]]) -> float:
    """Mean per-turn variance across resampled batches over the variance across turns.

    0: a turn's credit does not depend on which other rollouts shared its batch; 1: the
    batch decides as much as the turn does. NaN when the advantages do not vary over turns.
    """
    spread = float(np.var(list(full.values()))) if full else 0.0
    if spread == 0 or not resampled:
        return float("nan")
    per_turn = []
    for key in full:
        seen = [r[key] for r in resampled if key in r]
        if len(seen) >= 2:
            per_turn.append(float(np.var(seen, ddof=1)))
    return float(np.mean(per_turn) / spread) if per_turn else float("nan")


def fidelity(
    credit: Mapping[Key, float],
    truth: Mapping[Key, TurnTruth],
    groups: Mapping[int, str],
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """The fidelity statistics of one variant's per-turn credit against the truth.

    Args:
        credit: the variant's advantage per scored turn (0 where it gives none).
        truth: the true advantage per scored turn (the same keys).
        groups: the group id of each rollout index.
        seed: the bootstrap's seed.
    """
    keys = [key for key in truth if key in credit]
    x = np.array([credit[key] for key in keys], dtype=float)
    y = np.array([truth[key].advantage for key in keys], dtype=float)
    rho = spearman(x, y)
    low, high = bootstrap_interval(
        lambda rows: spearman(x[rows], y[rows]), clusters(keys, groups), seed=seed
    )
    truths = [truth[key] for key in keys]
    agree, n_resolved = sign_agreement(x, truths)
    hits = np.array([np.sign(v) == np.sign(t.advantage) for v, t in zip(x, truths, strict=True)])
    known = np.array([resolved(t) for t in truths], dtype=bool)
    sign_low, sign_high = float("nan"), float("nan")
    if known.any():
        sign_low, sign_high = bootstrap_interval(
            lambda rows: float(hits[rows][known[rows]].mean()) if known[rows].any() else np.nan,
            clusters(keys, groups),
            seed=seed,
        )
    return {
        "turns": len(keys),
        "spearman": rho,
        "ci_low": low,
        "ci_high": high,
        "sign_agreement": agree,
        "sign_ci": [sign_low, sign_high],
        "resolved_turns": n_resolved,
        "credited_share": float(np.mean(x != 0)) if len(x) else float("nan"),
    }


def truth_summary(truth: Mapping[Key, TurnTruth]) -> dict[str, Any]:
    """The ground truth's own quality: its median standard error and split-half reliability."""
    truths = list(truth.values())
    ses = [t.se for t in truths]
    return {
        "turns": len(truths),
        "median_se": float(np.median(ses)) if ses else float("nan"),
        "reliability": reliability(truths) if truths else float("nan"),
        "resolved_turns": sum(resolved(t) for t in truths),
    }
