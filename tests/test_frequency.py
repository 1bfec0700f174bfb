"""Data at any regular frequency (issue 31): inference, the grid, sub-daily dates, the seasonal period, seasonal
MASE, the seasonal_naive reference, biased's target from the data, and hourly and monthly runs end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.data.frequency import FREQUENCIES, infer_frequency, parse, regular_grid
from causalrate.data.loaders import load_dataset
from causalrate.data.spec import DataConfig
from causalrate.errors import UserError
from causalrate.forecast.metrics import mase
from causalrate.systems.base import Batch
from causalrate.systems.reference import SeasonalNaive, SeasonalNaiveSettings
from tests.conftest import write_yaml

PANDAS = {
    "hourly": "h",
    "daily": "D",
    "business-daily": "B",
    "weekly": "W-SUN",
    "monthly": "MS",
    "quarterly": "QE-DEC",
    "yearly": "YS",
}
SEASONS = {"hourly": 24, "daily": 7, "business-daily": 5, "weekly": 52, "monthly": 12, "quarterly": 4, "yearly": 1}


def planted_long_csv(path: Path, *, freq: str, season: int, length: int, domains=("energy", "retail")) -> Path:
    """Two series per domain: a fixed seasonal profile plus a linear trend, so every seasonal difference
    x_t − x_{t−m} equals the trend times m: the seasonal naive's error in and out of sample is the same."""
    ds = pd.date_range("2020-01-01", periods=length, freq=freq)
    t = np.arange(length)
    rows = []
    for k, domain in enumerate(d for d in domains for _ in range(2)):
        profile = np.random.default_rng(k).normal(0, 3, season)
        y = 50 + 10 * k + profile[t % season] + (0.05 + 0.01 * k) * t
        rows.append(pd.DataFrame({"unique_id": f"s{k}", "ds": ds, "y": y, "domain": domain}))
    pd.concat(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("name", list(PANDAS))
def test_frequency_is_inferred_with_its_usual_season(name):
    dates = pd.date_range("2021-01-04", periods=40, freq=PANDAS[name])
    frequency = infer_frequency(dates, source="x")
    assert frequency.name == name and frequency.season == SEASONS[name] == FREQUENCIES[name].season


def test_hourly_long_csv_keeps_its_hours(tmp_path):
    """Once rejected as "duplicate dates": the dates were cut to days."""
    planted_long_csv(tmp_path / "h.csv", freq="h", season=24, length=100)
    data = load_dataset(DataConfig(source="csv", path="h.csv", layout="long"), base_dir=tmp_path, min_length=50)
    assert (data.frequency, data.season) == ("hourly", 24)
    assert str(data.series[0].dates[1]) == "2020-01-01T01:00:00"
    assert data.series[0].attributes == {"domain": "energy"}  # every other column is an attribute
    declared = DataConfig(source="csv", path="h.csv", layout="long", season=12)
    assert load_dataset(declared, base_dir=tmp_path, min_length=50).season == 12


def test_a_missing_timestamp_is_a_gap(tmp_path):
    frame = pd.read_csv(planted_long_csv(tmp_path / "h.csv", freq="h", season=24, length=100))
    frame.drop(index=[7]).to_csv(tmp_path / "gap.csv", index=False)
    cfg = DataConfig(source="csv", path="gap.csv", layout="long")
    with pytest.raises(UserError, match=r"series .s0.: 1 missing .*first at 2020-01-01T07.*data.fill: ffill"):
        load_dataset(cfg, base_dir=tmp_path, min_length=50)
    filled = load_dataset(cfg.model_copy(update={"fill": "ffill"}), base_dir=tmp_path, min_length=50)
    assert filled.series[0].values[7] == frame["y"][6] and filled.series[0].dates.size == 100


def test_dates_off_the_declared_grid_are_named(tmp_path):
    frame = pd.DataFrame({"unique_id": "a", "ds": pd.date_range("2020-01-01", periods=30, freq="MS"), "y": 1.0})
    frame.loc[3, "ds"] = pd.Timestamp("2020-04-15")
    frame["y"] = np.arange(30.0)
    frame.to_csv(tmp_path / "m.csv", index=False)
    with pytest.raises(UserError, match="2020-04-15 00:00:00 is not on the monthly grid"):
        load_dataset(DataConfig(source="csv", path="m.csv", layout="long"), base_dir=tmp_path, min_length=10)


def test_seasonal_mase_by_hand():
    x = np.array([[1.0, 3.0, 2.0, 6.0, 4.0, 7.0]])  # season 2: |2−1|, |6−3|, |4−2|, |7−6| → mean 7/4
    truth, forecast = np.array([[8.0, 9.0]]), np.array([[7.0, 12.0]])  # MAE 2
    assert mase(truth, forecast, x, season=2)[0] == pytest.approx(2 / (7 / 4))
    assert mase(truth, forecast, x)[0] == pytest.approx(2 / np.mean(np.abs(np.diff(x))))  # the paper's, m = 1


def test_seasonal_naive_repeats_the_last_season():
    inputs = np.arange(10.0)[None, :]
    batch = Batch(
        inputs=inputs,
        horizon=7,
        seeds=np.zeros(1, np.uint64),
        attributes=({},),
        input_dates=np.zeros((1, 10), "datetime64[D]"),
        truth_dates=np.zeros((1, 7), "datetime64[D]"),
        season=3,
    )
    system = SeasonalNaive(SeasonalNaiveSettings(), base_dir=Path("."))
    assert system.forecast(batch).tolist() == [[7.0, 8.0, 9.0, 7.0, 8.0, 9.0, 7.0]]


STUDY = """\
name: {name}
data: {{source: csv, path: data.csv, layout: long}}
windows: {{input_length: {n}, horizon: {d}, stride: {stride}}}
perturbations:
  - {{id: P0, operator: none}}
  - {{id: P1, operator: drop_to_zero}}
  - {{id: P3, operator: missing}}
outcome: mase
causal: {{schemes: [uniform, domain], draws: 2}}
rigor: {{bootstrap_size: 0, refute: false}}
heterogeneity: {{enabled: false}}
systems:
  - {{name: seasonal_naive, type: seasonal_naive}}
  - {{name: naive, type: naive}}
  - {{name: biased, type: biased}}
  - {{name: dated, type: python, function: "dated.py:season_from_context", context: true, trained_on: [data.csv]}}
"""

DATED = '''\
import numpy as np

def season_from_context(inputs, horizon, context):
    """The seasonal naive again, its period and the dates read from the context."""
    m = context["season"]
    assert context["truth_dates"].shape == (inputs.shape[0], horizon), context["truth_dates"].shape
    step = context["truth_dates"][:, 0] - context["input_dates"][:, -1]
    assert (step > np.timedelta64(0, "s")).all()
    return inputs[:, inputs.shape[1] - m:][:, np.arange(horizon) % m]
'''


@pytest.mark.parametrize(
    ("freq", "season", "name", "first"),
    [("h", 24, "hourly", "2020-01-04T00:00:00"), ("MS", 12, "monthly", "2023-01-01")],  # after 3 seasons
)
def test_long_csv_end_to_end(tmp_path, cli, freq, season, name, first):
    """A planted seasonal series: on clean inputs the seasonal naive's MASE is 1 in every window, and a
    model's own CSV runs with the reference systems as they come (biased picks its target from the data)."""
    planted_long_csv(tmp_path / "data.csv", freq=freq, season=season, length=6 * season)
    (tmp_path / "dated.py").write_text(DATED)
    n, d = 3 * season, season
    config = write_yaml(tmp_path / "s.yaml", STUDY.format(name=name, n=n, d=d, stride=max(1, season // 4)))
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1")
    assert code == 0, err
    assert "system 'dated' declares trained_on ['data.csv'], which names this study's data" in err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    dated = next(s for s in doc["systems"] if s["name"] == "dated")
    assert dated["trained_on_study_data"] == ["data.csv"]
    assert (doc["provenance"]["frequency"], doc["provenance"]["season"]) == (name, season)
    biased = next(s for s in doc["systems"] if s["name"] == "biased")
    assert (biased["settings"]["attribute"], biased["settings"]["value"]) == ("domain", "energy")
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as db:
        rows = db.execute("SELECT system, m_mase FROM forecasts WHERE perturbation = 'P0'").fetchall()
        stored = db.execute("SELECT first_forecast_date FROM windows WHERE window = 0").fetchone()[0]
    clean = {s: np.array([v for t, v in rows if t == s]) for s in ("seasonal_naive", "dated", "naive")}
    assert clean["seasonal_naive"].size > 0 and np.allclose(clean["seasonal_naive"], 1.0)
    assert np.allclose(clean["dated"], 1.0)  # frequency, season and dates reached the python system
    assert clean["naive"].mean() > 1.5
    assert stored == first


def test_a_dataframe_through_the_python_api(tmp_path):
    """assess_frame: a long-format DataFrame rated as a CSV would be; the run keeps the frame it rated."""
    import yaml

    from causalrate.config import StudyConfig
    from causalrate.pipeline import assess_frame

    frame = pd.read_csv(planted_long_csv(tmp_path / "x.csv", freq="MS", season=12, length=72), parse_dates=["ds"])
    study = yaml.safe_load(STUDY.format(name="frame", n=36, d=12, stride=6))
    study["systems"] = study["systems"][:3]
    config = StudyConfig.model_validate(study)
    out = assess_frame(frame, config, base_dir=tmp_path, out=tmp_path / "run", workers=1)
    doc = json.loads((out / "ratings.json").read_text())
    assert doc["provenance"]["frequency"] == "monthly" and doc["provenance"]["config"]["data"]["source"] == "parquet"
    (kept,) = out.glob("data-*.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(kept), frame, check_dtype=False)


@pytest.mark.parametrize("season", [1, 7, 12, 24])
def test_naive_mase_skill_ratio_against_itself_is_one(season):
    """The absolute scale's naive basis takes MASE at the study's season, as every forecast's metrics do (it was
    computed at season 1: naive got level 3 on MASE against itself, skill ratio 3.078/1.181 on monthly data)."""
    from causalrate.forecast.metrics import METRICS
    from causalrate.rate.absolute import absolute_quantities, naive_clean_error
    from causalrate.score.scores import Evidence, Mase
    from causalrate.systems.reference import Naive

    rng = np.random.default_rng(season)
    t = np.arange(6 * season + 40)
    values = 100 + 10 * np.sin(2 * np.pi * t / season) + rng.normal(0, 1, t.size)
    n, d = 3 * season + 10, max(season, 5)
    starts = range(0, t.size - n - d, 3)
    inputs = np.stack([values[s : s + n] for s in starts])
    truth = np.stack([values[s + n : s + n + d] for s in starts])
    none = np.empty((len(inputs), 0), dtype="datetime64[D]")
    batch = Batch(inputs, d, np.zeros(len(inputs), dtype=np.uint64), ({},) * len(inputs), none, none, season=season)
    forecast = Naive(Naive.Settings(), base_dir=Path()).forecast(batch)
    per_forecast = METRICS.get("mase")(truth, forecast, inputs, season=season)  # as forecast.plan records them
    rows = pd.DataFrame({"system": "naive", "perturbation": "P0", "window": range(len(inputs)), "failed": False})
    evidence = Evidence(
        forecasts=rows.assign(mase=per_forecast), wrs=pd.DataFrame(), effects=pd.DataFrame(), control="P0", severity={}
    )
    raw = Mase().compute(evidence).assign(score="mase")
    reference = naive_clean_error(inputs, truth, METRICS.get("mase"), season=season)
    wrs = pd.DataFrame(columns=["system", "perturbation", "attribute", "pairs"])
    (ratio,) = absolute_quantities(raw, wrs, naive_error=1.0, naive_scores={"mase": reference})
    assert ratio == pytest.approx(1.0, abs=1e-12)
    if season > 1:  # the season-1 scale it had: off by the ratio of the two scales
        one_step = naive_clean_error(inputs, truth, METRICS.get("mase"), season=1)
        assert abs(one_step / reference - 1) > 0.1


@pytest.mark.parametrize(
    ("alias", "name", "season"),
    [
        ("30min", "half-hourly", 48),
        ("15min", "quarter-hourly", 96),
        ("5min", "5-minutely", 288),
        ("1min", "minutely", 1440),
        ("2h", "2h", 12),
        ("10s", "10s", 8640),
    ],
)
def test_sub_hourly_frequencies_are_inferred_and_declared_with_a_day_as_season(alias, name, season):
    dates = pd.date_range("2024-03-01", periods=300, freq=alias)
    inferred = infer_frequency(dates, source="x")
    assert (inferred.name, inferred.season) == (name, season)
    assert DataConfig(frequency=alias).frequency == alias and parse(alias) == inferred
    assert regular_grid(dates, inferred, calendar=dates, source="x").equals(dates)


def test_pandas_aliases_of_the_named_frequencies_and_an_unknown_one():
    assert [parse(a).name for a in ("MS", "W", "h", "B", "QS", "YS")] == [
        "monthly",
        "weekly",
        "hourly",
        "business-daily",
        "quarterly",
        "yearly",
    ]
    with pytest.raises(ValueError, match=r"unknown frequency 'fortnightly-ish'.*half-hourly.*30min"):
        DataConfig(frequency="fortnightly-ish")


def test_dates_off_every_grid_get_a_message_listing_what_would_fit():
    half_hours = pd.date_range("2024-03-01", periods=96, freq="30min")
    with pytest.raises(UserError, match=r"not on the hourly grid.*what would fit: data.frequency: half-hourly"):
        regular_grid(half_hours, FREQUENCIES["hourly"], calendar=half_hours, source="x")
    irregular = half_hours.delete([3, 7]).append(pd.DatetimeIndex(["2024-03-03 00:10"]))
    frequency = infer_frequency(irregular, source="x")
    with pytest.raises(UserError, match=r"what would fit: data.frequency: 10min .*, or half-hourly \(the most common"):
        regular_grid(irregular, frequency, calendar=irregular, source="x")


@pytest.mark.parametrize(
    ("domains", "references", "why"),
    [
        ((), ["naive", "arima", "random", "seasonal_naive"], "nothing to be biased on"),
        (("energy",), ["naive", "arima", "random", "seasonal_naive"], "one value"),
        (("energy", "water"), ["naive", "arima", "random", "seasonal_naive", "biased"], None),
    ],
)
def test_a_model_yaml_is_rated_against_the_references_that_fit_its_data(tmp_path, cli, domains, references, why):
    """METHOD §7: seasonal_naive on data with a season above 1; biased only where the data have an attribute
    with two or more values (one monthly series without any, or two series of one domain: left out with a note,
    not exit 2 — its bias is a gap between groups, and one group has no other to differ from)."""
    planted_long_csv(tmp_path / "data.csv", freq="MS", season=12, length=72, domains=domains or ("energy",))
    frame = pd.read_csv(tmp_path / "data.csv")
    (frame if domains else frame[frame["unique_id"] == "s0"].drop(columns="domain")).to_csv(
        tmp_path / "data.csv", index=False
    )
    model = """\
model: {name: mine, type: seasonal_naive}
data: {source: csv, path: data.csv, layout: long}
windows: {input_length: 36, horizon: 12, stride: 3}
perturbations: [{id: P0, operator: none}, {id: P1, operator: drop_to_zero}]
rigor: {bootstrap_size: 0, refute: false}
heterogeneity: {enabled: false}
causal: {draws: 2}
"""
    code, _, err = cli("assess", write_yaml(tmp_path / "m.yaml", model), "--out", tmp_path / "run", "--no-cards")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert [s["name"] for s in doc["systems"]] == ["mine", *references]
    if why:
        (note,) = doc["not_assessed"]
        assert note["name"] == "biased" and why in str(note), note
