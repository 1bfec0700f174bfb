"""studies/domains.yaml at smoke size: five domains at four frequencies from data shipped in statsmodels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from causalrate.config import DataConfig
from causalrate.data.loaders import load_dataset

STUDY = Path(__file__).parent.parent / "studies" / "domains.yaml"


def test_the_shipped_series_span_domains_and_frequencies():
    data = load_dataset(DataConfig(source="statsmodels", fill="ffill", season=1), base_dir=Path("."), min_length=72)
    domains = {s.attributes["domain"] for s in data.series}
    frequencies = {s.attributes["frequency"] for s in data.series}
    assert len(domains) >= 4 and len(frequencies) >= 2 and data.frequency == "mixed"
    nile = next(s for s in data.series if s.id == "nile.volume")
    assert (nile.values[:2].tolist(), str(nile.dates[0])) == ([1120.0, 1160.0], "1871-01-01")  # statsmodels' own


@pytest.mark.e2e
def test_domains_study_smoke(tmp_path, cli):
    study = yaml.safe_load(STUDY.read_text())
    study["windows"]["stride"] = 48
    study["causal"]["draws"] = 2
    study["rigor"] = {"replicates": 0, "refute": False}
    study["heterogeneity"] = {"enabled": False}
    config = tmp_path / "domains.yaml"
    config.write_text(yaml.safe_dump(study))
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert doc["provenance"]["frequency"] == "mixed" and doc["counts"]["failures"] == 0
    rated = {(r["system"], r["score"]) for r in doc["ratings"]}
    assert {("arima", "ape_domain"), ("arima", "wrs_domain"), ("biased", "bias_domain")} <= rated
    biased = next(s for s in doc["systems"] if s["name"] == "biased")
    assert biased["settings"]["attribute"] == "domain"
