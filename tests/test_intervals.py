"""A mean's interval (METHOD §6.6, issue 40 item 5): with four or more series the t interval over series,
checked by hand and against statsmodels' cluster-robust standard error, and planted where a block bootstrap
cannot see the variation (a level per series); with fewer series the studentized block-bootstrap interval,
checked against an independent bootstrap-t computed from explicit resamples, on a planted skewed case where
the percentile interval misses on one side, determinism, the rated value inside its interval; and WRS's test
on block means and its single-series-group note (METHOD §4)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from causalrate.causal.resampling import (
    SERIES_MIN,
    Resamples,
    block_counts,
    folded,
    interval,
    series_interval,
    small_sample_factor,
    studentized_interval,
)
from causalrate.causal.wrs import Grouping, wrs_scores


def test_studentized_interval_equals_a_bootstrap_t_from_explicit_resamples():
    """iid data, blocks of 1: the count-matrix path (Resamples.intervals) equals Efron & Tibshirani's
    bootstrap-t computed on the resampled arrays themselves, x[idx]."""
    rng = np.random.default_rng(8)
    x = rng.lognormal(0.0, 1.2, 30)
    idx = rng.integers(0, x.size, size=(2000, x.size))
    counts = np.stack([np.bincount(row, minlength=x.size) for row in idx]).astype(float)
    resampled = x[idx]
    t = (resampled.mean(axis=1) - x.mean()) / resampled.std(axis=1)
    low, high = np.quantile(t, [0.025, 0.975])
    expected = (x.mean() - high * x.std(), x.mean() - low * x.std())
    assert Resamples(counts).intervals(x)[0] == pytest.approx(expected, rel=1e-10)


def test_studentized_interval_fixes_the_one_sided_misses_of_a_skewed_mean():
    """Planted: means of 30 lognormal(0, 1) values, true mean e^{1/2}. The percentile interval misses above
    (the sample lacks the tail; measured 0.84 coverage, 15 % above); the studentized one covers ≥ 0.88
    (measured 0.91) and halves the misses above. 400 studies: binomial sd ≈ 0.015."""
    rng = np.random.default_rng(40)
    truth, series = math.exp(0.5), np.zeros(30, dtype=int)
    hits = np.zeros((2, 3))  # [studentized, percentile] × [below, inside, above]
    for _ in range(400):
        x = rng.lognormal(0.0, 1.0, 30)
        resamples = Resamples(block_counts(series, block=1, bootstrap_size=1000, rng=rng))
        means = resamples.means(x)
        for k, (lo, hi) in enumerate([resamples.intervals(x, means)[0], interval(means)]):
            hits[k, 0 if truth < lo else 2 if truth > hi else 1] += 1
    share = hits / 400
    assert share[0, 1] >= 0.88 and share[1, 1] <= 0.87, share
    assert share[0, 2] <= 0.6 * share[1, 2], share


def test_the_rated_value_lies_inside_its_interval_and_edge_cases():
    reps = np.linspace(2.0, 3.0, 101)
    lo, hi = studentized_interval(1.0, 0.5, reps, np.full(101, 0.5))  # every t* > 0: both ends below m …
    assert lo == pytest.approx(1.0 - 0.5 * np.quantile((reps - 1.0) / 0.5, 0.975), rel=1e-12)
    assert hi == 1.0  # … so the upper end is m itself: the rated value stays inside
    assert studentized_interval(2.5, 0.0, reps, np.ones(101)) == interval(reps)  # no spread: percentile
    assert studentized_interval(2.5, 1.0, reps, np.zeros(101)) == interval(reps)  # no replicate sd: percentile
    assert folded(-0.2, 0.4) == (0.0, 0.4)  # a |mean| keeps the folded interval of its mean


def test_same_seed_same_intervals_missing_values_left_out_and_columns_alone():
    series = np.repeat(np.arange(3), 40)
    values = np.random.default_rng(9).lognormal(0.0, 1.0, (series.size, 2))
    values[[3, 50], 0] = np.nan

    def run(seed: int) -> list:
        counts = block_counts(series, block=10, bootstrap_size=300, rng=np.random.default_rng(seed))
        return Resamples(counts, widen=1.3).intervals(values)

    assert run(5) == run(5)
    assert run(5) != run(6)
    (lo, hi), observed = run(5)[0], np.nanmean(values[:, 0])
    assert np.isfinite([lo, hi]).all() and lo <= observed <= hi
    counts = block_counts(series, block=10, bootstrap_size=300, rng=np.random.default_rng(5))
    alone = Resamples(counts, widen=1.3).intervals(values[:, 1])[0]
    assert alone == pytest.approx(run(5)[1], rel=1e-12)


def test_wrs_rows_say_when_groups_are_single_series_and_count_blocks_for_df():
    series = np.repeat(np.arange(4), 6)
    outcomes = {"s": pd.DataFrame({"P1": np.random.default_rng(3).normal(size=24)})}
    one_each = Grouping.of(np.array(list("ABCD")).repeat(6), attribute="company")
    two_each = Grouping.of(np.where(series < 2, "A", "B"), attribute="industry")
    table = wrs_scores(outcomes, [one_each, two_each], series=series, bandwidth=3)
    notes = dict(zip(table["attribute"], table["note"], strict=True))
    assert notes["company"].startswith("all 4 groups compared are a single series each")
    assert "same unit" in notes["company"]
    assert pd.isna(notes["industry"])
    assert pd.isna(wrs_scores(outcomes, [one_each]).loc[0, "note"])  # no series given: nothing to say
    values = outcomes["s"]["P1"].to_numpy()
    assert one_each.df_sizes(values, series, bandwidth=3) == [[2.0, 2.0, 2.0, 2.0]]  # 6 windows: 2 runs of 3
    assert two_each.df_sizes(values, series, bandwidth=3) == [[4.0, 4.0]]
    assert two_each.df_sizes(values, None, bandwidth=3) is None


SERIES = np.array([0, 0, 1, 2, 2, 2, 3, 3])
VALUES = np.array([1.0, 3.0, 4.0, 6.0, 8.0, 10.0, 0.0, 2.0])


def test_series_interval_by_hand_and_as_statsmodels_cluster_robust_t():
    """Series means 2, 4, 8, 1 with 2, 1, 3, 2 windows: m = 34/8 = 4.25, Σ (n_i/N)² (m_i − m)² = 0.31640625 +
    0.0009765625 + 1.9775390625 + 0.66015625 = 2.955078125, se² = 4/3 of it, t_{3, 0.975} = 3.182446305284263."""
    half = 3.182446305284263 * math.sqrt(4 / 3 * 2.955078125)
    assert series_interval(VALUES, SERIES) == pytest.approx((4.25 - half, 4.25 + half), rel=1e-12)
    import statsmodels.api as sm  # an independent implementation: OLS on a constant, errors clustered by series

    fit = sm.OLS(VALUES, np.ones(VALUES.size)).fit(cov_type="cluster", cov_kwds={"groups": SERIES}, use_t=True)
    assert series_interval(VALUES, SERIES) == pytest.approx(tuple(fit.conf_int(0.05)[0]), rel=1e-10)
    missing = np.append(VALUES, np.nan)  # a missing window is left out, its series still counts by its others
    assert series_interval(missing, np.append(SERIES, 1)) == series_interval(VALUES, SERIES)


def test_a_mean_of_positive_values_gets_the_series_interval_on_the_log_scale():
    """VALUES + 0.5 (all positive): m = 4.75, the same half-width h as by hand above; the interval is
    [m·e^{−h/m}, m·e^{h/m}], above 0 where m − h = −1.57 is not, and longer above m than below."""
    half = 3.182446305284263 * math.sqrt(4 / 3 * 2.955078125)
    lo, hi = series_interval(VALUES + 0.5, SERIES)
    assert (lo, hi) == pytest.approx((4.75 * math.exp(-half / 4.75), 4.75 * math.exp(half / 4.75)), rel=1e-12)
    assert 0 < lo < 4.75 - 3 and hi - 4.75 > 4.75 - lo


def test_series_interval_needs_enough_series_and_spread_else_the_block_interval():
    assert SERIES_MIN == 4
    three = SERIES != 3
    assert series_interval(VALUES[three], SERIES[three]) is None
    with_nan = np.where(SERIES == 3, np.nan, VALUES)  # series 3 has no finite value: three series left
    assert series_interval(with_nan, SERIES) is None
    assert series_interval(np.full(8, 2.0), SERIES) is None  # no spread between series
    counts = block_counts(SERIES[three], block=1, bootstrap_size=200, rng=np.random.default_rng(1))
    block = Resamples(counts, 1.2).intervals(VALUES[three])
    assert Resamples(counts, 1.2, SERIES[three]).intervals(VALUES[three]) == block  # three series: the block rule


def test_series_interval_covers_a_level_per_series_that_blocks_cannot_see():
    """Planted: each of 6 series of 30 windows has its own N(0, 1) level plus N(0, 0.5²) noise, true mean 0.
    Within a series the level is constant, so the block bootstrap sees only the noise (measured coverage 0.15);
    the t interval over series is exact for normal series means (measured 0.95). 400 studies: sd ≈ 0.011."""
    rng = np.random.default_rng(1)
    series = np.repeat(np.arange(6), 30)
    widen = small_sample_factor(series, block=5)
    hits = np.zeros(2)
    for _ in range(400):
        x = np.repeat(rng.standard_normal(6), 30) + 0.5 * rng.standard_normal(series.size)
        counts = block_counts(series, block=5, bootstrap_size=200, rng=rng)
        for k, resamples in enumerate([Resamples(counts, widen, series), Resamples(counts, widen)]):
            lo, hi = resamples.intervals(x)[0]
            hits[k] += lo <= 0.0 <= hi
    share = hits / 400
    assert 0.92 <= share[0] <= 0.98 and share[1] <= 0.5, share


def test_a_sparse_mean_keeps_its_interval_within_its_values_range():
    """One series, two non-zero windows of 44 (a perturbation that hits rarely): replicates that draw one of
    them have a tiny sd, their t* explode, and the bootstrap-t's upper end ran to 1e7 for a mean of 0.01 (the
    sensors study); a mean cannot leave its values' range, so the interval is cut to it."""
    series = np.zeros(44, dtype=int)
    values = np.zeros(44)
    values[[7, 30]] = [0.4, 1e-9]
    counts = block_counts(series, block=4, bootstrap_size=400, rng=np.random.default_rng(3))
    resamples = Resamples(counts, widen=1.4)
    reps = resamples.means(values)
    centred = values - values.mean()
    shift = (reps - values.mean()) / 1.4
    sds = np.sqrt(np.maximum(resamples.counts @ centred**2 / resamples.counts.sum(axis=1) - shift**2, 0.0))
    _, unbounded = studentized_interval(values.mean(), values.std(), reps, sds)
    assert unbounded > 10  # the explosion this guards against, planted
    lo, hi = resamples.intervals(values)[0]
    assert 0.0 <= lo <= values.mean() <= hi <= 0.4
