"""studies/electricity.yaml: Victoria's hourly electricity demand as statsmodels ships it, in ten fortnights with
their month and austral season; the references and statsforecast models; its reference ratings do not drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from causalrate.causal.wrs import Dimension
from causalrate.cli import main
from causalrate.config import DataConfig, load_config
from causalrate.data.loaders import load_dataset
from causalrate.study import prepare
from tests.test_quickstart import drift

ROOT = Path(__file__).resolve().parents[1]
STUDY, REFERENCE = ROOT / "studies" / "electricity.yaml", ROOT / "ratings" / "electricity"


def test_the_shipped_fortnights_are_hourly_with_month_and_season():
    data = load_dataset(DataConfig(source="electricity"), base_dir=Path("."), min_length=120)
    assert (data.frequency, data.season, len(data.series)) == ("hourly", 24, 10)
    first = data.series[0]
    assert first.id == "fortnight-01-01" and first.attributes == {"month": "January", "season": "summer"}
    assert first.values[:2].tolist() == [7926.529376, 7901.82699] and str(first.dates[1]) == "2012-01-01T01:00:00"
    assert all(s.values.size == 14 * 24 for s in data.series)


def test_the_study_rates_month_within_season_with_the_seasonal_references():
    config, base_dir = load_config(STUDY)
    study = prepare(config, base_dir=base_dir, check_systems=False)
    assert study.dimensions == (Dimension("month", "season"), Dimension("season"))
    assert study.config.causal.schemes == ["uniform", "season", "month", "level"]  # flat first
    assert {"seasonal_naive", "autoets", "autotheta", "holtwinters"} <= set(study.systems)


@pytest.fixture(scope="module")
def electricity(tmp_path_factory) -> Path:
    pytest.importorskip("statsforecast")
    out = tmp_path_factory.mktemp("electricity") / "run"
    assert main(["assess", str(STUDY), "--out", str(out), "--workers", "2", "--no-cards"]) == 0
    return out


def test_reference_ratings_do_not_drift(electricity):
    """ratings/electricity is what this study produces; regenerate with `python -m tests.make_reference
    electricity`."""
    new = json.loads((electricity / "ratings.json").read_text())
    assert drift(new, json.loads((REFERENCE / "ratings.json").read_text())) == []
    bias = {s: h["bias"] for s, h in new["headlines"].items()}
    assert "differ by month or season" in bias["naive"]["meaning"]
