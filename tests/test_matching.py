"""Tie-safe matching recovers planted effects where dowhy's built-in PSM does not (METHOD §5.4)."""

import logging
import warnings

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from causalrate.causal.matching import match_plan, nearest_with_ties, smd


def planted_strata(n: int = 20_000, seed: int = 0) -> pd.DataFrame:
    """Three strata with different propensity and baseline; constant true effect 2.0."""
    rng = np.random.default_rng(seed)
    stratum = rng.integers(0, 3, n)
    p = np.array([0.2, 0.5, 0.8])[stratum]
    treated = rng.random(n) < p
    y = 2.0 * treated + np.array([0.0, 5.0, 10.0])[stratum] + rng.normal(0, 1, n)
    return pd.DataFrame({"s1": (stratum == 1) * 1.0, "s2": (stratum == 2) * 1.0, "P": treated, "R": y})


def test_recovers_planted_effect_with_tied_propensities():
    df = planted_strata()
    naive = df.R[df.P].mean() - df.R[~df.P].mean()
    assert abs(naive - 2.0) > 1.5  # strongly confounded
    result = match_plan(
        df[["s1", "s2"]].to_numpy(), df.P.to_numpy(), caliper_sd=0.2, rng=np.random.default_rng(1)
    ).apply(df.R.to_numpy())
    assert result.ate == pytest.approx(2.0, abs=0.06)
    assert result.att == pytest.approx(2.0, abs=0.06)
    assert result.atc == pytest.approx(2.0, abs=0.06)
    assert result.unmatched == 0
    assert np.abs(result.smd_before).max() > 0.5 and np.abs(result.smd_after).max() < 0.05


def test_dowhy_builtin_psm_fails_on_the_same_data():
    """The reason causalrate matches on its own: dowhy 0.14's PSM sends all ties to one control."""
    from dowhy import CausalModel

    df = planted_strata()
    df["stratum"] = df.s1 + 2 * df.s2
    graph = nx.DiGraph([("stratum", "P"), ("stratum", "R"), ("P", "R")])
    logging.getLogger("dowhy").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CausalModel(data=df[["stratum", "P", "R"]], treatment="P", outcome="R", graph=graph)
        estimand = model.identify_effect()
        atc = model.estimate_effect(estimand, method_name="backdoor.propensity_score_matching", target_units="atc")
    ours = match_plan(
        df[["s1", "s2"]].to_numpy(), df.P.to_numpy(), caliper_sd=0.2, rng=np.random.default_rng(1)
    ).apply(df.R.to_numpy())
    assert abs(atc.value - 2.0) > 5 * abs(ours.atc - 2.0)


def test_ties_are_spread_over_all_equal_controls():
    pool = np.array([0.0, 1.0, 1.0, 1.0, 1.0, 3.0])
    picks = nearest_with_ties(np.full(4000, 1.2), pool, caliper=10, rng=np.random.default_rng(0))
    counts = np.bincount(picks, minlength=6)
    assert counts[[0, 5]].sum() == 0
    assert counts[1:5].min() > 900  # ~1000 each


def test_caliper_and_nearest():
    pool = np.array([0.0, 10.0])
    picks = nearest_with_ties(np.array([1.0, 9.5, 5.0, 30.0]), pool, caliper=4.0, rng=np.random.default_rng(0))
    assert picks.tolist()[:2] == [0, 1]
    assert picks[2] == -1 and picks[3] == -1  # 5 and 20 away: outside the caliper
    equidistant = nearest_with_ties(np.full(400, 5.0), pool, caliper=6.0, rng=np.random.default_rng(0))
    assert set(equidistant.tolist()) == {0, 1}  # a tie: either, at random


def test_smd_hand_computed():
    x = np.array([[1.0], [3.0], [2.0], [4.0]])
    t = np.array([True, True, False, False])
    # means 2 vs 3, variances 2 and 2 → (2 - 3) / sqrt(2)
    assert smd(x, t)[0] == pytest.approx(-1 / np.sqrt(2))


def test_saturated_propensity_equals_logistic_regression():
    import statsmodels.api as sm
    from sklearn.linear_model import LogisticRegression

    from causalrate.causal.matching import propensity

    rng = np.random.default_rng(3)
    stratum = rng.integers(0, 4, 2000)
    x = np.eye(4)[stratum][:, 1:]  # one-hot, first level dropped: saturated
    t = rng.random(2000) < np.array([0.1, 0.4, 0.6, 0.9])[stratum]
    ours = propensity(x, t, strata=stratum)
    mle = sm.Logit(t.astype(float), sm.add_constant(x)).fit(disp=0).predict(sm.add_constant(x))  # unpenalised
    np.testing.assert_allclose(ours, mle, atol=1e-8)
    assert np.abs(ours - LogisticRegression(C=1e6, max_iter=1000).fit(x, t).predict_proba(x)[:, 1]).max() < 1e-3
    continuous = sm.add_constant(np.c_[x, rng.normal(size=2000)])  # not saturated: the regression itself
    mle = sm.Logit(t.astype(float), continuous).fit(disp=0).predict(continuous)
    np.testing.assert_allclose(propensity(continuous[:, 1:], t), mle, atol=1e-6)
