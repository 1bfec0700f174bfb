"""Rating stability under the rule that made the rating (tiers re-tiers every replicate; paper bins it by
rank), and the inconclusive "≥ k" — planted systems whose answer is known by construction."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalrate.causal.resampling import Power, block_counts, replicate_means, stability
from causalrate.parameters import RatingSettings
from causalrate.rate.binning import bin_ratings
from causalrate.rate.inconclusive import withhold_inconclusive
from causalrate.rate.ratings import rate_scores
from causalrate.rate.stability import with_stability
from causalrate.rate.tiers import (
    bootstrap_p_value,
    replicate_tier_ratings,
    t_test_p_value,
    tier_ratings,
    translated_bootstrap_p_values,
    translated_t_test_p_values,
)
from causalrate.uncertainty.rigor import Rigor, RowUncertainty

SERIES = np.repeat(np.arange(5), 40)  # 200 windows in 5 series
COUNTS = block_counts(SERIES, block=1, bootstrap_size=400, rng=np.random.default_rng(11))


def inconclusive_row(flag: bool, upper: float = 0.2) -> RowUncertainty:
    """An APE row whose test of "no effect" was (or was not) inconclusive, its signed interval reaching `upper`."""
    return RowUncertainty(
        power=Power(np.nan, np.nan, np.nan, 0.1, detected=False, inconclusive=flag), ape_true_interval=(-0.05, upper)
    )


def assess(errors: dict[str, np.ndarray], rule: str, inconclusive: frozenset = frozenset()):
    """Rate the APE of each system (its per-window effects `errors`) on P1 and add stability as the pipeline does."""
    systems = sorted(errors)
    raw = pd.DataFrame(
        {
            "perturbation": "P1",
            "score": "ape",
            "system": systems,
            "raw": [float(np.mean(errors[s])) for s in systems],
            "coverage": 1.0,
            "quantity": np.nan,
        }
    )
    settings = RatingSettings(levels=3, rule=rule, scale="relative")
    rigor = Rigor(
        rows={("P1", "ape", s): inconclusive_row(s in inconclusive) for s in systems},
        replicate_values={("ape", "P1"): {s: replicate_means(COUNTS, errors[s]) for s in systems}},
        bootstrap=frozenset({("ape", "P1")}),
    )
    rated = rate_scores(raw, settings=settings, replicates=rigor.replicate_values)
    before = rigor
    rigor = with_stability(rigor, rated, settings=settings, control="P0")
    assert before.rows == {("P1", "ape", s): inconclusive_row(s in inconclusive) for s in systems}  # a new value
    shares = {s: rigor.rows[("P1", "ape", s)].stability for s in systems}
    return rated.set_index("system")["rating"].to_dict(), shares, rigor


def identical_pair():
    a = np.random.default_rng(1).normal(1.0, 0.3, SERIES.size)
    return {"a": a, "b": np.random.default_rng(2).permutation(a)}  # the same errors, other windows


def test_identical_systems_tied_at_level_1_are_stable_under_tiers_and_a_coin_flip_under_paper():
    ratings, shares, rigor = assess(identical_pair(), "tiers")
    assert ratings == {"a": 1, "b": 1}
    assert min(shares.values()) >= 0.9  # re-tiered, they stay tied unless a replicate makes them differ (≈ 5 %)
    assert rigor.overall_stability == pytest.approx(shares)  # one robustness row: the headline is that row
    _, paper, _ = assess(identical_pair(), "paper")
    assert all(0.3 <= v <= 0.7 for v in paper.values())  # rank binning splits them in every replicate


def test_a_system_on_the_tier_boundary_is_unstable():
    pair = identical_pair()
    gap = replicate_means(COUNTS, pair["a"]) - replicate_means(COUNTS, pair["b"])
    shift = float(np.quantile(gap, 0.975))  # b's mean sits where the paired test's p-value is 5 %
    _, shares, _ = assess({"a": pair["a"], "b": pair["b"] + shift}, "tiers")
    assert 0.2 <= shares["b"] <= 0.8  # tied with a (level 1) in about half the replicates, a level below in the rest
    assert shares["a"] == 1.0  # a is best whether b ties with it or not


def test_clearly_separated_systems_are_fully_stable():
    rng = np.random.default_rng(4)
    errors = {name: rng.normal(mean, 0.3, SERIES.size) for name, mean in [("good", 1), ("mid", 3), ("bad", 5)]}
    for rule in ("tiers", "paper"):
        ratings, shares, rigor = assess(errors, rule)
        assert ratings == {"good": 1, "mid": 2, "bad": 3}
        assert shares == {"good": 1.0, "mid": 1.0, "bad": 1.0}
        assert rigor.overall_stability == {"good": 1.0, "mid": 1.0, "bad": 1.0}


def test_paper_stability_is_the_rank_binning_share_of_replicates():
    rng = np.random.default_rng(6)
    errors = {name: rng.normal(mean, 1.0, SERIES.size) for name, mean in [("p", 1.0), ("q", 1.1), ("r", 1.3)]}
    ratings, shares, rigor = assess(errors, "paper")
    systems = sorted(errors)
    reps = np.column_stack([replicate_means(COUNTS, errors[s]) for s in systems])
    observed = bin_ratings([np.mean(errors[s]) for s in systems], levels=3)
    expected = stability(np.vstack([bin_ratings(row, levels=3) for row in reps]), observed)
    assert [ratings[s] for s in systems] == observed.tolist()
    assert [shares[s] for s in systems] == pytest.approx(expected.tolist())
    assert 0 < min(expected) < 1  # a case where the share says something
    assert [rigor.overall_stability[s] for s in systems] == pytest.approx(expected.tolist())


def test_a_replicate_at_the_observed_values_is_tiered_exactly_as_the_rating():
    rng = np.random.default_rng(8)
    reps = rng.normal([0.0, 0.15, 0.5, 0.55], 0.2, size=(300, 4))
    raw = reps[17].copy()  # the observed values are one of the replicates
    d = reps[:, 0] - reps[:, 2]
    assert translated_bootstrap_p_values(raw[0] - raw[2], d)[17] == bootstrap_p_value(reps[:, 0] - reps[:, 2])
    assert (replicate_tier_ratings(raw, reps, levels=3)[17] == tier_ratings(raw, reps, levels=3)[0]).all()
    higher = replicate_tier_ratings(-raw, -reps, levels=3, higher_is_better=True)
    assert (higher == replicate_tier_ratings(raw, reps, levels=3)).all()


def test_inconclusive_shows_the_level_it_is_reported_at_and_its_stability_is_of_that_level():
    pair = identical_pair()
    errors = {"a": pair["a"], "b": pair["b"] + 1e-6, "c": np.random.default_rng(3).normal(5.0, 0.3, SERIES.size)}
    ratings, shares, rigor = assess(errors, "paper", inconclusive=frozenset({"a", "c"}))
    assert ratings["a"] == 1 and ratings["c"] == 3
    rated = rate_scores(
        pd.DataFrame(
            {"perturbation": "P1", "score": "ape", "system": sorted(errors), "coverage": 1.0, "quantity": np.nan}
            | {"raw": [float(np.mean(errors[s])) for s in sorted(errors)]}
        ),
        settings=RatingSettings(levels=3, rule="paper", scale="relative"),
    )
    published, shown = withhold_inconclusive(rated, rigor, naive_error=2.0)
    assert published.set_index("system")["rating"].to_dict() == {"a": 2, "b": 2, "c": 3}
    assert rated["rating"].tolist() == [1, 2, 3]  # the input is left as it was
    assert shown.rows[("P1", "ape", "a")].display == "≥ 2"  # not "≥ 1": the best level is withheld
    assert shown.rows[("P1", "ape", "c")].display == "≥ 3"
    assert shown.rows[("P1", "ape", "b")].display is None and rigor.rows[("P1", "ape", "a")].display is None
    # the harm its interval leaves open, in raw units and as a share of the naive reference's clean error
    assert published.set_index("system").loc["a", ["cannot_rule_out", "cannot_rule_out_share"]].tolist() == [0.2, 0.1]
    # a reads "≥ 2" in every replicate (1 or 2 by rank, floored): fully stable; b still flips with a
    assert shares["a"] == 1.0 and 0.3 <= shares["b"] <= 0.7 and shares["c"] == 1.0


def draw_stability(per_draw: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Rate ape_industry (replicates: the observational draws, their mean rated) and add its stability."""
    systems = sorted(per_draw)
    raw = pd.DataFrame(
        {
            "perturbation": "P1",
            "score": "ape_industry",
            "system": systems,
            "raw": [float(np.mean(per_draw[s])) for s in systems],
            "coverage": 1.0,
            "quantity": np.nan,
        }
    )
    settings = RatingSettings(levels=3, scale="relative")
    rigor = Rigor(replicate_values={("ape_industry", "P1"): per_draw})  # draws: no bootstrap, no headline stability
    rated = rate_scores(raw, settings=settings, replicates=rigor.replicate_values)
    rigor = with_stability(rigor, rated, settings=settings, control="P0")
    shares = {s: rigor.rows[("P1", "ape_industry", s)].stability for s in systems}
    return rated.set_index("system")["rating"].to_dict(), shares


def test_draw_replicates_are_re_tested_as_replicates_of_their_mean():
    # a draw moves the rated mean by (d_b − mean d)/√n: its t is t + (d_b − mean d)/sd, checked with scipy
    rng = np.random.default_rng(9)
    d = rng.normal(0.1, 0.3, 20)
    mean = d.mean()
    for b in (0, 7, 19):
        moved = d - mean + mean + (d[b] - mean) / np.sqrt(d.size)  # the same sd, centred on the replicate
        assert translated_t_test_p_values(0.0, d)[b] == pytest.approx(stats.ttest_1samp(moved, 0).pvalue)
    symmetric = np.array([-1.0, 0.0, 1.0, 2.0, 3.0])  # its draw 2 is its mean: re-tested exactly as rated
    assert translated_t_test_p_values(0.0, symmetric)[2] == pytest.approx(t_test_p_value(symmetric), rel=1e-12)
    assert translated_t_test_p_values(0.0, np.array([1.0, np.nan])).tolist() == [1.0, 1.0]


def test_draw_scores_are_stable_when_clearly_apart_and_mostly_when_tied():
    rng = np.random.default_rng(10)
    a = 1.0 + rng.normal(0, 0.05, 20)
    ratings, shares = draw_stability({"a": a, "b": a + 0.5 + rng.normal(0, 0.05, 20)})
    assert ratings == {"a": 1, "b": 3} and shares == {"a": 1.0, "b": 1.0}  # two groups: best and worst
    # tied by draw noise only: kept tied in most draws (a single draw, re-rated raw, would split them)
    kept = []
    for _ in range(100):
        ratings, shares = draw_stability({"a": rng.normal(1, 0.3, 20), "b": rng.normal(1, 0.3, 20)})
        if ratings == {"a": 1, "b": 1}:
            kept.append(shares["a"])
    assert len(kept) > 85 and np.mean(kept) > 0.85


def test_an_underpowered_ape_whose_interval_stays_below_the_margin_is_conclusive():
    """Inconclusive ("≥ k") only when the interval reaches a harm ≥ δ (METHOD §6.6): an underpowered test whose
    interval stays under δ leaves no practical harm to find; one reaching δ is floored; one wholly below 0
    improves the system (level 1, "improves")."""
    raw = pd.DataFrame(
        {"perturbation": "P1", "score": "ape", "system": ["below", "reaches", "better"], "coverage": 1.0}
        | {"quantity": np.nan, "raw": [0.01, 0.01, 0.0], "margin": 0.1}
    )
    rated = rate_scores(raw, settings=RatingSettings(levels=3))
    rows = {
        ("P1", "ape", "below"): inconclusive_row(True, upper=0.09),
        ("P1", "ape", "reaches"): inconclusive_row(True, upper=0.1),
        ("P1", "ape", "better"): RowUncertainty(
            power=Power(1.0, 0.99, 10.0, 0.1, detected=False, inconclusive=False), ape_true_interval=(-0.9, -0.4)
        ),
    }
    published, shown = withhold_inconclusive(rated, Rigor(rows=rows), naive_error=1.0)
    out = published.set_index("system")
    assert not shown.rows[("P1", "ape", "below")].inconclusive and out.loc["below", "rating"] == 1
    assert shown.rows[("P1", "ape", "reaches")].inconclusive and out.loc["reaches", "rating"] == 2
    assert out.loc["reaches", "cannot_rule_out_share"] == pytest.approx(0.1) and out.loc["reaches", "relevant"]
    assert out.loc["better", "improves"] and out.loc["better", "rating"] == 1 and not out.loc["better", "relevant"]
    assert not out.loc["below", "improves"] and not out.loc["below", "relevant"]  # 0.01 < δ: no practical effect
