"""The statsforecast system type: forecasts equal statsforecast called directly on the same windows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.errors import UserError
from causalrate.systems.base import Batch
from causalrate.systems.nixtla import StatsForecastModel, StatsForecastSettings
from tests.conftest import require_peer, write_yaml
from tests.test_frequency import planted_long_csv

statsforecast = require_peer("statsforecast")


def windows(rows: int = 5, n: int = 48, season: int = 12) -> np.ndarray:
    t = np.arange(n)
    rng = np.random.default_rng(7)
    return np.stack([20 + 5 * np.sin(2 * np.pi * t / season + k) + 0.1 * t + rng.normal(0, 1, n) for k in range(rows)])


def batch_of(inputs: np.ndarray, horizon: int, season: int) -> Batch:
    rows, n = inputs.shape
    return Batch(
        inputs=inputs,
        horizon=horizon,
        seeds=np.zeros(rows, np.uint64),
        attributes=tuple({} for _ in range(rows)),
        input_dates=np.zeros((rows, n), "datetime64[D]"),
        truth_dates=np.zeros((rows, horizon), "datetime64[D]"),
        season=season,
    )


def direct(model, window: np.ndarray, horizon: int) -> np.ndarray:
    """statsforecast on one window alone, as its own docs show it."""
    frame = pd.DataFrame({"unique_id": "w", "ds": np.arange(window.size), "y": window})
    out = statsforecast.StatsForecast(models=[model], freq=1).forecast(df=frame, h=horizon)
    return out[str(model)].to_numpy()


@pytest.mark.parametrize(
    ("name", "params"),
    [("AutoETS", {}), ("AutoARIMA", {"approximation": True}), ("AutoTheta", {}), ("SeasonalNaive", {})],
)
def test_forecasts_equal_statsforecast_called_directly(name, params):
    from statsforecast import models

    inputs = windows()
    system = StatsForecastModel(StatsForecastSettings(model=name, params=params, n_jobs=1), base_dir=Path("."))
    ours = system.forecast(batch_of(inputs, horizon=6, season=12))
    theirs = np.stack([direct(getattr(models, name)(season_length=12, **params), w, 6) for w in inputs])
    np.testing.assert_array_equal(ours, theirs)


def test_own_season_and_models_without_one():
    inputs = windows(rows=3)
    croston = StatsForecastModel(StatsForecastSettings(model="CrostonClassic"), base_dir=Path("."))
    from statsforecast.models import CrostonClassic, SeasonalNaive

    got = croston.forecast(batch_of(inputs, horizon=4, season=12))
    np.testing.assert_array_equal(got, np.stack([direct(CrostonClassic(), w, 4) for w in inputs]))
    weekly = StatsForecastModel(
        StatsForecastSettings(model="SeasonalNaive", params={"season_length": 7}), base_dir=Path(".")
    )
    got = weekly.forecast(batch_of(inputs, horizon=4, season=12))
    np.testing.assert_array_equal(got, np.stack([direct(SeasonalNaive(7), w, 4) for w in inputs]))


def test_n_jobs_is_not_part_of_the_identity_and_bad_names_are_user_errors():
    one = StatsForecastModel(StatsForecastSettings(model="AutoETS", n_jobs=1), base_dir=Path("."))
    two = StatsForecastModel(StatsForecastSettings(model="AutoETS", n_jobs=2), base_dir=Path("."))
    assert one.identity() == two.identity() and "statsforecast" in one.identity()["libraries"]
    with pytest.raises(UserError, match=r"no model 'AutoEts' in statsforecast; known: .*'AutoETS'"):
        StatsForecastModel(StatsForecastSettings(model="AutoEts"), base_dir=Path(".")).build(12)
    with pytest.raises(UserError, match="params of AutoETS"):
        StatsForecastModel(StatsForecastSettings(model="AutoETS", params={"nope": 1}), base_dir=Path(".")).build(12)


def test_a_model_yaml_on_an_hourly_csv(tmp_path, cli):
    """The issue's practitioner: statsforecast on their own hourly CSV, a model YAML and no glue code."""
    planted_long_csv(tmp_path / "load.csv", freq="h", season=24, length=150)
    config = write_yaml(
        tmp_path / "m.yaml",
        """\
        model: {name: ets, type: statsforecast, model: AutoETS}
        data: {source: csv, path: load.csv, layout: long}
        windows: {input_length: 72, horizon: 24, stride: 27}
        perturbations: [{id: P0, operator: none}, {id: P1, operator: drop_to_zero}]
        rigor: {bootstrap_size: 0, refute: false}
        heterogeneity: {enabled: false}
        causal: {draws: 2}
        """,
    )
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert [s["name"] for s in doc["systems"]] == ["ets", "naive", "arima", "random", "seasonal_naive", "biased"]
    ets = next(s for s in doc["systems"] if s["name"] == "ets")
    assert ets["imputation"] == "ffill" and ets["settings"]["model"] == "AutoETS"
    assert doc["provenance"]["config"]["causal"]["schemes"] == ["uniform", "domain", "level"]  # every attribute's
