"""Statistics of a results file: run scores, mean, IQM and stratified bootstrap intervals.

The definitions are rliable's (Agarwal et al., "Deep Reinforcement Learning at the Edge of
the Statistical Precipice", NeurIPS 2021; ``rliable.metrics`` and ``rliable.library`` 1.2):

- a score matrix has shape ``(runs, tasks)``; here a "task" is an env or a task type and a
  run's score is the mean success of its M episodes (an errored episode counts as failure);
- ``aggregate_mean`` is the mean over tasks of the per-task mean over runs;
- ``iqm`` is the 25% trimmed mean of all scores (``scipy.stats.trim_mean(x, 0.25)`` on the
  flattened matrix), reimplemented with numpy so that it evaluates every bootstrap
  replicate at once;
- intervals are percentile intervals of the stratified bootstrap: every replicate resamples
  the runs with replacement independently within each task column, and the interval is
  ``np.percentile`` (linear) of the replicated statistic at ``(1 - c) / 2`` and ``(1 + c) / 2``.

Only the source of randomness differs from rliable: rliable 1.2 draws its indices with
``np.random.choice`` from numpy's *global* RandomState (its ``random_state`` argument does not
reach the resampling), so its intervals change from call to call unless the caller seeds the
global state. Here each interval uses its own ``np.random.default_rng(seed)``; the same seed
always gives the same interval, and an interval never depends on what else was computed. The
replicates follow the same distribution, so the two agree up to Monte-Carlo error (tested
against rliable in ``tests/harness/test_stats.py``).

One case leaves rliable: when every run of a group scored the same 0 or the same 1 (0/50 or
50/50 successes), every bootstrap replicate is that value and the percentile interval has
zero width, which claims certainty that 50 runs cannot give. The mean's interval is then the
exact binomial (Clopper-Pearson) interval of that many successes in that many runs, and the
summary's ``ci_method`` says which of :data:`CI_METHODS` gave it. Runs are the trials, as
they are the bootstrap's units: episodes of one run are not assumed independent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast, overload

import numpy as np

if TYPE_CHECKING:
    from agentgym.harness.results import EnvSummary, Summary

DEFAULT_REPS = 2000
"""Bootstrap replicates per interval. rliable's ``create_performance_profile`` default; the
Monte-Carlo error of a 95% percentile endpoint at 2,000 replicates is about 4% of the
statistic's standard error (e.g. ±0.002 on a success rate whose SE is 0.05), well under the
second decimal that reports show, while an env with 1,000 runs still aggregates in
milliseconds. rliable's ``get_interval_estimates`` defaults to 50,000, which matters only for
publication plots."""

Metric = Callable[[np.ndarray], Any]
"""An aggregate of a score matrix ``(runs, tasks)`` to a scalar. The built-in metrics also
accept a batch ``(..., runs, tasks)`` and reduce the last two axes, which lets the bootstrap
evaluate all replicates at once; any other callable is applied replicate by replicate."""

_CHUNK_CELLS = 1 << 22  # resampled cells held in memory at once (32 MiB of float64)

CI_BOOTSTRAP = "bootstrap-percentile"
"""``ci_method`` of an interval from :func:`stratified_bootstrap_ci` (rliable's)."""
CI_EXACT = "clopper-pearson"
"""``ci_method`` of an exact binomial interval (:func:`clopper_pearson`), used for the mean
when every run scored the same 0 or 1."""
CI_METHODS = (CI_BOOTSTRAP, CI_EXACT)
"""The values of a summary's ``ci_method`` (the results schema lists these)."""


class Estimate(NamedTuple):
    """A point estimate and its bootstrap interval (``ci_low <= ci_high``)."""

    point: float
    ci_low: float
    ci_high: float


# ---------------------------------------------------------------------------- run scores


def episode_score(episode: Mapping[str, Any]) -> float:
    """1.0 for a successful episode, 0.0 otherwise; an errored episode is a failure."""
    return float(bool(episode.get("success")) and episode.get("error") is None)


def run_scores(
    episodes: Iterable[Mapping[str, Any]], env_id: str, task_type: str | None = None
) -> np.ndarray:
    """One score per run of ``env_id``: the mean success of the run's episodes.

    Args:
        episodes: episode records of a results file (``env_id``, ``run``, ``success``,
            ``error``, ``task_type``, ...).
        env_id: the env whose runs to score.
        task_type: when given, only episodes of this task type count, and runs without such
            an episode are dropped.

    Returns:
        Float array of shape ``(n_runs,)`` in [0, 1], ordered by run index; empty when no
        episode matches.
    """
    by_run: dict[int, list[float]] = {}
    for ep in episodes:
        if ep["env_id"] != env_id or (task_type is not None and ep.get("task_type") != task_type):
            continue
        by_run.setdefault(int(ep["run"]), []).append(episode_score(ep))
    return np.array([np.mean(by_run[r]) for r in sorted(by_run)], dtype=np.float64)


# ---------------------------------------------------------------------------- metrics


def aggregate_mean(scores: np.ndarray) -> np.ndarray | float:
    """Mean over tasks of the per-task mean over runs (``rliable.metrics.aggregate_mean``).

    Args:
        scores: shape ``(runs,)`` (one task), ``(runs, tasks)``, or a batch
            ``(..., runs, tasks)``.

    Returns:
        A float for one matrix, shape ``(...)`` for a batch.
    """
    scores = _as_matrix(scores)
    out = np.mean(np.mean(scores, axis=-2), axis=-1)
    return float(out) if out.ndim == 0 else out


def iqm(scores: np.ndarray) -> np.ndarray | float:
    """Interquartile mean: the 25% trimmed mean of all runs and tasks.

    As ``rliable.metrics.aggregate_iqm``, i.e. ``scipy.stats.trim_mean(scores, 0.25,
    axis=None)``.

    ``int(0.25 * n)`` scores are cut from each end (rounded down, as scipy does), so fewer
    than four scores give the plain mean.

    Args:
        scores: shape ``(runs,)``, ``(runs, tasks)``, or a batch ``(..., runs, tasks)``.

    Returns:
        A float for one matrix, shape ``(...)`` for a batch.
    """
    scores = _as_matrix(scores)
    flat = scores.reshape(*scores.shape[:-2], -1)
    n = flat.shape[-1]
    if n == 0:
        raise ValueError("iqm of no scores")
    low = int(0.25 * n)
    high = n - low
    part = np.partition(flat, (low, high - 1), axis=-1)
    out = np.mean(part[..., low:high], axis=-1)
    return float(out) if out.ndim == 0 else out


_BATCHED: tuple[Metric, ...] = (aggregate_mean, iqm)


def _as_matrix(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    return scores[:, None] if scores.ndim == 1 else scores


# ---------------------------------------------------------------------------- bootstrap


@overload
def stratified_bootstrap_ci(
    score_matrix: np.ndarray,
    metric: Metric,
    reps: int = ...,
    seed: int = ...,
    confidence: float = ...,
) -> Estimate: ...


@overload
def stratified_bootstrap_ci(
    score_matrix: Mapping[str, np.ndarray],
    metric: Metric,
    reps: int = ...,
    seed: int = ...,
    confidence: float = ...,
) -> dict[str, Estimate]: ...


def stratified_bootstrap_ci(
    score_matrix: np.ndarray | Mapping[str, np.ndarray],
    metric: Metric,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    confidence: float = 0.95,
) -> Estimate | dict[str, Estimate]:
    """Point estimate and percentile interval of ``metric`` under the stratified bootstrap.

    The reimplementation of ``rliable.library.get_interval_estimates`` with its defaults
    (``method="percentile"``, ``task_bootstrap=False``): each replicate draws, for every cell
    ``(i, j)``, a run index uniformly from ``range(runs)`` and takes the score of that run on
    task ``j`` (runs resampled with replacement, independently per task column, exactly
    ``StratifiedBootstrap.update_indices``). The point estimate is ``metric`` on the data
    itself. See the module docstring for how the random draws relate to rliable's.

    Args:
        score_matrix: scores of shape ``(runs, tasks)`` (or ``(runs,)`` for one task), or, as
            rliable's ``score_dict``, a mapping from a name to such a matrix.
        metric: e.g. ``aggregate_mean`` or ``iqm``; see ``Metric``.
        reps: bootstrap replicates (at least 1).
        seed: seeds ``np.random.default_rng``; each matrix of a mapping starts from the
            same seed, so its interval does not depend on the other entries.
        confidence: coverage of the two-sided interval, strictly between 0 and 1.

    Returns:
        An ``Estimate`` for an array; a dict of them, by the same keys, for a mapping.

    Raises:
        ValueError: an empty matrix, ``reps < 1`` or ``confidence`` outside (0, 1).
    """
    if isinstance(score_matrix, Mapping):
        return {
            key: stratified_bootstrap_ci(m, metric, reps, seed, confidence)
            for key, m in score_matrix.items()
        }
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    scores = _as_matrix(score_matrix)
    if scores.ndim != 2 or scores.size == 0:
        raise ValueError(f"need a non-empty (runs, tasks) matrix, got shape {scores.shape}")
    point = float(metric(scores))
    stats = _replicates(scores, metric, reps, np.random.default_rng(seed))
    alpha = (1.0 - confidence) / 2
    low, high = np.percentile(stats, [100 * alpha, 100 * (1.0 - alpha)])
    return Estimate(point, float(low), float(high))


def _replicates(
    scores: np.ndarray, metric: Metric, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """``metric`` on ``reps`` stratified resamples of ``scores`` ``(runs, tasks)``; ``(reps,)``."""
    runs, tasks = scores.shape
    columns = np.arange(tasks)
    chunk = max(1, _CHUNK_CELLS // scores.size)
    out = np.empty(reps, dtype=np.float64)
    for start in range(0, reps, chunk):
        stop = min(reps, start + chunk)
        rows = rng.integers(0, runs, size=(stop - start, runs, tasks))
        batch = scores[rows, columns]  # (chunk, runs, tasks)
        if metric in _BATCHED:
            out[start:stop] = metric(batch)
        else:
            out[start:stop] = [float(metric(m)) for m in batch]
    return out


def nested_bootstrap_ci(
    groups: Sequence[np.ndarray],
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Mean of the groups' means and its two-level percentile bootstrap interval.

    For scores with two sources of variance, e.g. one group per training seed holding that
    seed's test-run scores: each replicate draws the groups with replacement, then the scores
    within each drawn group with replacement, and takes the mean of the group means. The
    interval therefore covers both the training seeds and the test seeds, where a bootstrap
    of the pooled scores would treat the few training seeds as if they were many.

    Args:
        groups: one 1-D array of scores per group (each non-empty).
        reps: bootstrap replicates (at least 1).
        seed: seeds ``np.random.default_rng``.
        confidence: coverage of the two-sided interval, strictly between 0 and 1.

    Raises:
        ValueError: no group, an empty group, ``reps < 1`` or ``confidence`` outside (0, 1).
    """
    arrays = [np.asarray(g, dtype=np.float64).reshape(-1) for g in groups]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("need at least one group, and no empty group")
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    point = float(np.mean([a.mean() for a in arrays]))
    stats = np.empty(reps, dtype=np.float64)
    for r in range(reps):
        drawn = rng.integers(0, len(arrays), size=len(arrays))
        stats[r] = np.mean(
            [arrays[g][rng.integers(0, arrays[g].size, arrays[g].size)].mean() for g in drawn]
        )
    alpha = (1.0 - confidence) / 2
    low, high = np.percentile(stats, [100 * alpha, 100 * (1.0 - alpha)])
    return Estimate(point, float(low), float(high))


# ---------------------------------------------------------------------------- summaries


class Statistic(NamedTuple):
    """A point statistic that every summary carries besides the ranking's mean and interval.

    Its value is a success rate in [0, 1] like the mean (the results schema gives it the
    mean's bounds). Reports, ``report --json``, the results schema, the leaderboard's checks,
    store and web page all read :data:`STATISTICS`, so a new statistic is one entry there.

    Attributes:
        key: its key in a summary (results files, ``report --json``, the leaderboard).
        label: its column header in reports and on the web page.
        compute: run scores ``(runs,)`` to the statistic (a float).
    """

    key: str
    label: str
    compute: Metric


STATISTICS: tuple[Statistic, ...] = (Statistic("iqm", "IQM", iqm),)
"""The point statistics of a summary, in column order, after the mean."""


def summary_fields() -> tuple[str, ...]:
    """The numeric keys of a summary, in order (a summary also holds ``ci_method``).

    Returns:
        ``n``, ``mean``, one key per :data:`STATISTICS` entry, ``ci_low``, ``ci_high``
        (today ``n, mean, iqm, ci_low, ci_high``).
    """
    return ("n", "mean", *(s.key for s in STATISTICS), "ci_low", "ci_high")


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial (Clopper-Pearson) interval of a success rate.

    Clopper and Pearson, "The use of confidence or fiducial limits illustrated in the case of
    the binomial", Biometrika 1934; computed by ``scipy.stats.binomtest(...).proportion_ci(
    method="exact")``. E.g. 0 successes in 50 trials give [0, 0.0711].

    Args:
        successes: successes, ``0 <= successes <= trials``.
        trials: trials, at least 1.
        confidence: coverage of the two-sided interval.

    Returns:
        ``(low, high)`` in [0, 1].
    """
    from scipy.stats import binomtest  # here: scipy's import costs more than most reports

    ci = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def mean_interval(
    scores: np.ndarray, *, bootstrap_seed: int, reps: int, exact_if_constant: bool = True
) -> tuple[Estimate, str]:
    """The mean of run scores ``(n_runs,)``, its 95% interval and the interval's method.

    The interval is the stratified bootstrap's (one task, so plain resampling of the runs),
    except when ``exact_if_constant`` and every run scored the same 0 or the same 1: then it
    is :func:`clopper_pearson` with one trial per run.

    Returns:
        The estimate and its method, one of :data:`CI_METHODS`.
    """
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    n = int(scores.size)
    if exact_if_constant and n and scores[0] in (0.0, 1.0) and bool(np.all(scores == scores[0])):
        point = float(scores[0])
        low, high = clopper_pearson(int(point) * n, n)
        return Estimate(point, low, high), CI_EXACT
    est = stratified_bootstrap_ci(scores, aggregate_mean, reps=reps, seed=bootstrap_seed)
    return est, CI_BOOTSTRAP


def summarize(
    scores: np.ndarray, *, bootstrap_seed: int, reps: int, exact_if_constant: bool = True
) -> Summary:
    """The summary of one set of run scores ``(n_runs,)``.

    Keys in :func:`summary_fields` order, then ``ci_method``; the mean's interval is
    :func:`mean_interval`'s.
    """
    est, method = mean_interval(
        scores, bootstrap_seed=bootstrap_seed, reps=reps, exact_if_constant=exact_if_constant
    )
    values: dict[str, Any] = {"n": int(scores.shape[0]), "mean": est.point}
    values.update((s.key, float(s.compute(scores))) for s in STATISTICS)
    values.update(ci_low=est.ci_low, ci_high=est.ci_high, ci_method=method)
    return cast("Summary", values)


def aggregate(
    episodes: Sequence[Mapping[str, Any]],
    *,
    bootstrap_seed: int,
    reps: int = DEFAULT_REPS,
    exact_if_constant: bool = True,
) -> dict[str, EnvSummary]:
    """The ``report --json`` document: per env and per task type, over run scores.

    Every interval is drawn from its own generator seeded with ``bootstrap_seed``, so the
    same episodes always give the same numbers, whatever order they come in and whatever
    other envs the file holds.

    Args:
        episodes: the ``episodes`` of a results file.
        bootstrap_seed: the file's ``bootstrap.seed``.
        reps: the file's ``bootstrap.reps``.
        exact_if_constant: the exact interval where every run scored the same 0 or 1 (see
            :func:`mean_interval`); False gives the bootstrap interval everywhere, as results
            files written before ``ci_method`` existed hold.

    Returns:
        ``{env_id: {n, mean, iqm, ci_low, ci_high, ci_method, by_task_type: {task_type: {n,
        mean, iqm, ci_low, ci_high, ci_method}}}}`` (see :func:`summarize`) with env ids and
        task types sorted; ``n`` counts runs.
    """
    types: dict[str, set[str]] = {}
    for ep in episodes:
        kinds = types.setdefault(ep["env_id"], set())
        if ep.get("task_type") is not None:
            kinds.add(ep["task_type"])
    how: dict[str, Any] = {
        "bootstrap_seed": bootstrap_seed,
        "reps": reps,
        "exact_if_constant": exact_if_constant,
    }
    out: dict[str, EnvSummary] = {}
    for env_id in sorted(types):
        summary = summarize(run_scores(episodes, env_id), **how)
        by_task_type = {
            kind: summarize(run_scores(episodes, env_id, kind), **how)
            for kind in sorted(types[env_id])
        }
        out[env_id] = {**summary, "by_task_type": by_task_type}
    return out
