"""Issue 16: placement of perturbations, the recency profile, the worst case, new operators."""

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalrate.config import load_config
from causalrate.perturb import load_suite
from causalrate.perturb.operators import tail_return_level
from causalrate.perturb.placement import Placement, cyclic_firsts, offsets_mask
from causalrate.perturb.spec import PerturbationSpec
from causalrate.pipeline import assess
from causalrate.score.recency import recency_bins

ROOT = Path(__file__).resolve().parents[1]
SEEDS = np.array([5], dtype=np.uint64)


def test_cyclic_hits_every_offset_equally_often_at_stride_2():
    n, per_series = 80, 250  # 80-point windows, stride 2, a year and more of windows per series
    starts = np.tile(np.arange(0, 2 * per_series, 2), 3)
    series = np.repeat(["A", "B", "C"], per_series)
    firsts = cyclic_firsts(starts, series, period=n, seed=0)
    for s in "ABC":
        counts = np.bincount(firsts[series == s], minlength=n)
        assert counts.max() - counts.min() <= 1 and counts.sum() == per_series
    assert np.bincount(firsts, minlength=n).min() > 0  # the last input point (79) is hit too
    # the paper's series rule at stride 2 only ever hits even offsets, never the last point
    series_rule = Placement("series").firsts(starts, series, period=n, phase=0, input_length=n, seed=0)
    assert set(series_rule % 2) == {0} and 79 not in series_rule


@pytest.mark.parametrize(("period", "phase"), [(80, 0), (20, 3), (7, 1), (1, 0)])
def test_series_at_stride_1_reproduces_the_paper_masks(period, phase):
    n, starts = 80, np.arange(0, 300)  # stride 1
    firsts = Placement("series").firsts(starts, np.zeros(300), period=period, phase=phase, input_length=n, seed=0)
    positions = starts[:, None] + np.arange(n)[None, :]
    np.testing.assert_array_equal(
        offsets_mask(firsts, period=period, input_length=n), (positions - phase) % period == 0
    )


def test_last_offset_random_and_several_points_per_window():
    starts, series = np.arange(0, 40, 2), np.zeros(20, dtype=int)
    last = Placement("last").firsts(starts, series, period=20, phase=0, input_length=80, seed=0)
    assert offsets_mask(last, period=20, input_length=80)[0].nonzero()[0].tolist() == [19, 39, 59, 79]
    fixed = Placement("offset", offset=70).firsts(starts, series, period=80, phase=0, input_length=80, seed=0)
    assert set(fixed) == {70}
    r1 = Placement("random").firsts(starts, series, period=80, phase=0, input_length=80, seed=1)
    r2 = Placement("random").firsts(starts, series, period=80, phase=0, input_length=80, seed=1)
    np.testing.assert_array_equal(r1, r2)
    assert len(set(r1)) > 5 and r1.max() < 80
    worst = Placement("worst", candidates=6).candidate_firsts(starts, series, period=80, seed=1)
    assert worst.shape == (20, 6) and all(len(set(row)) == 6 for row in worst)
    assert Placement("worst").candidate_firsts(starts[:2], series[:2], period=80, seed=1).shape == (2, 80)


def test_tail_spike_amplitude_is_the_gpd_return_level():
    rng = np.random.default_rng(4)
    prices = 100 * np.exp(np.cumsum(rng.standard_t(3, 1500) * 0.01))
    returns = np.abs(np.diff(prices) / prices[:-1])
    u = np.quantile(returns, 0.9)
    excess = returns[returns > u] - u
    xi, _, sigma = stats.genpareto.fit(excess, floc=0)
    zeta = excess.size / returns.size
    by_hand = u + sigma / xi * ((250 * zeta) ** xi - 1)  # Coles (2001) eq. 4.13, the N-observation return level
    assert tail_return_level(prices, return_period=250, threshold=0.9) == pytest.approx(by_hand, rel=1e-9)
    specs = [
        PerturbationSpec(id="C", operator="none"),
        PerturbationSpec(id="T", operator="tail_spike", params={"return_period": 250}),
    ]
    _, p = load_suite(specs, base_dir=ROOT, input_length=5)
    x = np.array([[10.0, 11.0, 12.0, 13.0, 14.0]])
    out = p.apply(x, np.array([3]), seeds=SEEDS, history=[prices])
    assert out[0].tolist() == pytest.approx([10.0, 11.0, 12.0, 13.0 * (1 + by_hand), 14.0])


def test_level_shift_and_combined():
    x = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]])
    specs = [
        PerturbationSpec(id="C", operator="none"),
        PerturbationSpec(id="L", operator="level_shift", params={"c": 2}),
        PerturbationSpec(
            id="Z",
            operator="combined",
            combine=[{"operator": "level_shift", "params": {"c": 1}}, {"operator": "drop_to_zero"}],
            grid={"level_shift.c": [1, 3]},
        ),
    ]
    _, shift, z1, z3 = load_suite(specs, base_dir=ROOT, input_length=5)
    std = x.std()
    assert shift.apply(x, np.array([2]), seeds=SEEDS)[0].tolist() == pytest.approx(
        [1, 2, 3 + 2 * std, 4 + 2 * std, 5 + 2 * std]
    )
    assert z1.apply(x, np.array([3]), seeds=SEEDS)[0].tolist() == pytest.approx([1, 2, 3, 0, 5 + std])
    assert z3.apply(x, np.array([3]), seeds=SEEDS)[0].tolist() == pytest.approx([1, 2, 3, 0, 5 + 3 * std])
    assert z3.severity == 3 and z3.family == "Z"


def test_naive_is_hurt_at_the_default_placement(quickstart):
    doc = json.loads((quickstart / "ratings.json").read_text())
    ape = {(r["system"], r["perturbation"]): r["raw"] for r in doc["ratings"] if r["score"] == "ape"}
    assert ape[("naive", "P1")] > 0 and ape[("naive", "P2")] > 0
    with sqlite3.connect(quickstart / "forecasts.sqlite") as conn:
        offsets = [json.loads(o) for (o,) in conn.execute("SELECT offsets FROM forecasts WHERE perturbation = 'P1'")]
    assert all(len(o) == 1 for o in offsets) and max(o[0] for o in offsets) == 79


def test_recency_profile_of_a_last_point_system_sits_in_the_first_bin(quickstart):
    doc = json.loads((quickstart / "ratings.json").read_text())
    profile = pd.DataFrame(doc["recency_profile"])
    naive = profile[(profile["system"] == "naive") & (profile["perturbation"] == "P1")].set_index("bin")
    assert list(naive.index) == [b for b, _, _ in recency_bins(80)] == ["1", "2-5", "6-20", "21-80"]
    assert naive.loc["1", "ape"] > 0 and naive.loc["1", "interval"][0] > 0
    assert (naive.drop(index="1")["ape"] == 0).all()  # naive sees only the last point
    assert naive["n"].sum() == doc["counts"]["windows"]


def test_a_last_point_system_is_more_recency_sensitive_than_a_median(synthetic_study, tmp_path):
    study = synthetic_study(
        "- {name: naive, type: naive}\n- {name: median, type: python, function: planted.py:window_median}\n",
        extra="rigor: {bootstrap_size: 0, refute: false}\n",
        draws=2,
        stride=5,
    )
    config, base = load_config(study)
    doc = json.loads((assess(config, base_dir=base, out=tmp_path / "run", workers=1) / "ratings.json").read_text())
    recency = {(r["system"], r["perturbation"]): r["raw"] for r in doc["ratings"] if r["score"] == "recency"}
    assert recency[("naive", "P1")] > recency[("median", "P1")]


def test_worst_case_is_at_least_the_cyclic_ape(synthetic_study, tmp_path):
    extra = """\
rigor: {bootstrap_size: 0}
forecast: {cache: true}
"""
    study = synthetic_study(
        """\
- {name: naive, type: naive}
- {name: median, type: python, function: planted.py:window_median}
- {name: lowest, type: python, function: planted.py:window_min}
- {name: arima, type: arima, order: [1, 1, 0]}
- {name: nanmed, type: python, function: planted.py:window_median, accepts_nan: true}
""",
        extra=extra,
        stride=40,  # 18 windows: 40 candidates each for W1, ARIMA among the systems
    )
    text = study.read_text().replace(
        "  - {id: P3, operator: missing}\n",
        "  - {id: P3, operator: missing}\n  - {id: P3+ffill, operator: missing, impute: ffill}\n"
        "  - {id: W1, operator: drop_to_zero, placement: worst}\n"
        "  - {id: W3, operator: missing, placement: worst, candidates: 5}\n",
    )
    study.write_text(text)
    config, base = load_config(study)
    out = assess(config, base_dir=base, out=tmp_path / "run", workers=1)
    doc = json.loads((out / "ratings.json").read_text())
    true = {(e["system"], e["perturbation"]): e["ape_true"] for e in doc["effects"] if e["scheme"] == "uniform"}
    for system in ("naive", "median", "lowest", "arima"):
        assert true[(system, "W1")] >= true[(system, "P1")] - 1e-12
    worst = {r["system"]: r["raw"] for r in doc["ratings"] if r["score"] == "ape_worst" and r["perturbation"] == "W1"}
    assert worst["lowest"] > worst["median"]
    assert not [r for r in doc["ratings"] if r["score"] == "ape" and r["perturbation"].startswith("W")]
    with sqlite3.connect(out / "forecasts.sqlite") as conn:
        rows = conn.execute("SELECT system, offsets FROM forecasts WHERE perturbation = 'W1' AND system = 'naive'")
        assert {json.loads(o)[0] for _, o in rows} == {39}  # naive is hurt only at the last of its 40 points
        frame = pd.read_sql_query("SELECT system, window, perturbation, forecast FROM forecasts", conn)
    wide = frame.pivot_table(index=["system", "window"], columns="perturbation", values="forecast", aggfunc="first")
    # missing two ways: the NaN-accepting system sees NaN in P3 and the forward-filled input in P3+ffill
    assert (wide.loc["nanmed", "P3"] != wide.loc["nanmed", "P3+ffill"]).any()
    assert (wide.loc["median", "P3"] == wide.loc["median", "P3+ffill"]).all()  # imputed (ffill) either way
