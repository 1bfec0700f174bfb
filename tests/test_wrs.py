"""WRS against scipy's Welch test and hand-counted rejections."""

import numpy as np
import pytest
from scipy import stats

from causalrate.causal.wrs import DEFAULT_LEVELS, level_weighted, wrs


def expected_weight(a: np.ndarray, b: np.ndarray) -> float:
    """Independent count: a pair is rejected at confidence c when scipy's two-sided p < 1 - c."""
    p = stats.ttest_ind(a, b, equal_var=False).pvalue
    return sum(w for c, w in DEFAULT_LEVELS if p < 1 - c)


def test_wrs_counts_rejections_like_scipy():
    rng = np.random.default_rng(7)
    shifts = {"x": 0.0, "y": 0.3, "z": 1.5, "w": 0.05}
    samples = {g: rng.normal(s, 1, 25) for g, s in shifts.items()}
    values = np.concatenate(list(samples.values()))
    groups = np.repeat(list(samples), 25)
    names = sorted(samples)
    expected = sum(expected_weight(samples[a], samples[b]) for i, a in enumerate(names) for b in names[i + 1 :])
    score, pairs = wrs(values, groups)
    assert pairs == 6
    assert score == pytest.approx(expected)
    assert 0 < score < 6 * 2.3  # some but not all pairs differ at every level


def test_hand_counted_levels():
    # |t| = 1.0 with 30 df: below t_.975 (2.04), t_.85 (1.055), above t_.80 (0.854) → only the 60 % level
    weights = level_weighted(np.array([[1.0, 1.2, 2.5, 0.1]]), np.full((1, 4), 30.0))  # one pair, four replicates
    assert weights == pytest.approx([0.6, 0.6 + 0.7, 2.3, 0])


def test_company_pairs_only_within_industry():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.normal(0, 1, 20), rng.normal(0, 1, 20), rng.normal(50, 1, 20), rng.normal(50, 1, 20)])
    company = np.repeat(["a", "b", "c", "d"], 20)
    industry = np.repeat(["I", "I", "J", "J"], 20)
    score, pairs = wrs(values, company, within=industry)
    assert pairs == 2  # (a, b) and (c, d), never a-c across industries
    assert score == pytest.approx(
        expected_weight(values[:20], values[20:40]) + expected_weight(values[40:60], values[60:])
    )


def test_constant_groups():
    assert wrs(np.r_[np.ones(5), np.ones(4)], np.repeat(["a", "b"], [5, 4])) == (0.0, 1)
    assert wrs(np.r_[np.ones(5), np.full(4, 2.0)], np.repeat(["a", "b"], [5, 4]))[0] == pytest.approx(2.3)


def test_exceeds_matches_the_t_critical_value_everywhere():
    """The normal-quantile shortcut of `exceeds` gives exactly |t| > stats.t.ppf, small and huge df alike."""
    from scipy import stats

    from causalrate.causal.wrs import exceeds

    rng = np.random.default_rng(3)
    t = np.r_[rng.normal(0, 2, 20_000), 0.0, np.inf, -np.inf, stats.norm.ppf(0.975)]
    df = np.r_[rng.uniform(1, 60, 10_000), 10 ** rng.uniform(2, 12, 10_000), 5.0, 5.0, 5.0, 1e15]
    for level, _ in DEFAULT_LEVELS:
        at = stats.t.ppf((1 + level) / 2, df[:2000])  # on the boundary and one ulp either side of it
        t, df = np.r_[t, at, np.nextafter(at, np.inf), np.nextafter(at, 0)], np.r_[df, np.tile(df[:2000], 3)]
        direct = np.abs(t) > stats.t.ppf((1 + level) / 2, df)
        assert np.array_equal(exceeds(t, df, level), direct)
        assert 0 < direct.sum() < t.size


def test_design_effect_by_hand():
    """values 1…4 of one series, bandwidth 2: block_means runs [1, 2], [3, 4], means 1.5, 3.5 (variance 2,
    K = 2); s² = 5/3: D = n · (2 / 2) / s² = 4 · 3/5 = 2.4. Bandwidth 1: the runs are the windows, D = 1. A
    second series of 5 windows is cut into 2 runs (3 + 2)."""
    from causalrate.causal.wrs import block_means, design_effect

    values = np.array([1.0, 2.0, 3.0, 4.0])
    assert block_means(values, np.zeros(4, dtype=int), bandwidth=2).tolist() == [1.5, 3.5]
    assert design_effect(values, np.zeros(4, dtype=int), bandwidth=2) == pytest.approx(2.4, rel=1e-12)
    assert design_effect(values, np.zeros(4, dtype=int), bandwidth=1) == 1.0
    series = np.r_[np.zeros(4, dtype=int), np.ones(5, dtype=int)]
    both = block_means(np.r_[values, [10.0, 11.0, 12.0, 20.0, 22.0]], series, bandwidth=2)
    assert both.tolist() == [1.5, 3.5, 11.0, 21.0]
    assert design_effect(values, np.zeros(4, dtype=int), bandwidth=0) == 1.0  # the paper's per-window tests
