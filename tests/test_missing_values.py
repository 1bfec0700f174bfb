"""Missing values two ways (issue 33): P3 through a system's own NaN handling and P3+ffill after
forward-fill, for the systems that take NaN only; which one each does better with, on the card."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd

from causalrate.cli import main
from causalrate.perturb.suite import load_suite
from causalrate.report.missing_values import compare, imputed_twins

SYSTEMS = """\
- {name: naive, type: naive}
- {name: median, type: python, function: planted.py:window_median}
- {name: zeroing, type: python, function: planted.py:window_mean_nan_as_zero, accepts_nan: true}
"""


def test_the_default_suites_pair_p3_with_its_forward_filled_twin(tmp_path):
    for name in ("paper", "extended"):
        suite = load_suite(name, base_dir=tmp_path, input_length=80)
        assert imputed_twins(suite) == [("P3", "P3+ffill")]
        assert {p.id: p.for_systems for p in suite}["P3+ffill"] == "nan-accepting"


def test_the_verdict_reads_the_paired_interval_of_the_difference():
    raw = {("s", "P3"): 1.0, ("s", "P3+ffill"): 2.0}
    own, filled = np.linspace(0.9, 1.1, 101), np.linspace(1.9, 2.1, 101)

    def better(a, b):
        replicates = {("ape", "P3"): {"s": a}, ("ape", "P3+ffill"): {"s": b}}
        return compare("s", ("P3", "P3+ffill"), "ffill", raw, replicates)["better"]

    assert better(own, filled) == "its own handling"  # every paired difference is −1
    assert better(filled, own) == "ffill"
    assert better(own, own[::-1]).startswith("neither")  # differences from −0.2 to 0.2
    assert better(own, own) == "neither (the same harm in every resample)"
    assert compare("s", ("P3", "P3+ffill"), "ffill", raw, {})["better"].startswith("undetermined")
    assert compare("t", ("P3", "P3+ffill"), "ffill", raw, {}) is None


def test_only_nan_accepting_systems_are_forecast_and_rated_twice(synthetic_study, tmp_path, capsys):
    study = synthetic_study(SYSTEMS, stride=10)
    study.write_text(
        study.read_text().replace(
            "  - {id: P3, operator: missing}\n",
            "  - {id: P3, operator: missing}\n"
            "  - {id: P3+ffill, operator: missing, impute: ffill, for_systems: nan-accepting}\n",
        )
    )
    assert main(["assess", str(study), "--out", str(tmp_path / "run"), "--workers", "1"]) == 0
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as conn:
        frame = pd.read_sql_query("SELECT system, window, perturbation FROM forecasts", conn)
    counts = frame.groupby(["system", "perturbation"]).size().unstack()
    windows = counts.loc["naive", "P0"]
    assert counts.loc[["naive", "zeroing"], "P3+ffill"].eq(windows).all()
    assert pd.isna(counts.loc["median", "P3+ffill"])  # imputed on P3 already: no extra forecast
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert not [r for r in doc["ratings"] if r["system"] == "median" and r["perturbation"] == "P3+ffill"]
    assert not [t for t in doc["wrs_tests"] if t["system"] == "median" and t["perturbation"] == "P3+ffill"]
    systems = {s["name"]: s for s in doc["systems"]}
    assert systems["median"]["nan_policy"] == "imputed by causalrate" and systems["median"]["missing_values"] is None
    ape = {(r["system"], r["perturbation"]): r["raw"] for r in doc["ratings"] if r["score"] == "ape"}
    zeroing = systems["zeroing"]["missing_values"]
    assert (zeroing["own_value"], zeroing["imputed_value"]) == (ape[("zeroing", "P3")], ape[("zeroing", "P3+ffill")])
    assert zeroing["own_value"] > 10 * zeroing["imputed_value"]  # a NaN read as 0 drags the window mean down
    assert zeroing["better"] == "ffill"
    assert systems["naive"]["missing_values"]["better"].startswith("neither")  # naive's own handling is a ffill
    label = (tmp_path / "run" / "cards" / "zeroing.html").read_text()
    assert "Missing values" in label and "better with ffill" in label
    card = json.loads((tmp_path / "run" / "cards" / "zeroing.model-card.json").read_text())
    limits = [x["description"] for x in card["considerations"]["limitations"]]
    said = "Missing values: handled by the system itself (it accepts NaN);"
    assert any(text.startswith(said) and "better with ffill" in text for text in limits)


def test_a_run_re_rated_after_its_suite_file_grew_rates_what_was_forecast(synthetic_study, tmp_path):
    """A run made before P3+ffill joined its suite file (as the shipped `paper` did) re-rates on the
    perturbations it forecast: no P3+ffill row rated worst for want of forecasts."""
    study = synthetic_study(SYSTEMS, stride=10, draws=2)
    suite = "name: mine\nperturbations:\n" + "".join(
        f"  - {{id: {p}, operator: {op}}}\n" for p, op in [("P0", "none"), ("P1", "drop_to_zero"), ("P3", "missing")]
    )
    (study.parent / "suite.yaml").write_text(suite)
    text = study.read_text()
    start, end = text.index("perturbations:\n"), text.index("outcome:")
    study.write_text(text[:start] + "perturbations: suite.yaml\n" + text[end:])
    assert main(["assess", str(study), "--out", str(tmp_path / "run"), "--workers", "1", "--no-cards"]) == 0
    grown = suite + "  - {id: P3+ffill, operator: missing, impute: ffill, for_systems: nan-accepting}\n"
    (study.parent / "suite.yaml").write_text(grown)
    assert main(["rate", str(tmp_path / "run"), "--out", str(tmp_path / "rerated"), "--no-cards"]) == 0
    doc = json.loads((tmp_path / "rerated" / "ratings.json").read_text())
    assert [p["id"] for p in doc["perturbations"]] == ["P0", "P1", "P3"]
    assert not [r for r in doc["ratings"] if r["insufficient"]]


def test_a_system_without_nan_says_it_is_rated_with_our_imputation():
    from types import SimpleNamespace

    from causalrate.report.templating import missing_values_text

    imputed = SimpleNamespace(nan_policy="imputed by causalrate", imputation="ffill", missing_values=None)
    assert missing_values_text(imputed) == "rated with forward-fill imputation (the system does not accept NaN)"
    own = SimpleNamespace(nan_policy="native mask", imputation=None, missing_values=None)
    assert missing_values_text(own) == "handled by the model's own missing-value mask (it accepts NaN)"


def test_the_missing_values_line_says_its_rise_on_the_headlines_basis():
    """Water demand (reader4): a model that returns 100 × its last value when an input is missing had the headline
    "its error rises by 27097 % of the naive reference's clean error" and, two rows below, "Missing values: …
    under P3 with its own handling its error rises by 101" (rmax_scaled) for the same effect. The line says the
    rise on the headlines' basis; an older ratings.json, without it, keeps the outcome's units."""
    from types import SimpleNamespace

    from causalrate.report.templating import missing_values_text

    m = SimpleNamespace(
        own="P3", imputed="P3+ffill", imputation="ffill", own_value=101.0, imputed_value=0.000143, better="ffill"
    )
    system = SimpleNamespace(nan_policy="own handling", imputation=None, missing_values=m)
    assert missing_values_text(system, 0.3845) == (
        "handled by the system itself (it accepts NaN); its error rises by 26,268 % of the naive reference's clean "
        "error under P3 with its own handling, by 0.037 % under P3+ffill (ffill): better with ffill"
    )
    assert "its error rises by 101, under P3+ffill (ffill) it rises by 0.000143" in missing_values_text(system)
