"""``compare``: the paired difference B − A of two results files on the episodes they share.

Episodes pair by ``(env_id, seed, task_id)``: the same env, the same task and the same seed
(which also seeds the agent), so each pair differs only by the agent. Pairing removes the
task-to-task spread from the comparison, which is why a paired test needs far fewer
episodes than comparing two independent means.

Statistics, per pair ``d = success_B − success_A`` (an errored episode is a failure):

- ``diff``: the mean of ``d`` over all pairs, in success-rate points from 0 to 1.
- ``ci_low``/``ci_high``: 95% percentile bootstrap interval of ``diff``, resampling pairs
  with replacement within each env (stratified as in ``stats``), seeded.
- ``prob_improvement``: rliable's probability of improvement of B over A
  (``rliable.metrics.probability_of_improvement``): per env, over all pairs (B run, A run)
  of run scores, P(B > A) + ½·P(B = A) (the Mann-Whitney U statistic over ``n_B·n_A``);
  averaged over envs. A run's score is its mean success over its shared episodes.
- ``min_detectable_diff``: the smallest true difference that a two-sided test at
  alpha = 0.05 detects with 80% power given ``n_pairs`` and the observed standard deviation
  ``sd`` of ``d``, by the normal approximation ``(z_0.975 + z_0.8)·sd/√n ≈ 2.8·sd/√n``.
  Across several envs ``sd`` pools all pairs, which includes the spread between envs, so
  the figure is then slightly conservative.

The ``verdict`` names both sides by agent and file, gives the signed difference and its
interval, then the conclusion, e.g. ``sft+grpo (b.json) vs sft (a.json): sft+grpo − sft =
+7.0 points, 95% CI [+1.7, +12.3]; sft+grpo better``; an interval that holds zero ends in
``no detectable difference``, after the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np

from agentgym.core.errors import BadInput
from agentgym.harness.results import EpisodeRecord, agent_labels
from agentgym.harness.stats import DEFAULT_REPS, episode_score

CONFIDENCE = 0.95
POWER = 0.8
TARGET_DIFF = 0.05  # the verdict says how many pairs would detect 5 points
Z_POWER = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2) + NormalDist().inv_cdf(POWER)
"""z_0.975 + z_0.8 ≈ 1.960 + 0.842 = 2.802: the normal-approximation power factor."""

_CHUNK_CELLS = 1 << 22

PairKey = tuple[str, int, str, int]
Pair = tuple[EpisodeRecord, EpisodeRecord]
"""An episode of A and the episode of B it pairs with."""


class Side(NamedTuple):
    """One side of a comparison as people read it.

    Attributes:
        name: the agent's name, e.g. ``sft+grpo``.
        file: the results file it was read from, if any.
    """

    name: str
    file: str | None = None

    def describe(self) -> str:
        """``name (file)``; the name alone without a file or when it already ends in it."""
        if not self.file or self.name.endswith(f"({self.file})"):
            return self.name
        return f"{self.name} ({self.file})"


def compare(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    names: tuple[str, str] | None = None,
    files: tuple[str | None, str | None] = (None, None),
    bootstrap_seed: int = 0,
    reps: int = DEFAULT_REPS,
) -> dict[str, Any]:
    """Paired comparison of results document ``b`` against ``a`` on their shared episodes.

    Args:
        a: results document A (the baseline), e.g. from ``read_results``.
        b: results document B.
        names: what to call A and B; default their agents' names
            (:func:`agentgym.harness.results.agent_labels`, which adds the file when the two
            names are the same).
        files: the files A and B were read from, named in the verdict.
        bootstrap_seed: seeds the bootstrap; the same documents and seed give the same
            numbers.
        reps: bootstrap replicates.

    Returns:
        ``{diff, ci_low, ci_high, prob_improvement, min_detectable_diff, n_pairs, verdict, a,
        b}`` (diff = B − A, 0–1 scale; ``min_detectable_diff`` is None with fewer than two
        pairs; ``a`` and ``b`` are ``{name, file}``), plus ``by_env`` (the same fields but
        ``a`` and ``b``, per env id) when more than one env is shared. Every value is
        JSON-able.

    Raises:
        BadInput: the files evaluate different versions or data of an env id, or share no
            episode.
    """
    _check_same_envs(a, b)
    pairs = _pair(a["episodes"], b["episodes"])
    if not pairs:
        raise BadInput(
            "A and B share no episode (pairs need the same env id, seed and task id): "
            "evaluate both with the same --root-seed, --split and env ids"
        )
    label_a, label_b = names or agent_labels([a, b], files)
    sides = (Side(label_a, files[0]), Side(label_b, files[1]))
    out = _summary(pairs, sides, bootstrap_seed=bootstrap_seed, reps=reps)
    out["a"], out["b"] = (side._asdict() for side in sides)
    if len(pairs) > 1:
        out["by_env"] = {
            env_id: _summary({env_id: p}, sides, bootstrap_seed=bootstrap_seed, reps=reps)
            for env_id, p in pairs.items()
        }
    return out


# ---------------------------------------------------------------------------- pairing


def _check_same_envs(a: Mapping[str, Any], b: Mapping[str, Any]) -> None:
    """Refuse two files that evaluate the same env id at different versions or data."""
    envs_a = {e["id"]: e for e in a.get("envs") or []}
    for env_b in b.get("envs") or []:
        env_a = envs_a.get(env_b["id"])
        if env_a is None:
            continue
        for field, label in (("version", "versions"), ("data_hash", "data hashes")):
            if env_a.get(field) != env_b.get(field):
                raise BadInput(
                    f"A and B evaluate different {label} of {env_b['id']} "
                    f"(A: {env_a.get(field)}, B: {env_b.get(field)}), so their episodes are "
                    "not comparable: evaluate both on the same env version and data"
                )


def _keyed(episodes: Iterable[EpisodeRecord]) -> dict[PairKey, EpisodeRecord]:
    """Episodes by ``(env_id, seed, task_id, k)``.

    ``k`` counts repeats of that triple in (run, episode) order, so a repeated seed pairs
    first with first.
    """
    out: dict[PairKey, EpisodeRecord] = {}
    seen: dict[tuple[str, int, str], int] = {}
    for ep in sorted(episodes, key=lambda e: (e["env_id"], e["run"], e["episode"])):
        triple = (ep["env_id"], int(ep["seed"]), str(ep["task_id"]))
        k = seen.get(triple, 0)
        seen[triple] = k + 1
        out[(*triple, k)] = ep
    return out


def _pair(
    episodes_a: Iterable[EpisodeRecord], episodes_b: Iterable[EpisodeRecord]
) -> dict[str, list[Pair]]:
    """Shared episodes as ``{env_id: [(episode_a, episode_b), ...]}`` in a fixed order."""
    keyed_a, keyed_b = _keyed(episodes_a), _keyed(episodes_b)
    out: dict[str, list[Pair]] = {}
    for key in sorted(keyed_a.keys() & keyed_b.keys()):
        out.setdefault(key[0], []).append((keyed_a[key], keyed_b[key]))
    return out


# ---------------------------------------------------------------------------- statistics


def _summary(
    pairs: dict[str, list[Pair]], sides: tuple[Side, Side], *, bootstrap_seed: int, reps: int
) -> dict[str, Any]:
    """The comparison's fields (see :func:`compare`) over ``pairs``, pooled across envs."""
    diffs = {
        env_id: np.array([episode_score(eb) - episode_score(ea) for ea, eb in p])
        for env_id, p in pairs.items()
    }
    every = np.concatenate(list(diffs.values()))
    n = int(every.size)
    diff = float(np.mean(every))
    boot = _bootstrap_means(list(diffs.values()), reps, np.random.default_rng(bootstrap_seed))
    alpha = (1.0 - CONFIDENCE) / 2
    ci_low, ci_high = (float(v) for v in np.percentile(boot, [100 * alpha, 100 * (1 - alpha)]))
    sd = float(np.std(every, ddof=1)) if n > 1 else None
    mdd = Z_POWER * sd / math.sqrt(n) if sd is not None else None
    prob = float(np.mean([_prob_improvement(p) for p in pairs.values()]))
    return {
        "diff": diff,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "prob_improvement": prob,
        "min_detectable_diff": mdd,
        "n_pairs": n,
        "verdict": verdict(diff, ci_low, ci_high, n, sd, a=sides[0], b=sides[1]),
    }


def _bootstrap_means(groups: list[np.ndarray], reps: int, rng: np.random.Generator) -> np.ndarray:
    """Mean over all pairs of ``reps`` resamples, shape ``(reps,)``.

    Each resample redraws every group's pairs with replacement and keeps the group's size.
    """
    total = np.zeros(reps)
    for d in groups:
        chunk = max(1, _CHUNK_CELLS // d.size)
        for start in range(0, reps, chunk):
            stop = min(reps, start + chunk)
            idx = rng.integers(0, d.size, size=(stop - start, d.size))
            total[start:stop] += d[idx].sum(axis=1)
    return total / sum(d.size for d in groups)


def _prob_improvement(pairs: list[Pair]) -> float:
    """The probability of improvement (rliable's) of B over A on one env's run scores."""
    runs_a: dict[int, list[float]] = {}
    runs_b: dict[int, list[float]] = {}
    for ea, eb in pairs:
        runs_a.setdefault(int(ea["run"]), []).append(episode_score(ea))
        runs_b.setdefault(int(eb["run"]), []).append(episode_score(eb))
    return probability_of_improvement(
        np.array([np.mean(v) for _, v in sorted(runs_b.items())]),
        np.array([np.mean(v) for _, v in sorted(runs_a.items())]),
    )


def probability_of_improvement(scores_x: np.ndarray, scores_y: np.ndarray) -> float:
    """P(X > Y) + ½·P(X = Y) over all pairs of one task's runs, shapes ``(n_x,)``, ``(n_y,)``.

    Equals ``rliable.metrics.probability_of_improvement`` on one task (its Mann-Whitney U
    statistic divided by ``n_x·n_y``; 0.5 when the two are identical).
    """
    x = np.asarray(scores_x, dtype=np.float64)[:, None]
    y = np.asarray(scores_y, dtype=np.float64)[None, :]
    return float(np.mean((x > y) + 0.5 * (x == y)))


def pairs_needed(sd: float, target: float = TARGET_DIFF) -> int:
    """Pairs for 80% power at two-sided alpha 0.05 to detect ``target``, given the paired sd.

    By the normal approximation: n = ((z_0.975 + z_0.8)·sd / target)².
    """
    return max(2, math.ceil((Z_POWER * sd / target) ** 2))


def verdict(
    diff: float,
    ci_low: float,
    ci_high: float,
    n: int,
    sd: float | None,
    *,
    a: Side,
    b: Side,
) -> str:
    """One line for people that names both sides, then :func:`difference`'s text.

    E.g. "sft+grpo (b.json) vs sft (a.json): sft+grpo − sft = +7.2 points, 95% CI [+3.1,
    +11.0]; sft+grpo better". When the interval holds zero (or there is one pair) it ends in
    "no detectable difference" and how many pairs would detect 5 points.

    Args:
        diff: B − A, 0–1 scale.
        ci_low: lower end of its 95% interval.
        ci_high: upper end.
        n: paired episodes.
        sd: standard deviation of the paired differences (None for one pair).
        a: side A, the baseline.
        b: side B.
    """
    head = f"{b.describe()} vs {a.describe()}: "
    if n < 2:
        reason = "one paired episode is too few to judge"
    elif ci_low > 0 or ci_high < 0:
        return head + difference(diff, ci_low, ci_high, a=a.name, b=b.name)
    elif not sd:
        reason = (
            f"{b.name} and {a.name} got the same outcome on every paired episode, so their "
            "spread cannot say how many pairs would detect 5 points"
        )
    else:
        reason = f"about {pairs_needed(sd)} paired episodes would detect 5 points"
    return head + difference(diff, ci_low, ci_high, a=a.name, b=b.name, reason=reason)


def difference(
    diff: float,
    ci_low: float,
    ci_high: float,
    *,
    a: str,
    b: str,
    over: str = "",
    reason: str | None = None,
) -> str:
    """A difference B − A as people read it: the signed estimate, its interval, the verdict.

    "B − A = +7.2 points, 95% CI [+3.1, +11.0]; B better" (or "; A better"); with an
    interval that holds zero, or any ``reason`` not to judge, "...; no detectable difference"
    and the reason. Every paired comparison the project prints uses this wording.

    Args:
        diff: B − A on the 0–1 scale (printed in points).
        ci_low: lower end of its 95% interval.
        ci_high: upper end.
        a: what to call A.
        b: what to call B.
        over: words after the interval, e.g. " over training and test seeds".
        reason: no verdict either way, for this reason (appended after "no detectable
            difference").
    """
    text = f"{b} − {a} = {_pts(diff)} points, 95% CI [{_pts(ci_low)}, {_pts(ci_high)}]{over}"
    if reason is None and ci_low > 0:
        return f"{text}; {b} better"
    if reason is None and ci_high < 0:
        return f"{text}; {a} better"
    return f"{text}; no detectable difference" + (f"; {reason}" if reason else "")


def _pts(x: float) -> str:
    """A 0-1 difference in signed points with one decimal, e.g. ``+7.0`` (zero is ``+0.0``)."""
    return f"{round(100 * x, 1) + 0.0:+.1f}"
