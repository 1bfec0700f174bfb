"""Duration faults (issue 44): planted forecasters on generated data, whose effect under each fault is known."""

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from causalrate.forecast.impute import impute
from causalrate.perturb.faults import LEVELS, Fault, severity_table
from causalrate.perturb.operators import OPERATORS, checked_output, reach
from causalrate.perturb.spec import PerturbationSpec
from causalrate.perturb.suite import load_suite

FAULTS = [name for name, cls in OPERATORS.items() if issubclass(cls, Fault)]
N, H = 48, 6


def windows(rows: int = 40, n: int = N, seed: int = 0) -> np.ndarray:
    """Random walks around 100 with a trend: no two points alike, so every fault shows."""
    rng = np.random.default_rng(seed)
    return 100 + 0.3 * np.arange(n)[None, :] + np.cumsum(rng.standard_normal((rows, n)), axis=1)


def placed(operator: str, *, placement: str = "last", season: int = 1, n: int = N, **entry):
    (_, p) = load_suite(
        [PerturbationSpec(id="P0", operator="none"), PerturbationSpec(id="F", operator=operator, **entry)],
        base_dir=Path("."),
        input_length=n,
        placement=placement,
        season=season,
    )
    return p


def perturb(p, inputs: np.ndarray, first: int | None = None) -> np.ndarray:
    firsts = np.full(len(inputs), inputs.shape[1] - 1 if first is None else first)
    return p.apply(inputs, firsts, seeds=np.arange(len(inputs), dtype=np.uint64))


def last_value(x: np.ndarray) -> np.ndarray:
    return np.repeat(x[:, -1:], H, axis=1)


def window_mean(x: np.ndarray) -> np.ndarray:
    return np.repeat(np.nanmean(x, axis=1, keepdims=True), H, axis=1)


def linear(x: np.ndarray) -> np.ndarray:
    """Least-squares line through the window, extrapolated (a system that does not take NaN: ffill first)."""
    x = impute(x, "ffill")
    t = np.arange(x.shape[1])
    slope, intercept = np.polyfit(t, x.T, 1)
    return intercept[:, None] + slope[:, None] * np.arange(x.shape[1], x.shape[1] + H)[None, :]


# --- the contract harness, on every duration fault -------------------------------------------------------------


@pytest.mark.parametrize("name", FAULTS)
@pytest.mark.parametrize("k", [1, 4, 13])
def test_each_fault_keeps_the_operator_contract(name, k):
    """Shape, floats, every point outside its declared reach unchanged, the caller's input not mutated; and each
    fault does change what it declares (so the reach is not a blanket)."""
    inputs = windows(rows=12, n=30)
    rng = np.random.default_rng(k)
    mask = np.zeros(inputs.shape, dtype=bool)
    mask[np.arange(12), rng.integers(0, 30, 12)] = True
    mask[:3, -1] = True  # also at the newest point
    mask[3] = False
    mask[3, [5, 12, 29]] = True  # several faults in one window
    operator = OPERATORS.get(name)()
    params = {**operator.params, "k": float(k)}
    before = inputs.copy()
    out = operator.apply(inputs.copy(), mask, seeds=np.arange(12, dtype=np.uint64), **params)
    checked_output(operator, inputs, out, reach(operator, mask, params))
    assert np.array_equal(inputs, before)
    changed = ~((out == inputs) | (np.isnan(out) & np.isnan(inputs)))
    assert changed.any()
    if operator.touches == "run":
        covered = reach(operator, mask, params)
        assert covered[5].sum() == min(k, int(np.flatnonzero(mask[5])[0]) + 1)  # k points ending at it


def test_a_run_reaches_the_k_points_ending_at_each_placed_point():
    mask = np.zeros((1, 10), dtype=bool)
    mask[0, [2, 9]] = True
    covered = reach(OPERATORS.get("stuck")(), mask, {"k": 3})
    assert np.flatnonzero(covered[0]).tolist() == [0, 1, 2, 7, 8, 9]
    assert np.flatnonzero(reach(OPERATORS.get("delay")(), mask, {"k": 3})[0]).tolist() == list(range(10))
    mask[0, 9] = False
    assert np.flatnonzero(reach(OPERATORS.get("delay")(), mask, {"k": 3})[0]).tolist() == [0, 1, 2]


def test_a_fault_must_declare_its_duration():
    from causalrate.contracts import ContractError

    with pytest.raises(ContractError, match="touches a run of k points but has no param 'k'"):
        OPERATORS.register("fault_without_k")(type("NoK", (Fault,), {"apply": lambda self, v, m, *, seeds: v}))
    assert "fault_without_k" not in OPERATORS


# --- each fault as constructed ------------------------------------------------------------------------------


def test_each_fault_changes_the_values_as_described():
    x = np.arange(10.0)[None, :] * 2 + 1  # 1, 3, 5, ..., 19
    sd = float(np.std(x))
    end = 7

    def at(name, **params):
        p = placed(name, n=10, params=params)
        return perturb(p, x, first=end)[0]

    assert at("stuck", k=3).tolist() == [1, 3, 5, 7, 9, 9, 9, 9, 17, 19]
    assert np.isnan(at("gap", k=3)[5:8]).all() and not np.isnan(at("gap", k=3)[[4, 8]]).any()
    np.testing.assert_allclose(at("drift", k=4, c=2)[4:8] - x[0, 4:8], 2 * sd * np.array([1, 2, 3, 4]) / 4)
    np.testing.assert_allclose(at("gain", k=2, c=0.5)[6:8], (1 + 0.5 * sd / x.mean()) * x[0, 6:8])
    np.testing.assert_allclose(at("offset", k=2, c=1)[[5, 6, 7, 8]] - x[0, [5, 6, 7, 8]], [0, sd, sd, 0])
    assert at("delay", k=3).tolist() == [1, 1, 1, 1, 3, 5, 7, 9, 17, 19]  # late by 3 up to offset 7, then on time
    ceiling = np.quantile(x, 0.5)
    assert at("clip", k=3, q=0.5).tolist() == [1, 3, 5, 7, 9, ceiling, ceiling, ceiling, 17, 19]


def test_a_fault_from_the_oldest_point_holds_that_point():
    x = np.arange(6.0)[None, :]
    assert perturb(placed("stuck", n=6, params={"k": 4}), x, first=2)[0].tolist() == [0, 0, 0, 3, 4, 5]


# --- planted forecasters: effects known in advance ----------------------------------------------------------


def test_last_value_under_stuck_at_the_newest_point_does_not_change():
    """A stuck reading repeats the value before the fault: a last-value forecast made before the fault starts
    (the k points are all held at x[n-k-1]) equals the one from that value; and under placement last with k=1
    the stuck value is the last clean one's predecessor, i.e. exactly what x[n-2] forecasts."""
    inputs = windows()
    for k in (1, 3, 12):
        stuck = perturb(placed("stuck", params={"k": k}), inputs)
        np.testing.assert_array_equal(last_value(stuck), last_value(inputs[:, : N - k]))
        # the fault is still on at the newest point, and the stuck value is the last one before it
        assert np.array_equal(stuck[:, -k:], np.repeat(inputs[:, N - k - 1 : N - k], k, axis=1))


def test_last_value_under_a_stuck_newest_point_that_did_not_move_has_zero_effect():
    """The issue's planted zero: where the reading was already flat, the stuck value is the last value."""
    inputs = windows()
    inputs[:, -4:] = inputs[:, -5:-4]  # flat for the last five points
    stuck = perturb(placed("stuck", params={"k": 4}), inputs)
    assert np.array_equal(last_value(stuck), last_value(inputs))
    assert np.array_equal(stuck, inputs)


def test_last_value_under_offset_at_the_newest_point_moves_by_the_offset():
    inputs = windows()
    for c in (0.5, 2.0):
        shifted = perturb(placed("offset", params={"k": 3, "c": c}), inputs)
        np.testing.assert_allclose(
            last_value(shifted) - last_value(inputs), c * inputs.std(axis=1)[:, None] * np.ones(H)
        )


def test_window_mean_under_drift_moves_by_the_drifts_mean():
    """A ramp 1/k, 2/k, ..., 1 of c·σ over k points: the window mean moves by c·σ·(k+1)/2 / n."""
    inputs = windows()
    for k, c in ((1, 1.0), (6, 2.0), (24, 0.5)):
        drifted = perturb(placed("drift", params={"k": k, "c": c}, placement="cyclic"), inputs, first=30)
        expected = c * inputs.std(axis=1) * (k + 1) / 2 / N
        np.testing.assert_allclose(window_mean(drifted)[:, 0] - window_mean(inputs)[:, 0], expected)


def test_gap_on_a_nan_taking_system_and_the_imputed_path_differ_as_constructed():
    """A NaN-taking mean averages the n - k points left; the imputed path (ffill, for a system that cannot take
    NaN) averages them plus k copies of the last value before the gap: they differ by k/n of (that value − the
    mean of the rest)."""
    inputs = windows()
    k = 6
    gapped = perturb(placed("gap", params={"k": k}), inputs)
    own = window_mean(gapped)[:, 0]
    imputed = window_mean(impute(gapped, "ffill"))[:, 0]
    rest = inputs[:, : N - k]
    np.testing.assert_allclose(own, rest.mean(axis=1))
    np.testing.assert_allclose(imputed - own, k / N * (rest[:, -1] - rest.mean(axis=1)))
    assert np.abs(imputed - own).min() > 0


def test_severity_levels_are_monotone_in_harm_for_a_linear_model():
    """A planted linear model on linear data (right on clean inputs): each fault's added error grows with its
    level (k scaled for a season of 52, and data without a season)."""
    rng = np.random.default_rng(5)
    rows, n = 60, 120
    t = np.arange(n + H)
    series = 50 + 0.8 * t[None, :] + rng.normal(0, 2.0, (rows, n + H))  # the model is right on clean inputs
    inputs, truth = series[:, :n], series[:, n:]
    clean_error = np.abs(linear(inputs) - truth).mean()
    for season in (52, 1):
        for name in FAULTS:
            harm = []
            for level in LEVELS:
                p = placed(name, n=n, season=season, severity=level)
                harm.append(np.abs(linear(perturb(p, inputs)) - truth).mean() - clean_error)
            assert all(a < b for a, b in pairwise(harm)), (name, season, harm)
            assert harm[-1] > 0.1 * clean_error, (name, season, harm)


# --- the severity table -------------------------------------------------------------------------------------


def test_the_severity_table_grades_every_fault_and_scales_k_by_the_season():
    table = severity_table()
    assert set(table.magnitudes) == set(FAULTS)
    assert [table.points(level, season=52, input_length=104) for level in LEVELS] == [2, 6, 13, 26, 52]
    assert [table.points(level, season=24, input_length=100) for level in LEVELS] == [1, 3, 6, 12, 24]
    assert [table.points(level, season=1, input_length=100) for level in LEVELS] == [1, 3, 6, 12, 24]
    assert [table.points(level, season=7, input_length=100) for level in LEVELS] == [1, 2, 3, 4, 7]
    assert table.points(5, season=1, input_length=20) == 19  # below the input's length
    assert table.params("drift", 3, season=24, input_length=100) == {"k": 6.0, "c": 1.5}


def test_a_severity_entry_records_its_settings_and_level():
    p = placed("offset", severity=3, season=52, n=104)
    assert (p.params, p.level, p.severity) == ({"k": 13.0, "c": 1.0}, 3, None)
    assert "13 points" in p.description
    grid = load_suite(
        [
            PerturbationSpec(id="P0", operator="none"),
            PerturbationSpec(id="S", operator="stuck", grid={"severity": [1, 3, 5]}),
        ],
        base_dir=Path("."),
        input_length=104,
        season=52,
    )[1:]
    assert [(g.id, g.family, g.severity, g.level, g.params["k"]) for g in grid] == [
        ("S@1", "S", 1.0, 1, 2.0),
        ("S@3", "S", 3.0, 3, 13.0),
        ("S@5", "S", 5.0, 5, 52.0),
    ]


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"operator": "halve", "severity": 3}, "severity applies to the duration faults"),
        ({"operator": "drift", "severity": 3, "params": {"c": 2}}, "give either severity or params"),
        ({"operator": "gap", "severity": 6}, "less than or equal to 5"),
        ({"operator": "gap", "grid": {"severity": [1, 7]}}, "levels 1 to 5"),
        ({"operator": "gap", "severity": 2, "grid": {"severity": [1, 2]}}, "not both"),
    ],
)
def test_a_wrong_severity_is_refused(entry, words):
    with pytest.raises(ValueError, match=words):
        PerturbationSpec(id="F", **entry)


@pytest.mark.parametrize("entry", [{"params": {"k": 2.5}}, {"params": {"k": 0}}, {"grid": {"k": [1, 1.5]}}])
def test_a_fractional_duration_is_refused_in_the_entry(entry):
    with pytest.raises(ValueError, match="whole number of points"):
        PerturbationSpec(id="F", operator="stuck", **entry)


# --- through a run: ratings.json's `faults`, the label's lines, the report's table ---------------------------

SENSOR_SUITE = """\
name: planted-sensors
newest_point: true
perturbations:
  - {id: F0, operator: none}
  - {id: stuck, operator: stuck, severity: 3}
  - {id: gap, operator: gap, severity: 3}
  - {id: delay, operator: delay, severity: 3}
  - {id: offset, operator: offset, severity: 3}
  - {id: stuck-dose, operator: stuck, grid: {severity: [1, 3, 5]}}
"""
SENSOR_SYSTEMS = """\
- {name: last, type: python, function: "planted.py:last_value"}
- {name: deaf, type: python, function: "planted.py:ignores_input"}
"""


def test_a_run_reports_each_faults_rise_by_level(synthetic_study, cli, tmp_path):
    """A last-value forecaster (gaps imputed by ffill) sees the same newest value under stuck, gap and delay ending
    at the newest point (the value k points back), so their rises there are equal; a system that ignores its
    input does not change under any fault. The label says so per fault; the report tabulates fault × level."""
    (tmp_path / "sensors.yaml").write_text(SENSOR_SUITE)
    config = synthetic_study(SENSOR_SYSTEMS, suite="sensors.yaml", stride=4, draws=2)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1")
    assert code == 0, err
    from causalrate.report.faults import fault_lines, fault_table
    from causalrate.run import Run

    doc = Run.open(tmp_path / "run").ratings
    rows = {(r.system, r.perturbation): r for r in doc.faults}
    assert {p.id: p.level for p in doc.perturbations if p.level} == {
        "stuck": 3,
        "gap": 3,
        "delay": 3,
        "offset": 3,
        "stuck-dose@1": 1,
        "stuck-dose@3": 3,
        "stuck-dose@5": 5,
    }
    last = {p: rows[("last", p)] for p in ("stuck", "gap", "delay")}
    assert last["stuck"].rise_newest == last["gap"].rise_newest == last["delay"].rise_newest > 0
    assert rows[("last", "stuck-dose@3")].rise_newest is None  # a grid member has no newest-point companion
    assert all(r.ape_true == 0 and r.rise == 0 for (system, _), r in rows.items() if system == "deaf")
    assert fault_lines(doc, "deaf") == [
        f"{name}: no change (at the newest point: no change)"
        for name in ("stuck reading", "gap in the data", "delayed feed", "offset")
    ]
    (stuck_line, *_) = fault_lines(doc, "last")
    stuck = rows[("last", "stuck")]
    percent = [f"{'+' if x > 0 else '−'}{int(abs(100 * x) + 0.5)} %" for x in (stuck.rise, stuck.rise_newest)]
    assert stuck_line == f"stuck reading: {percent[0]} (at the newest point: {percent[1]})"
    table = fault_table(doc, "last")
    assert table is not None and table["levels"] == [1, 3, 5]
    dose = next(row for row in table["rows"] if row["entry"] == "stuck-dose")
    assert sorted(dose["cells"]) == [1, 3, 5]
    label = (tmp_path / "run" / "cards" / "last.html").read_text()
    assert 'id="faults"' in label and "stuck reading: " in label and "how much its error rises" in label
    report = (tmp_path / "run" / "cards" / "last.report.html").read_text()
    assert 'id="fault-table"' in report and "stuck-dose" in report


def test_the_shipped_sensors_study_grades_every_fault_on_weekly_co2():
    """studies/sensors.yaml: the sensors suite on weekly CO2 (season 52) — every fault at severity 3 (13 weeks),
    cyclic and with its newest-point companion, and a grid over the five levels."""
    from causalrate.config import load_config
    from causalrate.study import prepare

    root = Path(__file__).resolve().parents[1]
    config, base = load_config(root / "studies" / "sensors.yaml")
    study = prepare(config, base_dir=base, check_systems=False)
    assert study.dataset.season == 52 and [s.id for s in study.dataset.series] == ["co2.co2"]
    at_three = [p for p in study.suite if p.level == 3 and p.severity is None]
    assert sorted(p.operator_name for p in at_three) == sorted(FAULTS)
    assert {p.params["k"] for p in at_three} == {13.0}
    assert sorted(p.newest_of for p in study.newest) == sorted(p.id for p in at_three)
    grids = {p.family: [] for p in study.suite if p.severity is not None}
    for p in study.suite:
        if p.severity is not None:
            grids[p.family].append(p.params["k"])
    assert len(grids) == len(FAULTS) and all(ks == [2.0, 6.0, 13.0, 26.0, 52.0] for ks in grids.values())


def test_the_relative_rise_pairs_windows_by_hand():
    """APE_true over the windows where both forecasts exist, over the clean outcome on those same windows."""
    from causalrate.report.faults import relative_rise

    effect, clean, rise = relative_rise(np.array([2.0, 4.0, np.nan, 9.0]), np.array([1.0, 2.0, 3.0, np.nan]))
    assert (effect, clean, rise) == (1.5, 1.5, 1.0)
    assert np.isnan(relative_rise(np.array([np.nan]), np.array([1.0]))).all()
