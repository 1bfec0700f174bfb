"""The one kernel per statistic: Welch's test against scipy and its edge rule, the WRS level weighting and
the wide-table pivot against hand-computed values."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalrate.causal.fragility import _differ
from causalrate.causal.resampling import GroupedCounts, group_sums, replicate_wrs
from causalrate.causal.welch import moments, two_sided_p, welch
from causalrate.causal.wrs import Grouping, grouped_wrs, level_weighted, pair_tests, wrs
from causalrate.score.wide import wide_tables, window_cube
from causalrate.uncertainty.rigor import wrs_pairs


def stacked(samples: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean, var, n = np.array([moments(x) for x in samples]).T
    return mean, var, n


@pytest.mark.parametrize("sizes", [(2, 2), (3, 17), (13, 29), (200, 5), (1000, 1000)])
def test_welch_matches_scipy_vectorised(sizes):
    rng = np.random.default_rng(sum(sizes))
    a = [rng.normal(0, rng.uniform(0.1, 3), sizes[0]) for _ in range(40)]
    b = [rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 3), sizes[1]) for _ in range(40)]
    t, df = welch(*stacked(a), *stacked(b))
    ref = stats.ttest_ind(np.array(a), np.array(b), axis=1, equal_var=False)
    assert t == pytest.approx(ref.statistic, rel=1e-12)
    assert df == pytest.approx(ref.df, rel=1e-12)
    assert two_sided_p(t, df) == pytest.approx(ref.pvalue, rel=1e-10, abs=1e-300)


def test_welch_matches_scipy_on_mixed_sizes_and_scalars():
    rng = np.random.default_rng(5)
    sizes = rng.integers(2, 60, size=(50, 2))
    a = [rng.normal(0, 1, m) for m, _ in sizes]
    b = [rng.normal(0.3, 2, k) for _, k in sizes]
    t, df = welch(*stacked(a), *stacked(b))
    for k in range(len(sizes)):
        ref = stats.ttest_ind(a[k], b[k], equal_var=False)
        assert t[k] == pytest.approx(ref.statistic, rel=1e-12)
        assert df[k] == pytest.approx(ref.df, rel=1e-12)
        scalar_t, scalar_df = welch(*moments(a[k]), *moments(b[k]))
        assert (float(scalar_t), float(scalar_df)) == (t[k], df[k])


def test_design_effects_enter_as_effective_sizes():
    """deff D: the test of a group of n outcomes is the test of n / D of them (standard error and df)."""
    mean_a, var_a, n_a, mean_b, var_b, n_b = 0.4, 1.3, 40.0, -0.1, 0.8, 30.0
    t, df = welch(mean_a, var_a, n_a, mean_b, var_b, n_b, 4.0, 2.0)
    sa, sb = var_a / 10, var_b / 15
    assert t == pytest.approx((mean_a - mean_b) / np.sqrt(sa + sb), rel=1e-14)
    assert df == pytest.approx((sa + sb) ** 2 / (sa**2 / 9 + sb**2 / 14), rel=1e-14)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's and scipy's, on the degenerate samples
def test_edge_rule():
    """Fewer than two outcomes or non-finite moments: no test; no spread on either side: a certain difference
    (t = ±∞, p = 0) or none (t = 0, p = 1), df = n_a + n_b − 2."""
    ones, twos = np.ones(5), np.full(4, 2.0)
    t, df = welch(*moments(ones), *moments(np.ones(4)))
    assert (float(t), float(df), float(two_sided_p(t, df))) == (0.0, 7.0, 1.0)
    t, df = welch(*moments(ones), *moments(twos))
    assert (float(t), float(df), float(two_sided_p(t, df))) == (-np.inf, 7.0, 0.0)
    for a, b in [(ones, np.array([2.0])), (np.array([]), twos), (np.r_[1.0, np.nan], twos), (np.r_[1.0, np.inf], twos)]:
        t, df = welch(*moments(a), *moments(b))
        assert np.isnan(t) and np.isnan(df) and np.isnan(two_sided_p(t, df))
    # one constant group beside a spread one is an ordinary test
    spread = np.array([1.5, 2.5, 2.0, 3.0])
    t, _ = welch(*moments(ones), *moments(spread))
    assert t == pytest.approx(stats.ttest_ind(ones, spread, equal_var=False).statistic, rel=1e-12)


def test_every_caller_follows_the_edge_rule():
    """WRS, its replicates, the BH p-values and the heterogeneity merge: a singleton group is not tested,
    two constant groups differ exactly when their values do."""
    values = np.r_[np.ones(5), np.full(4, 2.0), np.ones(3), 7.0]
    groups = np.repeat(["a", "b", "c", "d"], [5, 4, 3, 1])
    grouping = Grouping.of(groups)
    assert wrs(values, groups) == (2 * 2.3, 3)  # a-b and b-c certain, a-c none, d untested
    assert wrs_pairs(values, grouping) == [0.0, 1.0, 0.0]
    unit = GroupedCounts.of(np.ones((1, values.size)), grouping)
    assert replicate_wrs(group_sums(unit, values)).tolist() == [2 * 2.3]
    assert _differ(np.ones(5), np.full(4, 2.0), 0.05) and not _differ(np.ones(5), np.ones(3), 0.05)
    assert not _differ(np.ones(5), np.array([2.0]), 0.05)


def test_pair_tests_keep_block_and_pair_order():
    rng = np.random.default_rng(2)
    x, z, u, v = rng.normal(0, 1, 10), rng.normal(1, 1, 12), rng.normal(0, 2, 8), rng.normal(5, 1, 9)
    t, df = pair_tests([[x, np.array([3.0]), z], [u, v]], [[1.0, 1.0, 2.0], [1.5, 1.0]])  # the singleton: no test
    expected = [welch(*moments(x), *moments(z), 1.0, 2.0), welch(*moments(u), *moments(v), 1.5, 1.0)]
    assert t.tolist() == [float(e[0]) for e in expected]
    assert df.tolist() == [float(e[1]) for e in expected]


def test_level_weighted_hand_counted():
    # df 30: t_.975 = 2.042, t_.85 = 1.055, t_.80 = 0.854 → weights 1.0, 0.7, 0.6 above each
    t = np.array([[0.1, 0.9, 1.2], [2.1, -2.5, np.inf], [np.nan, 0.0, -1.0]])  # 3 pairs × 3 replicates
    per_replicate = level_weighted(t, np.full(t.shape, 30.0))
    assert per_replicate.tolist() == [  # added pair by pair, level by level
        0.0 + 1.0 + 0.7 + 0.6,
        0.0 + 0.6 + 1.0 + 0.7 + 0.6,
        0.0 + 0.7 + 0.6 + 1.0 + 0.7 + 0.6 + 0.6,
    ]
    assert level_weighted(t[:, 2], np.full(3, 30.0)) == per_replicate[2]  # one WRS: a scalar
    assert level_weighted(np.array([2.5, 0.5]), np.array([30.0, 30.0]), levels=((0.5, 2.0),)) == 2.0
    assert level_weighted(np.empty(0), np.empty(0)) == 0.0


def test_observed_and_replicate_wrs_add_the_same_weights_in_the_same_order():
    """With every window drawn once, a replicate's WRS is the observed WRS to the last bit."""
    rng = np.random.default_rng(11)
    groups = np.repeat(list("abcdef"), 20)
    values = rng.normal(np.repeat(rng.normal(0, 0.4, 6), 20), 1)
    grouping = Grouping.of(groups)
    deff = [[1.0, 1.3, 2.0, 1.0, 1.7, 1.1]]
    observed, pairs = grouped_wrs(grouping.samples(values), design_effects=deff)
    unit = GroupedCounts.of(np.ones((2, values.size)), grouping)
    assert pairs == 15
    assert replicate_wrs(group_sums(unit, values), design_effects=deff).tolist() == [observed, observed]


def test_wide_tables_hand_pivoted():
    forecasts = pd.DataFrame(
        {
            "system": ["b", "a", "a", "a", "b", "a"],
            "window": [0, 1, 0, 2, 1, 5],  # window 5 is beyond the table: left out
            "perturbation": ["clean", "clean", "p1", "clean", "p1", "clean"],
            "outcome": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    wide = wide_tables(forecasts, "outcome", perturbations=["clean", "p1", "p2"], n_windows=3)
    assert list(wide) == ["a", "b"]
    nan = np.nan
    np.testing.assert_array_equal(wide["a"].to_numpy(), [[nan, 3.0, nan], [2.0, nan, nan], [4.0, nan, nan]])
    np.testing.assert_array_equal(wide["b"].to_numpy(), [[1.0, nan, nan], [nan, 5.0, nan], [nan, nan, nan]])
    assert list(wide["a"].columns) == ["clean", "p1", "p2"]


def test_window_cube_keeps_the_systems_asked_for():
    """The recency stage's clean table: a listed system without rows is all NaN, an unlisted one left out."""
    forecasts = pd.DataFrame(
        {
            "system": ["a", "c", "a", "a"],
            "window": [1, 0, 0, 1],
            "perturbation": ["clean", "clean", "p1", "p1"],
            "outcome": [2.0, 9.0, 3.0, 4.0],
        }
    )
    cube = window_cube(forecasts, "outcome", systems=["a", "b"], perturbations=["clean"], n_windows=2)
    np.testing.assert_array_equal(cube[:, :, 0], [[np.nan, 2.0], [np.nan, np.nan]])
