"""Issue 6: intervals, power, inconclusive flags, stability and refutation on planted data."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalrate.causal.effects import DrawSettings, identify_schemes
from causalrate.causal.estimate import estimate_all
from causalrate.causal.refute import backdoor_estimand, refute
from causalrate.causal.resampling import (
    GroupedCounts,
    benjamini_hochberg,
    block_counts,
    group_sums,
    interval,
    power_analysis,
    replicate_means,
    replicate_wrs,
    stability,
)
from causalrate.causal.wrs import Grouping, wrs
from causalrate.rate.binning import bin_ratings
from causalrate.rate.inconclusive import withhold_inconclusive
from causalrate.uncertainty.rigor import Rigor, RowUncertainty, wrs_pairs


def test_block_bootstrap_keeps_each_series_size():
    series = np.repeat([0, 1, 2], [5, 7, 3])
    counts = block_counts(series, block=2, bootstrap_size=50, rng=np.random.default_rng(0))
    for s, size in ((0, 5), (1, 7), (2, 3)):
        assert (counts[:, series == s].sum(axis=1) == size).all()
    values = np.arange(15.0)
    values[3] = np.nan
    means = replicate_means(counts, values)
    c = counts[0] * np.isfinite(values)
    assert means[0] == pytest.approx(np.nansum(c * np.nan_to_num(values)) / c.sum())


def test_ape_interval_coverage_is_near_nominal():
    """95 % intervals of a paired mean over 4 series × 60 windows cover the truth 90–99 % of the time."""
    rng = np.random.default_rng(42)
    series = np.repeat(np.arange(4), 60)
    hits = 0
    simulations = 300
    for _ in range(simulations):
        diffs = 0.3 + rng.normal(0, 1, series.size)
        counts = block_counts(series, block=1, bootstrap_size=200, rng=rng)
        lo, hi = interval(replicate_means(counts, diffs))
        hits += lo <= 0.3 <= hi
    assert 0.90 <= hits / simulations <= 0.99


def test_power_formula_matches_simulation():
    rng = np.random.default_rng(1)
    n, sigma, delta = 80, 1.0, 0.25
    planned = power_analysis(rng.normal(delta, sigma, n), standard_error=sigma / np.sqrt(n), min_effect=delta)
    rejections = np.mean(
        [
            power_analysis(x, standard_error=sigma / np.sqrt(n), min_effect=delta).detected
            for x in rng.normal(delta, sigma, (4000, n))
        ]
    )
    assert planned.power == pytest.approx(rejections, abs=0.03)
    # n_min for 80 % power, by the normal approximation: ((z_.95 + z_.8) σ / δ)²
    assert planned.n_min == pytest.approx(((stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * sigma / delta) ** 2)


def test_no_effect_is_robust_with_enough_windows_and_inconclusive_with_too_few():
    rng = np.random.default_rng(3)
    many = rng.normal(0, 1, 5000)
    few = rng.normal(0, 1, 20)
    enough = power_analysis(many, standard_error=1 / np.sqrt(5000), min_effect=0.1)
    scarce = power_analysis(few, standard_error=1 / np.sqrt(20), min_effect=0.1)
    assert not enough.detected and not enough.inconclusive and enough.power > 0.99
    assert not scarce.detected and scarce.inconclusive and scarce.power < 0.8
    rated = pd.DataFrame(
        {
            "perturbation": ["P1", "P1"],
            "score": ["ape", "ape"],
            "system": ["few", "many"],
            "raw": [0.01, 0.02],
            "rating": [1, 2],
            "insufficient": False,
            "margin": 0.1,
            "relevant": False,
            "improves": False,
        }
    )
    # the scarce test's interval reaches a harm ≥ δ (0.1): inconclusive; the ample one's stays below it
    rigor = Rigor(
        rows={
            ("P1", "ape", "few"): RowUncertainty(power=scarce, ape_true_interval=(-0.4, 0.45)),
            ("P1", "ape", "many"): RowUncertainty(power=enough, ape_true_interval=(-0.03, 0.03)),
        }
    )
    published, shown = withhold_inconclusive(rated, rigor, naive_error=2.0)
    assert published["rating"].tolist() == [2, 2]  # the best level is withheld from the inconclusive one
    assert shown.rows[("P1", "ape", "few")].display == "≥ 2"  # the level it is reported at, not its pre-floor 1
    assert rigor.rows[("P1", "ape", "few")].display is None  # a new value: the rigor results are not changed


def test_stability_separated_versus_identical_systems():
    rng = np.random.default_rng(5)
    series = np.repeat(np.arange(5), 40)
    counts = block_counts(series, block=1, bootstrap_size=400, rng=rng)

    def shares(a, b):
        reps = np.column_stack([replicate_means(counts, a), replicate_means(counts, b)])
        observed = bin_ratings([np.mean(a), np.mean(b)], levels=2)
        return stability(np.vstack([bin_ratings(r, levels=2) for r in reps]), observed)

    assert shares(rng.normal(0, 1, 200), rng.normal(5, 1, 200)).min() == 1.0
    # identical systems: a replicate keeps the observed order with probability Φ(|d| / se), d the observed
    # noise gap, which is uniform on [½, 1] (mean ¾): never the 1.0 of separated systems
    same = shares(rng.normal(0, 1, 200), rng.normal(0, 1, 200))
    assert 0.5 <= same.mean() <= 0.95


def test_replicate_wrs_with_unit_counts_equals_wrs():
    rng = np.random.default_rng(2)
    values = np.r_[rng.normal(0, 1, 30), rng.normal(0.8, 1, 30), rng.normal(0.1, 2, 30)]
    groups = np.repeat(["a", "b", "c"], 30)
    unit = GroupedCounts.of(np.ones((1, 90)), Grouping.of(groups))
    assert replicate_wrs(group_sums(unit, values))[0] == pytest.approx(wrs(values, groups)[0])
    pvalues = wrs_pairs(values, Grouping.of(groups))
    assert len(pvalues) == 3
    assert pvalues[0] == pytest.approx(stats.ttest_ind(values[:30], values[30:60], equal_var=False).pvalue)


def test_replicate_wrs_leaves_out_missing_values_and_groups_without_any():
    rng = np.random.default_rng(4)
    values = np.r_[rng.normal(0, 1, 30), rng.normal(0.8, 1, 30), np.full(30, np.nan), rng.normal(0.3, 1, 30)]
    groups = np.repeat(["a", "b", "c", "d"], 30)
    values[[3, 40, 41]] = np.nan
    keep = np.isfinite(values)
    got = replicate_wrs(group_sums(GroupedCounts.of(np.ones((1, 120)), Grouping.of(groups)), values))[0]
    assert got == pytest.approx(wrs(values[keep], groups[keep])[0])
    assert wrs(values[keep], groups[keep])[1] == 3  # a–b, a–d, b–d: the empty group c is not a pair


def test_refuters_take_the_causal_stages_estimate_and_placebo_gives_about_zero():
    rng = np.random.default_rng(0)
    n = 900
    industry = rng.choice(["A", "B", "C"], n)
    windows = pd.DataFrame({"industry": industry, "company": [f"{i}{k % 2}" for k, i in enumerate(industry)]})
    clean = np.where(industry == "A", 10.0, 1.0) + rng.normal(0, 0.3, n)
    outcomes = {"s": pd.DataFrame({"P0": clean, "P1": clean + 0.5})}  # the planted effect: 0.5 everywhere
    settings = DrawSettings(schemes=("industry",), draws=1, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=1)
    ident = identify_schemes(settings, ["company", "industry"])
    (first,) = estimate_all(windows=windows, outcomes=outcomes, control="P0", settings=settings, identification=ident)
    data = first.sample(windows, ["company", "industry"])
    assert (data["P"].to_numpy() == first.treated).all() and abs(first.ape_obs - 0.5) > 1.0  # confounded sample
    estimate, refutations = refute(
        data, backdoor_estimand(data, ("company", "industry")), first, interval=(0.4, 0.6), seed=1, simulations=5
    )
    assert estimate == pytest.approx(0.5, abs=0.08)
    by_name = {r.refuter: r for r in refutations}
    assert abs(by_name["placebo_treatment"].new_effect) < 0.1 and by_name["placebo_treatment"].passed
    assert by_name["data_subset"].passed and by_name["random_common_cause"].passed


def test_bias_gap_under_counts_is_the_gap_of_the_resampled_windows():
    """Replicate bias gaps (weighted group sums) equal the observed gap of the windows drawn that often."""
    from causalrate.score.bias import bias_gap, observed_bias

    rng = np.random.default_rng(6)
    company = rng.choice(["a", "b", "c", "d"], 200)
    industry = np.where(np.isin(company, ["a", "b"]), "X", "Y")
    values = rng.normal(1.0, 0.1, 200) + (company == "b") * 0.3
    values[[5, 17]] = np.nan
    counts = rng.integers(0, 3, (4, 200)).astype(float)
    reps = bias_gap(group_sums(GroupedCounts.of(counts, Grouping.of(company, industry)), values))
    for b in range(4):
        drawn = np.repeat(np.arange(200), counts[b].astype(int))
        expected = observed_bias(values[drawn], Grouping.of(company[drawn], industry[drawn]))
        assert reps[b] == pytest.approx(expected, rel=1e-12) and expected > 0.1


def test_replicate_means_of_many_columns_equal_each_column_alone():
    rng = np.random.default_rng(7)
    columns = rng.normal(0, 1, (300, 5))
    columns[rng.random((300, 5)) < 0.1] = np.nan  # missing values are left out per column
    counts = block_counts(np.repeat(np.arange(6), 50), block=1, bootstrap_size=30, rng=rng)
    together = replicate_means(counts, columns)
    assert together.shape == (30, 5)
    for k in range(5):
        assert np.allclose(together[:, k], replicate_means(counts, columns[:, k]), rtol=1e-13, atol=0)


def test_benjamini_hochberg_is_scipys_false_discovery_control():
    """Our BH (rating must not import scipy.stats) against scipy's: exactly equal, ties, 2-D and edge cases."""
    rng = np.random.default_rng(5)
    cases = [rng.uniform(size=17), np.round(rng.uniform(size=30), 1), np.array([0.5]), np.array([]), [0.0, 1.0, 1.0]]
    for p in cases:
        assert np.array_equal(benjamini_hochberg(p), stats.false_discovery_control(p, method="bh"))
    matrix = rng.uniform(size=(40, 6)) ** 3
    for axis in (0, 1):
        assert np.array_equal(benjamini_hochberg(matrix, axis=axis), stats.false_discovery_control(matrix, axis=axis))
    with pytest.raises(ValueError):
        benjamini_hochberg([0.1, np.nan])
