"""Issue 7: more operators, severity grids and dose-response, window characteristics as confounders."""

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.tsa.seasonal import STL
from statsmodels.tsa.stattools import adfuller

from causalrate.causal.effects import DrawSettings, draws_table, identify_schemes, summarise_effects
from causalrate.causal.estimate import estimate_all
from causalrate.causal.graph import Identification
from causalrate.config import load_config
from causalrate.data.characteristics import compute_characteristics, terciles
from causalrate.errors import UserError
from causalrate.perturb import load_suite
from causalrate.perturb.spec import PerturbationSpec
from causalrate.score.scores import dose_auc
from causalrate.study import prepare

ROOT = Path(__file__).resolve().parents[1]
X = np.array([[10.0, 12.0, 11.0, 13.0, 14.0]])
SEEDS = np.array([11], dtype=np.uint64)


def one(operator: str, *, period: int = 2, **params) -> np.ndarray:
    specs = [
        PerturbationSpec(id="C", operator="none"),
        PerturbationSpec(id="T", operator=operator, period=period, params=params),
    ]
    _, p = load_suite(specs, base_dir=ROOT, input_length=5)
    return p.apply(X, np.array([0]), seeds=SEEDS)  # first offset 0, period 2 → offsets 0, 2, 4


@pytest.mark.parametrize(
    ("operator", "params", "expected"),
    [
        ("double", {}, [20.0, 12.0, 22.0, 13.0, 28.0]),
        ("spike", {"factor": 5}, [50.0, 12.0, 55.0, 13.0, 70.0]),
        ("stale", {}, [10.0, 12.0, 12.0, 13.0, 13.0]),
        ("unit_change", {"factor": 100}, [1000.0, 1200.0, 1100.0, 1300.0, 1400.0]),
    ],
)
def test_operators_on_a_hand_made_window(operator, params, expected):
    assert one(operator, **params).tolist() == [expected]


def test_duplicate_timestamp_changes_dates_only():
    specs = [PerturbationSpec(id="C", operator="none"), PerturbationSpec(id="T", operator="duplicate_timestamp")]
    _, p = load_suite(specs, base_dir=ROOT, input_length=5)
    dates = np.array([np.arange("2022-01-03", "2022-01-08", dtype="datetime64[D]")])
    shifted = p.apply_dates(dates, np.array([3]))  # the window's perturbed offset is 3
    assert shifted[0].astype(str).tolist() == ["2022-01-03", "2022-01-04", "2022-01-05", "2022-01-05", "2022-01-07"]
    assert p.apply(X, np.array([2]), seeds=SEEDS).tolist() == X.tolist()


def test_precision_and_noise():
    x = np.array([[1.26, 2.34, 3.46, 4.56, 5.67]])
    specs = [
        PerturbationSpec(id="C", operator="none"),
        PerturbationSpec(id="R", operator="precision", period=1, params={"digits": 1}),
    ]
    _, p = load_suite(specs, base_dir=ROOT, input_length=5)
    assert p.apply(x, np.array([0]), seeds=SEEDS).tolist() == [[1.3, 2.3, 3.5, 4.6, 5.7]]
    noisy = one("noise", sigma=0.5)
    eps = np.random.default_rng(11).standard_normal(5)
    expected = X[0] + np.where(np.arange(5) % 2 == 0, 0.5 * X[0].std() * eps, 0.0)
    np.testing.assert_allclose(noisy[0], expected)
    np.testing.assert_array_equal(one("noise", sigma=0.5), noisy)  # same seed, same noise


def test_severity_grid_expansion():
    specs = [
        PerturbationSpec(id="C", operator="none"),
        PerturbationSpec(id="G", operator="drop_to_zero", grid={"period": [80, 40, 20]}),
        PerturbationSpec(id="N", operator="noise", period=1, grid={"sigma": [0.1, 1.0]}),
    ]
    suite = load_suite(specs, base_dir=ROOT, input_length=80)
    assert [p.id for p in suite] == ["C", "G@80", "G@40", "G@20", "N@0.1", "N@1"]
    assert [p.period for p in suite[1:4]] == [80, 40, 20]
    assert [p.severity for p in suite[1:]] == [1 / 80, 1 / 40, 1 / 20, 0.1, 1.0]
    assert suite[5].params == {"sigma": 1.0} and suite[3].family == "G"
    assert suite[3].description.endswith("every 20th point")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"operator": "halve", "params": {"factor": 2}}, "has no setting"),
        ({"operator": "halve", "grid": {"factor": [1, 2]}}, "neither 'period' nor a setting"),
    ],
)
def test_bad_operator_settings(spec, message):
    specs = [PerturbationSpec(id="C", operator="none"), PerturbationSpec(id="T", **spec)]
    with pytest.raises(UserError, match=message):
        load_suite(specs, base_dir=ROOT, input_length=5)


@pytest.mark.parametrize(
    "grid", [{"period": [10]}, {"period": [10, 10]}, {"period": [10, 2.5]}, {"period": [10, 20], "sigma": [1, 2]}]
)
def test_bad_grids(grid):
    with pytest.raises(ValueError):
        PerturbationSpec(id="G", operator="noise", grid=grid)


def test_dose_auc_hand_computed():
    # severities 0.1, 0.2, 0.5 → x = 0, 1/4, 1; |APE| 1, 3, 5 → (1/4)(1+3)/2 + (3/4)(3+5)/2 = 0.5 + 3
    assert dose_auc(pd.Series([0.5, 0.1, 0.2]), pd.Series([-5.0, 1.0, 3.0])) == pytest.approx(3.5)


def test_characteristics_match_statsmodels():
    rng = np.random.default_rng(4)
    t = np.arange(80)
    windows = np.stack(
        [100 + 0.3 * t + 2 * np.sin(2 * np.pi * t / 5) + rng.normal(0, 0.5, 80), 100 + np.cumsum(rng.normal(0, 1, 80))]
    )
    got = compute_characteristics(
        windows, ["trend_strength", "seasonality_strength", "adf_pvalue", "level", "volatility"], period=5
    )
    for i, x in enumerate(windows):
        fit = STL(x, period=5).fit()
        assert got["trend_strength"][i] == pytest.approx(max(0, 1 - fit.resid.var() / (x - fit.seasonal).var()))
        assert got["seasonality_strength"][i] == pytest.approx(max(0, 1 - fit.resid.var() / (x - fit.trend).var()))
        assert got["adf_pvalue"][i] == pytest.approx(adfuller(x, autolag="AIC")[1])
        assert got["level"][i] == pytest.approx(x.mean())
        assert got["volatility"][i] == pytest.approx(np.std(np.diff(x) / x[:-1], ddof=1))
    assert got["trend_strength"][0] > 0.9 and got["seasonality_strength"][0] > 0.5  # planted trend and season
    assert terciles(np.arange(9.0)).tolist() == ["low"] * 3 + ["mid"] * 3 + ["high"] * 3


def test_catch22_characteristics():
    pycatch22 = pytest.importorskip("pycatch22")
    x = np.cumsum(np.random.default_rng(0).normal(size=(1, 80)), axis=1)
    got = compute_characteristics(x, ["transition", "shifting"], period=5)
    assert got["transition"][0] == pytest.approx(pycatch22.SB_TransitionMatrix_quantile_3_ac_sumdiagcov(x[0].tolist()))
    assert got["shifting"][0] == pytest.approx(pycatch22.DN_OutlierInclude_p_001_mdrmd(x[0].tolist()))


def test_volatility_confounding_needs_volatility_in_the_adjustment_set():
    """Error grows with volatility, which varies inside industries; the volatility scheme confounds."""
    rng = np.random.default_rng(8)
    n = 1500
    industry = rng.choice(["A", "B", "C"], n)
    vol = rng.uniform(0.005, 0.05, n)
    windows = pd.DataFrame({"industry": industry, "company": industry, "volatility": vol})
    base = 40 * vol + rng.normal(0, 0.05, n)
    outcomes = pd.DataFrame({"P0": base, "P1": base + 0.3})
    settings = DrawSettings(schemes=("volatility",), draws=8, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=2)
    ident = identify_schemes(settings, ["company", "industry"])
    assert "volatility" in ident["volatility"].adjustment_set
    with_vol = summarise_effects(
        draws_table(
            estimate_all(
                windows=windows, outcomes={"s": outcomes}, control="P0", settings=settings, identification=ident
            )
        )
    ).iloc[0]
    industry_only = {"volatility": Identification(adjustment_set=("industry",), estimand="")}
    without = summarise_effects(
        draws_table(
            estimate_all(
                windows=windows, outcomes={"s": outcomes}, control="P0", settings=settings, identification=industry_only
            )
        )
    ).iloc[0]
    assert with_vol.ape_true == pytest.approx(0.3)
    assert abs(with_vol.ape_adj - 0.3) < 0.05
    assert abs(without.ape_adj - 0.3) > 0.15  # industry alone leaves the confounding in
    assert abs(without.ape_obs - 0.3) > 0.15


def test_dose_response_is_monotone_for_a_planted_fragile_system(synthetic_study, cli, tmp_path):
    systems = '- {name: mean, type: python, function: "planted.py:zero_counter"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(systems, draws=2, stride=5)
    text = (
        config.read_text()
        .replace(
            "  - {id: P3, operator: missing}",
            "  - {id: P3, operator: missing}\n  - {id: G, operator: drop_to_zero, grid: {period: [40, 20, 10, 5]}}",
        )
        .replace("causal: {draws: 2}", "causal: {draws: 2, covariates: [volatility], wrs_groups: [volatility]}")
    )
    config.write_text(text)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    ape = {e["perturbation"]: e["ape_true"] for e in doc["effects"] if e["system"] == "mean"}
    doses = [ape[f"G@{k}"] for k in (40, 20, 10, 5)]
    assert all(b > a > 0 for a, b in itertools.pairwise(doses))
    auc = {r["system"]: r for r in doc["ratings"] if r["score"] == "ape_auc"}
    assert auc["mean"]["perturbation"] == "G" and auc["mean"]["rating"] > auc["naive"]["rating"]
    assert {r["score"] for r in doc["ratings"]} >= {"wrs_volatility", "ape_auc"}
    assert any(e["balance"].get("volatility") for e in doc["effects"])  # balance covers the characteristic
    card = (tmp_path / "run" / "cards" / "mean.report.html").read_text()
    assert "How the effect grows with severity" in card and 'data-perturbation="G"' in card


def test_extended_study_resolves():
    config, base = load_config(ROOT / "studies" / "extended.yaml")
    study = prepare(config, base_dir=base)
    assert len(study.suite) == 33 and {"volatility", "trend_strength", "volatility_tercile"} <= set(study.table)
