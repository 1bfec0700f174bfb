"""The fragility map (METHOD §5.5): planted heterogeneity is found, a homogeneous effect is not,
and causalml's meta-learners beat the naive estimate on a planted confounded draw."""

import json
import re
import textwrap

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("causalml")

from causalrate.causal import fragility, heterogeneity, learners
from tests.planted import FRAGILE_ABOVE


def _windows(n=400, seed=0):
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(
        {
            "industry": rng.choice(["Alpha", "Beta", "Gamma"], n),
            "level": rng.uniform(100, 1200, n),
            "volatility": rng.uniform(0.005, 0.03, n),
            fragility.DISTANCE: rng.integers(0, 80, n).astype(float),
        }
    )
    return table, rng


def _map(table, control, treated):
    cov = fragility.Covariates.build(table, ["industry", "level", "volatility", fragility.DISTANCE])
    blocks = np.arange(len(table)) // 10
    return fragility.fragility_map(cov, control, treated, blocks, depth=3, min_leaf=0.02, rules=20, seed=7)


def test_level_fragility_is_found_with_its_threshold():
    table, rng = _windows()
    control = rng.normal(1.0, 0.2, len(table))
    ite = np.where(table["level"] > 650, 2.0, 0.0) + rng.normal(0, 0.5, len(table))
    fmap = _map(table, control, control + ite)
    assert fmap.drivers[0][0] == "level"
    assert fmap.drivers[0][1] > 0.5 and fmap.explained == pytest.approx(sum(v for _, v in fmap.drivers))
    top = fmap.rules[0]
    threshold = float(re.search(r"level > ([\d.]+)", top.text).group(1))
    assert abs(threshold - 650) < 50
    assert top.cate == pytest.approx(2.0, abs=0.2) and top.interval[0] < top.cate < top.interval[1]
    assert top.share == pytest.approx(np.mean(table["level"] > threshold))
    assert top.ratio == pytest.approx(top.cate / ite.mean())
    # the share-weighted leaf effects add up to the average effect (the rules partition the windows)
    assert sum(r.cate * r.share for r in fmap.rules) == pytest.approx(ite.mean())


def test_a_harm_beside_an_average_fall_is_no_negative_multiple():
    """Planted: the error falls on most windows and rises by 2 above level 650, so the average effect is below 0.
    The rule read "effect -7.3× the average (2.14 vs -0.293)" (water demand, arima under P1: "-46× the average"), a
    harm written as a negative multiple; it says the effect and the average instead."""
    table, rng = _windows(seed=3)
    control = rng.normal(1.0, 0.2, len(table))
    ite = np.where(table["level"] > 650, 2.0, -2.5) + rng.normal(0, 0.3, len(table))
    assert ite.mean() < 0
    fmap = _map(table, control, control + ite)
    top = fmap.rules[0]
    assert top.cate == pytest.approx(2.0, abs=0.2) and "level" in top.text
    assert "×" not in top.text and top.text.startswith(f"effect {top.cate:.3g} (the average over all windows: ")
    assert f"{ite.mean():.3g})" in top.text


def test_a_distance_of_one_value_is_said_once():
    """Water demand (reader4): "the perturbed point is 1 to 1 points before the forecast origin"."""
    bounds = ((0.5, 1.5), (2.5, 3.5), (0.5, 3.5))
    said = {(lo, hi): fragility._condition(fragility.DISTANCE, lo, hi) for lo, hi in bounds}
    assert said == {
        (0.5, 1.5): "the perturbed point is 1 point before the forecast origin",
        (2.5, 3.5): "the perturbed point is 3 points before the forecast origin",
        (0.5, 3.5): "the perturbed point is 1 to 3 points before the forecast origin",
    }


def test_homogeneous_effect_has_spread_near_zero():
    table, rng = _windows(seed=1)
    control = rng.normal(1.0, 0.2, len(table))
    flat = _map(table, control, control + 1.0 + rng.standard_t(3, len(table)) * 0.5)
    stepped = _map(table, control, control + np.where(table["level"] > 650, 2.0, 0.0) + rng.normal(0, 0.5, 400))
    assert flat.explained < 0.05 and flat.spread < 0.1 * stepped.spread
    assert all(v < 0.05 for _, v in flat.drivers)


def test_spread_is_explained_sd_over_mean_clean_outcome():
    """Exact heterogeneity (no noise): explained = 1, spread = SD(ITE) / mean clean outcome (hand check)."""
    table, _ = _windows(seed=2)
    control = np.full(len(table), 4.0)
    ite = np.where(table["industry"] == "Beta", 3.0, 1.0)
    fmap = _map(table, control, control + ite)
    assert fmap.explained == pytest.approx(1.0)
    assert fmap.spread == pytest.approx(np.std(ite) / 4.0)
    assert fmap.drivers[0][0] == "industry"
    assert fmap.rules[0].text.endswith("when industry is Beta") and fmap.rules[0].cate == 3.0


def test_rule_words():
    distance = fragility.DISTANCE
    assert fragility._condition(distance, -np.inf, 0.5) == "the perturbed point is the last input point"
    assert fragility._condition(distance, -np.inf, 4.5) == "the perturbed point is among the last 5 input points"
    assert (
        fragility._condition(fragility.DISTANCE, 4.5, np.inf)
        == "the perturbed point is at least 5 points before the forecast origin"
    )
    assert fragility._condition("industry=Beta", 0.5, np.inf) == "industry is Beta"
    assert fragility._condition("industry=Beta", -np.inf, 0.5) == "industry is not Beta"
    assert fragility._condition("level", 500.0, 900.0) == "500 < level ≤ 900"


def test_perturbed_distance_from_mask_and_recorded_offsets():
    mask = np.zeros((3, 5), dtype=bool)
    mask[0, 4] = mask[1, [0, 2]] = True  # window 2: nothing perturbed
    assert fragility.perturbed_distance(mask).tolist() == [0.0, 2.0, 5.0]
    rows = pd.DataFrame(
        {
            "system": ["a", "a", "a", "b", "a"],
            "perturbation": ["P1", "P1", "P1", "P1", "P2"],
            "window": [2, 0, 1, 0, 0],
            "offsets": ["[]", "[4]", "[0, 2]", "[1]", None],  # rows in any order; a pair with none: not listed
        }
    )
    masks = heterogeneity.recorded_masks(rows, 3, 5)
    assert set(masks) == {("a", "P1"), ("b", "P1")} and (masks["a", "P1"] == mask).all()
    assert masks["b", "P1"].nonzero() == ([0], [1])


def test_meta_learners_beat_the_naive_estimate_on_a_confounded_draw():
    """Treatment favours high levels; the effect grows with level: the naive difference is far off."""
    rng = np.random.default_rng(4)
    n = 500
    level = rng.uniform(0, 1, n)
    x = np.c_[level, rng.uniform(0, 1, n)]
    control = 2.0 * level + rng.normal(0, 0.1, n)
    ite = 3.0 * level
    treated = rng.random(n) < 0.1 + 0.8 * level
    y = np.where(treated, control + ite, control)
    rows = learners.selfcheck_draw(x, treated, y, ite, 0.1 + 0.8 * level, seed=1)
    assert {r["learner"] for r in rows} == {"x_learner", "dr_learner"}
    for r in rows:
        assert r["pehe"] < 0.5 * r["pehe_naive"]
        assert r["rank_corr"] > 0.8
    naive = y[treated].mean() - y[~treated].mean()
    assert rows[0]["pehe_naive"] == pytest.approx(np.sqrt(np.mean((naive - ite) ** 2)))


def _continuous_levels_csv(path, *, series=12, length=70, seed=5):
    """Series trading at evenly spread levels (100 … 1200), so a level threshold is pinned by the data."""
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2021-01-04", periods=length)
    rows = []
    for i, base in enumerate(np.linspace(100, 1200, series)):
        value = base * np.exp(np.cumsum(rng.normal(0, 0.003, length)))
        rows.append(pd.DataFrame({"date": dates, "series": f"S{i:02d}", "value": value, "industry": f"I{i % 3}"}))
    pd.concat(rows).to_csv(path, index=False)


def test_planted_systems_through_the_pipeline(tmp_path, cli):
    """Through the python adapter: fragile_when_high is driven by level at its planted threshold;
    last_value (hurt only when the corrupted point is the last one) by the perturbed point's distance."""
    _continuous_levels_csv(tmp_path / "prices.csv")
    (tmp_path / "planted.py").write_text((__import__("pathlib").Path(__file__).parent / "planted.py").read_text())
    (tmp_path / "study.yaml").write_text(
        textwrap.dedent(
            """\
            name: fragility
            seed: 1
            data: {source: csv, path: prices.csv, layout: long, attribute_columns: [industry]}
            windows: {input_length: 20, horizon: 5, stride: 1}
            perturbations:
              - {id: P0, operator: none}
              - {id: P1, operator: drop_to_zero}
            outcome: rmax_scaled
            causal: {schemes: [uniform, level], draws: 2}
            rigor: {bootstrap_size: 0}
            heterogeneity: {covariates: [level, volatility], rules: 10}
            systems:
              - {name: high, type: python, function: "planted.py:fragile_when_high"}
              - {name: last, type: python, function: "planted.py:last_value"}
            """
        )
    )
    code, _, err = cli("assess", tmp_path / "study.yaml", "--out", tmp_path / "run", "--workers", "1", "--no-cards")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    high, last = doc["heterogeneity"]["high"]["P1"], doc["heterogeneity"]["last"]["P1"]
    assert high["drivers"][0]["covariate"] == "level"
    # the rules above the average effect cover exactly the windows above the planted level (some split finer)
    fragile = [r for r in high["rules"] if r["ratio"] > 1]
    lower = [float(a or b) for r in fragile for a, b in re.findall(r"([\d.]+) < level|level > ([\d.]+)", r["text"])]
    assert abs(min(lower) - FRAGILE_ABOVE) < 0.05 * FRAGILE_ABOVE
    assert last["drivers"][0]["covariate"] == fragility.DISTANCE
    assert "the perturbed point is the last input point" in last["rules"][0]["text"]
    assert {s["scheme"] for s in high["selfcheck"]} == {"level"}  # uniform is randomized: nothing to check
    spread = {r["system"]: r["raw"] for r in doc["ratings"] if r["score"] == "fragility_spread"}
    assert spread == {"high": high["spread"], "last": last["spread"]} and min(spread.values()) > 0
