import random

import numpy as np
import pytest

from agentgym.core.errors import BadInput
from agentgym.harness.stats import (
    DEFAULT_REPS,
    Estimate,
    aggregate,
    aggregate_mean,
    clopper_pearson,
    iqm,
    run_scores,
    stratified_bootstrap_ci,
    summarize,
    summary_fields,
)


def _rliable():
    """rliable's library and metrics (a test dependency; 1.2 needs pandas<3)."""
    from rliable import library, metrics

    return library, metrics


def _matrices(runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "uniform": rng.random((runs, 3)),
        "single_task": rng.binomial(5, 0.4, (runs, 1)) / 5,  # M = 5 episodes per run
        "all_equal": np.full((runs, 2), 0.7),
        "binary": rng.integers(0, 2, (runs, 5)).astype(float),
        "beta": rng.beta(2, 5, (runs, 2)),
    }


def _rliable_estimates(mats: dict[str, np.ndarray], reps: int, seed: int):
    """rliable's point estimates and intervals of mean and IQM for every matrix.

    Points come from ``rliable.metrics`` itself. Intervals come from ONE call of rliable's
    ``get_interval_estimates`` on the matrices side by side: stratified resampling treats
    each column on its own, so a block of columns of a resample is a resample of that block.
    Inside that bootstrap the statistics are rliable's formulas written inline with numpy
    (the same operations as our ``aggregate_mean``/``iqm``, which
    ``test_metrics_equal_rliables_exactly`` proves bit-identical to rliable's): scipy's
    ``trim_mean`` costs about 120 us a call, too slow for 20,000 replicates of several
    blocks in a unit test. rliable draws from numpy's global RandomState, so it is seeded
    here and restored after.
    """
    library, metrics = _rliable()
    names = list(mats)
    widths = np.array([mats[k].shape[1] for k in names])
    starts = np.cumsum(widths) - widths
    cuts = [
        (lo, w, int(0.25 * len(mats[names[0]]) * w)) for lo, w in zip(starts, widths, strict=True)
    ]

    def func(scores):  # aggregate_mean and iqm of every block, as cheaply as numpy allows
        means = np.add.reduceat(scores.mean(axis=0), starts) / widths
        iqms = []
        for lo, w, cut in cuts:
            flat = scores[:, lo : lo + w].ravel()
            part = np.partition(flat, (cut, flat.size - cut - 1))
            iqms.append(part[cut : flat.size - cut].mean())
        return np.stack([means, iqms], axis=1).ravel()

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        _, cis = library.get_interval_estimates(
            {"all": np.hstack([mats[k] for k in names])}, func, reps=reps
        )
    finally:
        np.random.set_state(state)
    return {
        k: {
            "mean": (metrics.aggregate_mean(mats[k]), *cis["all"][:, 2 * i]),
            "iqm": (metrics.aggregate_iqm(mats[k]), *cis["all"][:, 2 * i + 1]),
        }
        for i, k in enumerate(names)
    }


@pytest.mark.parametrize(("runs", "reps", "tol"), [(12, 20_000, 0.01), (40, 2_000, 0.02)])
def test_matches_rliable(runs, reps, tol):
    # Tolerances: a 95% endpoint's Monte-Carlo SE is about 0.02 x the statistic's SE at 20k
    # reps (0.04 at 2k, plus the grid step of discrete scores); the statistic's SE here is
    # below 0.1, so each bound is several standard errors of the difference of two
    # independent bootstraps.
    mats = _matrices(runs, np.random.default_rng(runs))
    ref = _rliable_estimates(mats, reps, seed=123)
    worst = 0.0
    for name, m in mats.items():
        for metric, fn in (("mean", aggregate_mean), ("iqm", iqm)):
            point, low, high = ref[name][metric]
            ours = stratified_bootstrap_ci(m, fn, reps=reps, seed=0)
            assert ours.point == point, (name, metric)  # exact
            gap = max(abs(ours.ci_low - low), abs(ours.ci_high - high))
            assert gap < tol, (name, metric, ours, low, high)
            worst = max(worst, gap)
    print(f"runs={runs} reps={reps}: max |ours - rliable| = {worst:.4f}")


def test_metrics_equal_rliables_exactly():
    _, metrics = _rliable()
    rng = np.random.default_rng(11)
    for shape in [(1, 1), (3, 1), (4, 2), (12, 3), (7, 5), (40, 2), (101, 1)]:
        for x in (rng.random(shape), rng.integers(0, 6, shape) / 5):
            for rows in [np.arange(shape[0]), rng.integers(0, shape[0], shape)]:
                m = np.take_along_axis(x, rows, 0) if rows.ndim == 2 else x
                assert aggregate_mean(m) == metrics.aggregate_mean(m)
                assert iqm(m) == metrics.aggregate_iqm(m)


def test_point_estimates_are_rliables_formulas():
    x = np.arange(10.0)[:, None] * np.array([[1.0, 2.0]])
    assert aggregate_mean(x) == np.mean(np.mean(x, axis=0), axis=0)
    # trim_mean(., 0.25) of 20 values cuts 5 from each end
    assert iqm(x) == np.mean(np.sort(x.ravel())[5:15])
    assert iqm(np.array([3.0, 1.0, 2.0])) == 2.0  # int(0.75) = 0: nothing cut
    from scipy import stats as scipy_stats

    y = np.random.default_rng(1).random((7, 3))
    assert iqm(y) == scipy_stats.trim_mean(y, 0.25, axis=None)


def test_bootstrap_is_deterministic_and_seeded():
    x = np.random.default_rng(2).random((15, 4))
    a = stratified_bootstrap_ci(x, aggregate_mean, reps=500, seed=9)
    assert a == stratified_bootstrap_ci(x, aggregate_mean, reps=500, seed=9)
    assert a != stratified_bootstrap_ci(x, aggregate_mean, reps=500, seed=10)
    assert isinstance(a, Estimate) and a.ci_low <= a.point <= a.ci_high
    # a mapping is rliable's score_dict: each entry as if alone
    both = stratified_bootstrap_ci({"x": x, "half": x[:, :2]}, aggregate_mean, 500, 9)
    assert both["x"] == a
    assert both["half"] == stratified_bootstrap_ci(x[:, :2], aggregate_mean, 500, 9)


def test_any_callable_metric_gives_the_batched_numbers():
    x = np.random.default_rng(3).random((9, 2))
    fast = stratified_bootstrap_ci(x, iqm, reps=300, seed=4)
    slow = stratified_bootstrap_ci(x, lambda m: iqm(m), reps=300, seed=4)
    assert fast == pytest.approx(slow, abs=1e-12)


def test_degenerate_inputs():
    assert stratified_bootstrap_ci(np.full((5, 1), 0.3), aggregate_mean, 100, 0) == (
        pytest.approx(0.3),
        pytest.approx(0.3),
        pytest.approx(0.3),
    )
    one_run = stratified_bootstrap_ci(np.array([0.5]), aggregate_mean, 100, 0)
    assert one_run == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="non-empty"):
        stratified_bootstrap_ci(np.zeros((0, 2)), aggregate_mean, 100, 0)
    with pytest.raises(ValueError, match="confidence"):
        stratified_bootstrap_ci(np.ones(3), aggregate_mean, 100, 0, confidence=95)


def _ep(run, episode, success, task_type, env_id="E", error=None):
    return {
        "env_id": env_id,
        "run": run,
        "episode": episode,
        "seed": 1000 * run + episode,
        "task_id": f"t{episode}",
        "task_type": task_type,
        "success": success,
        "return": float(success),
        "steps": 3,
        "error": error,
    }


def _episodes():
    # 4 runs x 2 episodes of E: episode 0 is "lookup", episode 1 is "compare" (run 3 has no
    # compare episode); F has one run. Run 2's compare episode errored (success is ignored).
    eps = [
        _ep(0, 0, True, "lookup"),
        _ep(0, 1, False, "compare"),
        _ep(1, 0, True, "lookup"),
        _ep(1, 1, True, "compare"),
        _ep(2, 0, False, "lookup"),
        _ep(2, 1, True, "compare", error="Timeout"),
        _ep(3, 0, True, "lookup"),
        _ep(3, 1, True, "lookup"),
        _ep(0, 0, True, "lookup", env_id="F"),
    ]
    return eps


def test_run_scores_per_run_and_task_type():
    eps = _episodes()
    np.testing.assert_array_equal(run_scores(eps, "E"), [0.5, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(run_scores(eps, "E", "lookup"), [1.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(run_scores(eps, "E", "compare"), [0.0, 1.0, 0.0])
    assert run_scores(eps, "nope").shape == (0,)


def test_aggregate_breaks_down_by_task_type_deterministically():
    eps = _episodes()
    out = aggregate(eps, bootstrap_seed=5, reps=DEFAULT_REPS)
    assert list(out) == ["E", "F"]
    e = out["E"]
    assert list(e) == [*summary_fields(), "ci_method", "by_task_type"]
    assert (e["n"], e["mean"], e["iqm"]) == (4, 0.625, 0.75)  # IQM of [0, .5, 1, 1]
    assert 0.0 <= e["ci_low"] <= e["mean"] <= e["ci_high"] <= 1.0
    assert list(e["by_task_type"]) == ["compare", "lookup"]
    compare = e["by_task_type"]["compare"]
    assert (compare["n"], compare["mean"]) == (3, pytest.approx(1 / 3))
    assert tuple(compare) == (*summary_fields(), "ci_method")
    assert (e["ci_method"], compare["ci_method"]) == ("bootstrap-percentile",) * 2
    # F's one run won: not [1, 1] but the exact interval of 1 success in 1 trial
    assert out["F"]["ci_method"] == "clopper-pearson"
    assert (out["F"]["ci_low"], out["F"]["ci_high"]) == (pytest.approx(0.025), 1.0)
    # same input, same numbers, whatever the order of the episodes
    shuffled = eps[::-1]
    random.Random(0).shuffle(shuffled)
    assert aggregate(shuffled, bootstrap_seed=5, reps=DEFAULT_REPS) == out
    # an env's interval does not depend on the other envs in the file
    alone = aggregate([x for x in eps if x["env_id"] == "E"], bootstrap_seed=5, reps=DEFAULT_REPS)
    assert alone["E"] == e


def test_plot_writes_a_png(tmp_path):
    from agentgym.harness.plot import plot_report

    report = aggregate(_episodes(), bootstrap_seed=0, reps=200)
    path = tmp_path / "sub" / "report.png"
    plot_report({"random": report}, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_plot_names_its_agents_and_what_each_axis_shows():
    from agentgym.harness.plot import report_figure

    first = aggregate(_episodes(), bootstrap_seed=0, reps=200)
    second = aggregate(
        [{**e, "success": not e["success"]} for e in _episodes()], bootstrap_seed=0, reps=200
    )
    ax = report_figure({"sft": first, "sft+grpo": second}).axes[0]
    assert ax.get_xlabel().startswith("success rate (mean over runs, 95% CI)")
    assert "exact binomial" in ax.get_xlabel()  # F's single run gets the exact interval
    assert ax.get_ylabel() == "environment, then agent (task types below each bar)"
    assert ax.get_title() == "Mean success per environment: sft, sft+grpo"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["sft", "sft+grpo"]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks == ["E", "sft", "sft+grpo", "F", "sft", "sft+grpo"]
    bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["E", "F"]
    means = sorted(round(p.get_width(), 3) for p in ax.patches)
    assert means == [0.0, 0.25, 0.625, 1.0]  # one bar per agent and env (errors fail)
    assert "0.625 (n=4)" in {t.get_text() for t in ax.texts}
    many = report_figure({f"agent number {i}": first for i in range(8)}).axes[0]
    assert many.get_title() == "Mean success per environment: 8 agents (see legend)"
    with pytest.raises(BadInput, match="no env to plot"):
        report_figure({"sft": {}})


def test_every_run_alike_gives_the_exact_binomial_interval():
    none = summarize(np.zeros(50), bootstrap_seed=0, reps=DEFAULT_REPS)  # 0/50
    assert none["ci_method"] == "clopper-pearson"
    assert (none["mean"], none["ci_low"]) == (0.0, 0.0)
    assert none["ci_high"] == pytest.approx(0.07112, abs=1e-5)
    every = summarize(np.ones(50), bootstrap_seed=0, reps=DEFAULT_REPS)  # 50/50
    assert every["ci_method"] == "clopper-pearson"
    assert every["ci_low"] == pytest.approx(0.92888, abs=1e-5) and every["ci_high"] == 1.0
    assert (every["mean"], every["iqm"]) == (1.0, 1.0)  # only the interval changes
    assert clopper_pearson(0, 50) == (0.0, pytest.approx(1 - 0.025 ** (1 / 50)))
    # the same score everywhere but not a success rate of 0 or 1 keeps the bootstrap
    half = summarize(np.full(50, 0.5), bootstrap_seed=0, reps=DEFAULT_REPS)
    assert half["ci_method"] == "bootstrap-percentile" and half["ci_low"] == 0.5
    legacy = summarize(np.zeros(50), bootstrap_seed=0, reps=100, exact_if_constant=False)
    assert (legacy["ci_low"], legacy["ci_high"], legacy["ci_method"]) == (
        0.0,
        0.0,
        "bootstrap-percentile",
    )


def test_a_mixed_group_keeps_the_bootstrap_interval_exactly():
    scores = np.r_[np.zeros(49), 1.0]  # 1/50: the bootstrap, as before
    summary = summarize(scores, bootstrap_seed=3, reps=DEFAULT_REPS)
    est = stratified_bootstrap_ci(scores, aggregate_mean, reps=DEFAULT_REPS, seed=3)
    assert summary["ci_method"] == "bootstrap-percentile"
    assert (summary["mean"], summary["ci_low"], summary["ci_high"]) == tuple(est)
    assert summary["ci_high"] < 0.07  # a bootstrap interval: narrower than exact would be


def test_nested_bootstrap_covers_the_spread_between_groups():
    from agentgym.harness.stats import nested_bootstrap_ci

    same = [np.array([0.0, 1.0] * 50)] * 3
    apart = [np.array([0.0, 1.0] * 50) * 0, np.ones(100), np.array([0.0, 1.0] * 50)]
    tight, wide = nested_bootstrap_ci(same, seed=1), nested_bootstrap_ci(apart, seed=1)
    assert tight.point == pytest.approx(0.5) and wide.point == pytest.approx(0.5)
    # three seeds at 0, 1 and 0.5: the interval must span most of [0, 1]; pooled it would not
    assert wide.ci_high - wide.ci_low > 0.6 > 3 * (tight.ci_high - tight.ci_low)
    assert nested_bootstrap_ci(apart, seed=1) == wide  # same seed, same interval
    with pytest.raises(ValueError, match="empty group"):
        nested_bootstrap_ci([np.ones(3), np.array([])])
