"""APE_true / APE_obs / APE_adj and PIE% on planted windows with known effects."""

import numpy as np
import pandas as pd
import pytest

from causalrate.causal.effects import (
    DrawSettings,
    _factorize,
    ape_true,
    design_matrix,
    draws_table,
    identify_schemes,
    summarise_effects,
)
from causalrate.causal.estimate import estimate_all


def test_ape_true_is_the_paired_mean_over_valid_windows():
    perturbed = np.array([3.0, 5.0, np.nan, 4.0])
    clean = np.array([1.0, 2.0, 1.0, np.nan])
    assert ape_true(perturbed, clean) == (pytest.approx((2 + 3) / 2), 2)


def planted(n_per_industry: int = 300, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Error depends strongly on industry (R = 10 in Alpha, 1 elsewhere); the perturbation adds 0.5 everywhere."""
    rng = np.random.default_rng(seed)
    industries = np.repeat(["Alpha", "Beta", "Gamma"], n_per_industry)
    company = np.array([f"{i}-{k % 2}" for k, i in enumerate(industries)])
    windows = pd.DataFrame({"industry": industries, "company": company, "level": rng.uniform(1, 2, industries.size)})
    base = np.where(industries == "Alpha", 10.0, 1.0) + rng.normal(0, 0.3, industries.size)
    outcomes = pd.DataFrame({"P0": base, "P1": base + 0.5 + rng.normal(0, 0.1, industries.size)})
    return windows, outcomes


@pytest.mark.parametrize("scheme", ["industry", "company"])
def test_matching_removes_planted_confounding(scheme):
    windows, outcomes = planted()
    settings = DrawSettings(schemes=(scheme,), draws=10, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=5)
    ident = identify_schemes(settings, ["company", "industry"])
    assert set(ident[scheme].adjustment_set) == {"company", "industry"}
    draws = draws_table(
        estimate_all(windows=windows, outcomes={"s": outcomes}, control="P0", settings=settings, identification=ident)
    )
    summary = summarise_effects(draws).iloc[0]
    assert summary.ape_true == pytest.approx(0.5, abs=0.02)
    assert abs(summary.ape_obs - summary.ape_true) > 1.0  # Alpha is over/under-sampled among the treated
    assert summary.ape_adj == pytest.approx(summary.ape_true, abs=0.05)
    assert summary.pie > 50
    assert summary.smd_after < summary.smd_before


def test_uniform_scheme_is_unconfounded_and_draws_are_shared_across_systems():
    windows, outcomes = planted()
    settings = DrawSettings(schemes=("uniform",), draws=8, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=5)
    ident = identify_schemes(settings, ["company", "industry"])
    draws = draws_table(
        estimate_all(
            windows=windows,
            outcomes={"a": outcomes, "b": outcomes.copy()},
            control="P0",
            settings=settings,
            identification=ident,
        )
    )
    a, b = (draws[draws.system == s].reset_index(drop=True) for s in "ab")
    pd.testing.assert_frame_equal(a.drop(columns="system"), b.drop(columns="system"))
    assert summarise_effects(draws).iloc[0].ape_obs == pytest.approx(0.5, abs=0.6)


def test_level_scheme_with_continuous_confounder():
    rng = np.random.default_rng(2)
    n = 900
    level = rng.uniform(0, 10, n)
    windows = pd.DataFrame({"industry": "X", "company": "X", "level": level})
    base = level + rng.normal(0, 0.2, n)  # error grows with price level
    outcomes = pd.DataFrame({"P0": base, "P1": base + 1.0})
    settings = DrawSettings(schemes=("level",), draws=10, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=1)
    ident = identify_schemes(settings, ["company", "industry"])
    assert "level" in ident["level"].adjustment_set
    summary = summarise_effects(
        draws_table(
            estimate_all(
                windows=windows, outcomes={"s": outcomes}, control="P0", settings=settings, identification=ident
            )
        )
    ).iloc[0]
    assert abs(summary.ape_obs - 1.0) > 1.0
    assert summary.ape_adj == pytest.approx(1.0, abs=0.25)


def test_a_categorical_is_read_from_its_codes_as_factorize_would():
    """design_matrix reads a categorical's codes instead of factorising it: the codes and levels of
    pd.factorize(sort=True) (the categories' own order) with missing values and unused categories, and,
    for categories in sorted order, exactly the design of the plain text."""
    rng = np.random.default_rng(4)
    for _ in range(30):
        text = pd.Series(rng.choice(["b", "a", "c", None], 40), dtype=object)
        for categories in (["a", "b", "c", "d"], ["d", "c", "a", "b"]):
            values = text.astype(pd.CategoricalDtype(categories))
            codes, levels = _factorize(values)
            expected_codes, expected_levels = pd.factorize(values, sort=True)
            assert np.array_equal(codes, expected_codes) and list(levels) == list(expected_levels)
        frame = pd.DataFrame({"t": text, "o": rng.choice(["x", "y"], 40)})
        plain = design_matrix(frame, ("t", "o"))
        coded = design_matrix(frame.assign(t=frame["t"].astype("category")), ("t", "o"))
        assert np.array_equal(plain[0], coded[0]) and plain[1] == coded[1] and np.array_equal(plain[2], coded[2])
