"""Every attribute a bias dimension (METHOD §4, issue 41): wrs_<attr>, bias_<attr> and a scheme <attr> for any
attribute of the data, whatever its name; nesting declared or detected; the bias question names them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from causalrate.causal.wrs import Dimension, attribute_dimensions
from tests.conftest import write_yaml

REGIONS = {"north": ("n1", "n2"), "south": ("s1", "s2"), "west": ("w1", "w2")}


def test_dimensions_nesting_detected_declared_and_the_same_partition_once():
    table = pd.DataFrame(
        {
            "company": ["A", "A", "B", "C", "D", "E"],
            "industry": ["Tech", "Tech", "Tech", "Bank", "Bank", "Pharma"],
            "sector": ["IT", "IT", "IT", "Fin", "Fin", "Health"],  # groups the rows as industry does
            "country": ["us"] * 6,  # one value: nothing to compare
            "size": ["big", "small", "big", "small", "big", "small"],  # crosses industry: flat
        }
    )
    names = list(table.columns)
    assert attribute_dimensions(table, names) == (
        Dimension("company", "industry"),
        Dimension("industry"),
        Dimension("size"),
    )
    declared = attribute_dimensions(table, names, {"size": "industry"})
    assert declared == (Dimension("company"), Dimension("industry"), Dimension("size", "industry"))
    assert attribute_dimensions(table, names, {}) == (Dimension("company"), Dimension("industry"), Dimension("size"))


def regional_csv(path: Path, *, freq: str = "30min", season: int = 48, length: int = 288) -> Path:
    """Two sites per region, a daily load profile plus noise."""
    ds = pd.date_range("2024-01-01", periods=length, freq=freq)
    t = np.arange(length)
    rows = []
    for k, (region, site) in enumerate((r, s) for r, sites in REGIONS.items() for s in sites):
        rng = np.random.default_rng(k)
        y = 100 + 10 * k + 20 * np.sin(2 * np.pi * t / season) + rng.normal(0, 2, length)
        rows.append(pd.DataFrame({"unique_id": site, "ds": ds, "y": y, "region": region, "site": site}))
    pd.concat(rows).to_csv(path, index=False)
    return path


STUDY = """\
name: regional
data: {source: csv, path: load.csv, layout: long}
windows: {input_length: 96, horizon: 24, stride: 8}
perturbations:
  - {id: P0, operator: none}
  - {id: P1, operator: drop_to_zero}
outcome: mase
causal: {draws: 2}
rigor: {bootstrap_size: 200, refute: false}
heterogeneity: {enabled: false}
systems:
  - {name: naive, type: naive}
  - {name: seasonal_naive, type: seasonal_naive}
  - {name: high_north, type: biased, attribute: region, value: north, strength: 0.4}
"""


def test_a_system_too_high_in_one_region_gets_the_worst_bias_naming_region(tmp_path, cli):
    """Half-hourly loads of six sites in three regions: a system 40 % too high in the north is rated on
    `region` (the attribute's own scores and scheme), worst on bias, and its cause names region."""
    regional_csv(tmp_path / "load.csv")
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", STUDY), "--out", tmp_path / "run", "--workers", "1")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert (doc["provenance"]["frequency"], doc["provenance"]["season"]) == ("half-hourly", 48)
    scores = {r["score"] for r in doc["ratings"]}
    assert {"wrs_region", "bias_region", "wrs_site", "bias_site", "ape_region", "pie_region"} <= scores
    assert doc["provenance"]["config"]["causal"]["schemes"] == ["uniform", "region", "site", "level"]
    bias = {s: h["bias"] for s, h in doc["headlines"].items()}
    assert bias["high_north"]["rating"] == 3 > max(bias["naive"]["rating"], bias["seasonal_naive"]["rating"])
    assert bias["high_north"]["cause"]["score"] in ("wrs_region", "bias_region")
    assert "differ by region or site" in bias["high_north"]["meaning"]
    label = (tmp_path / "run" / "cards" / "high_north.html").read_text()
    assert "Do its errors differ by region or site?" in label and "industries" not in label


def test_an_attributes_generated_scores_take_their_built_in_kins_scales():
    from causalrate.causal.schemes import attribute_scheme
    from causalrate.rate.absolute import scale_of
    from causalrate.score.scores import SCORES, register_dimension

    register_dimension("store_kind")
    attribute_scheme("store_kind")
    for prefix in ("wrs", "bias", "ape", "pie"):
        assert SCORES.get(f"{prefix}_store_kind").generated_for == "store_kind"
        assert scale_of(f"{prefix}_store_kind") == scale_of(f"{prefix}_industry") is not None
