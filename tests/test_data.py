"""Loaders and windows: embedded data, CSV wide + YAML attributes, parquet long, windows arithmetic."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.config import DataConfig, default_data
from causalrate.data import make_windows
from causalrate.data.loaders import load_dataset
from tests.conftest import synthetic_long_csv


def test_embedded_quickstart_data():
    ds = load_dataset(default_data(), base_dir=Path("."), min_length=100)
    assert [s.id for s in ds.series] == ["AAPL", "MSFT", "MRK", "PFE", "JPM", "BAC"]
    aapl = ds.series[0]
    assert aapl.attributes == {"company": "Apple Inc.", "industry": "Technology", "sector": "Information Technology"}
    assert str(aapl.dates[0]) == "2022-01-03" and str(aapl.dates[-1]) == "2022-12-28"
    assert aapl.values.size == 249 and np.isfinite(aapl.values).all()
    assert {s.attributes["industry"] for s in ds.series} == {"Technology", "Pharmaceuticals", "Banking"}
    assert ds.content_hash() == load_dataset(default_data(), base_dir=Path("."), min_length=100).content_hash()


def test_wide_csv_with_attribute_mapping(tmp_path):
    dates = pd.bdate_range("2022-01-03", periods=30)
    pd.DataFrame({"day": dates, "X": np.arange(30.0) + 1, "Y": np.arange(30.0) * 2 + 5}).to_csv(
        tmp_path / "w.csv", index=False
    )
    cfg = DataConfig(
        source="csv",
        path="w.csv",
        date_column="day",
        start="2022-01-10",
        attributes={"X": {"industry": "I", "company": "x"}, "Y": {"industry": "J", "company": "y"}},
    )
    ds = load_dataset(cfg, base_dir=tmp_path, min_length=10)
    assert [s.id for s in ds.series] == ["X", "Y"]
    assert ds.series[0].values[0] == 6.0  # 2022-01-10 is the 6th business day
    assert ds.series[1].attributes == {"industry": "J", "company": "y"}


def test_parquet_long_layout(tmp_path):
    synthetic_long_csv(tmp_path / "p.csv")
    pd.read_csv(tmp_path / "p.csv", parse_dates=["date"]).to_parquet(tmp_path / "p.parquet")
    cfg = DataConfig(source="parquet", path="p.parquet", layout="long", attribute_columns=["industry", "company"])
    ds = load_dataset(cfg, base_dir=tmp_path, min_length=50)
    assert len(ds.series) == 6 and ds.series[0].attributes == {"industry": "Alpha", "company": "A1"}
    assert ds.attribute_names == ["company", "industry"]


def test_windows_slice_input_and_truth(tmp_path):
    ds = load_dataset(default_data(), base_dir=Path("."), min_length=100)
    w = make_windows(ds, input_length=80, horizon=20, stride=2)
    assert len(w) == 6 * 75  # (249 - 100) // 2 + 1 per series
    i = 7  # AAPL, start 14
    assert w.start[i] == 14
    np.testing.assert_array_equal(w.inputs[i], ds.series[0].values[14:94])
    np.testing.assert_array_equal(w.truth[i], ds.series[0].values[94:114])
    assert w.truth_dates[i, 0] == ds.series[0].dates[94]


@pytest.mark.parametrize("command", ["systems", "perturbations"])
def test_listing_commands(cli, command):
    code, out, _ = cli(command)
    assert code == 0
    expected = (
        ["naive", "arima", "random", "biased", "python"]
        if command == "systems"
        else ["none", "drop_to_zero", "halve", "missing"]
    )
    assert all(name in out for name in expected)
