"""The worked plugin example (examples/plugin): one plugin file rates an operator, system, score and scheme."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_plugin_example_rates_all_four_kinds(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "causalrate", "assess", "examples/plugin/study.yaml", "--out", str(out), "--no-cards"],
        cwd=ROOT,  # the README's command, from the repository root
        env={**os.environ, "CAUSALRATE_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "ratings.json").read_text())
    rows = {(r["system"], r["score"], r["perturbation"]): r for r in doc["ratings"]}
    assert [s["name"] for s in doc["systems"]] == ["naive", "drift"]  # the plugin system is rated
    assert [p["id"] for p in doc["perturbations"]] == ["P0", "P1"]
    for system in ("naive", "drift"):
        # the plugin operator changed the inputs: a signed effect (the `ape` row rates its harm, max(APE, 0))
        assert any(e["ape_true"] != 0 for e in doc["effects"] if (e["system"], e["perturbation"]) == (system, "P1"))
        mae = rows[(system, "mae", "P1")]  # the plugin score: rated, with a bootstrap interval
        assert mae["interval"][0] <= mae["raw"] <= mae["interval"][1] and "stability" in mae
        ape = rows[(system, "ape_calm_first", "P1")]  # the plugin scheme's generated scores
        assert ape["interval"] is not None and ape["raw"] is not None
        assert (system, "pie_calm_first", "P1") in rows
        medae = rows[(system, "medae", "P0")]  # the median-type score: its own replicates give it an interval
        assert np.isfinite(medae["interval"]).all() and medae["interval"][0] <= medae["raw"] <= medae["interval"][1]
        assert medae["interval"][0] < medae["interval"][1] and "stability" in medae
        assert "medae" in doc["headlines"][system]["accuracy"]["scores"]  # it declared its headline
