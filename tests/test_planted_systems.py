"""Planted systems through the python adapter: the ratings must find what was planted."""

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from causalrate.forecast.encoding import forecast_values

SYSTEMS = """\
- {name: robust, type: python, function: "planted.py:window_median"}
- {name: fragile, type: python, function: "planted.py:window_min"}
- {name: prejudiced, type: python, function: "planted.py:biased_high_prices"}
- {name: naive, type: naive}
"""


def rating(doc, perturbation, score, system):
    (row,) = [
        r for r in doc["ratings"] if (r["perturbation"], r["score"], r["system"]) == (perturbation, score, system)
    ]
    return row


def test_planted_effects_are_found(synthetic_study, cli, tmp_path):
    config = synthetic_study(SYSTEMS)
    code, _out, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "2", "--no-cards")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())

    # fragile (window minimum) is hurt by a zero; robust (median) is not
    assert rating(doc, "P1", "ape", "fragile")["rating"] > rating(doc, "P1", "ape", "robust")["rating"]
    assert rating(doc, "P1", "ape", "fragile")["raw"] > 10 * rating(doc, "P1", "ape", "robust")["raw"]

    # the planted industry bias gets the worst WRS across industries, on every perturbation
    for p in ("P1", "P2", "P3"):
        wrs = {s: rating(doc, p, "wrs_industry", s) for s in ("robust", "fragile", "prejudiced", "naive")}
        assert wrs["prejudiced"]["raw"] == max(r["raw"] for r in wrs.values())
        assert wrs["prejudiced"]["rating"] == max(r["rating"] for r in wrs.values())
        assert wrs["prejudiced"]["raw"] > wrs["naive"]["raw"]

    # its confounded observational APE is corrected by matching (the engine's self-check)
    for e in doc["effects"]:
        if e["system"] == "prejudiced" and e["scheme"] == "industry":
            assert abs(e["ape_adj"] - e["ape_true"]) < abs(e["ape_obs"] - e["ape_true"])

    # 160 points, windows of 40 + 10 with stride 2 → 56 per series
    assert doc["counts"] == {"series": 6, "windows": 6 * 56, "forecasts": 4 * 4 * 6 * 56, "failures": 0}
    assert {s["name"]: s["imputation"] for s in doc["systems"]}["robust"] == "ffill"


FAILING = """\
- {name: flaky, type: python, function: "planted.py:flaky"}
- {name: shape, type: python, function: "planted.py:wrong_shape"}
- {name: strict, type: python, function: "planted.py:no_nan_please"}
- {name: naive, type: naive}
"""


def test_failures_become_rows_and_the_run_goes_on(synthetic_study, cli, tmp_path):
    config = synthetic_study(FAILING, draws=2, stride=5)
    args = ("assess", config, "--out", tmp_path / "run", "--workers", "1", "--no-cards")
    code, _, err = cli(*args)
    assert code == 3 and "shape" in err and "--allow-failed-systems" in err, err  # `shape` fails every row
    code, _, err = cli(*args, "--overwrite", "--allow-failed-systems")
    assert code == 0, err
    db = sqlite3.connect(tmp_path / "run" / "forecasts.sqlite")
    errors = dict(db.execute("SELECT system, group_concat(DISTINCT error) FROM forecasts GROUP BY system").fetchall())
    assert errors["naive"] is None and errors["strict"] is None  # imputation spared `strict` from NaN
    assert "wrong shape" in errors["shape"]
    assert "RuntimeError: flaky model crashed" in errors["flaky"] and "forecast holds NaN, inf" in errors["flaky"]
    (ok,) = db.execute("SELECT count(*) FROM forecasts WHERE system = 'flaky' AND error IS NULL").fetchone()
    assert ok > 0  # the batch was retried row by row: only failing rows failed
    assert db.execute("SELECT count(*) FROM forecasts WHERE error IS NOT NULL AND forecast IS NOT NULL").fetchone() == (
        0,
    )
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    shape_rate = rating(doc, "P1", "failure_rate", "shape")
    assert shape_rate["raw"] == 1.0 and shape_rate["rating"] == 3
    assert rating(doc, "P1", "smape", "shape")["raw"] is None


def test_timeout_becomes_failure_rows(synthetic_study, cli, tmp_path):
    """forecast.timeout is per forecast: a batch of b rows may take b times it; past that its rows fail with
    the reason `timeout`, and stderr says so once for the system."""
    systems = '- {name: sleepy, type: python, function: "planted.py:sleepy"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(systems, draws=2, stride=40, extra="forecast: {timeout: 0.05, batch_size: 64}\n")
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "2", "--no-cards")
    assert code == 3 and "sleepy: timeout: no forecast within" in err, err  # every row timed out: exit 3
    assert err.count("sleepy: a batch of") == 1 and "forecast.timeout is 0.05 s per forecast" in err, err
    db = sqlite3.connect(tmp_path / "run" / "forecasts.sqlite")
    rows = {
        (n, e) for n, e in db.execute("SELECT count(*), error FROM forecasts WHERE system = 'sleepy' GROUP BY error")
    }
    assert all(e.startswith("timeout: no forecast within") for _, e in rows), rows


def test_the_time_limit_grows_with_the_batch(synthetic_study, cli, tmp_path):
    """0.3 s per row of a batch passes a 0.5 s per-forecast limit (it timed out as a 0.5 s per-batch one)."""
    systems = '- {name: steady, type: python, function: "planted.py:steady"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(systems, draws=2, stride=40, extra="forecast: {timeout: 0.5, batch_size: 4}\n")
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "2", "--no-cards")
    assert code == 0 and "timed out" not in err, err


def test_what_a_system_says_is_counted_once_per_system_not_printed(synthetic_study, cli, tmp_path):
    """Warnings and prints of a system's libraries: summarised on stderr after forecasting, kept in the run."""
    systems = '- {name: chatty, type: python, function: "planted.py:chatty"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(systems, draws=2, stride=40)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "2", "--no-cards")
    assert code == 0, err
    assert err.count("the model is unsure") == 1 and err.count("GPU available") == 1, err  # the summary only
    assert "first: GPU available: False" in err and "chatty: planted: " in err, err
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as db:
        counts = json.loads(db.execute("SELECT value FROM meta WHERE key = 'counts'").fetchone()[0])
    said = counts["systems"]["chatty"]["warnings"]
    forecasts = counts["systems"]["chatty"]["forecasts"]
    assert said["planted"] == [2 * forecasts, "UserWarning: the model is unsure"]
    assert said["output"][0] >= 1 and said["output"][1] == "GPU available: False"


def test_python_system_sample_paths_give_crps(synthetic_study, cli, tmp_path):
    """A python system returning [batch, samples, horizon]: median point forecast, paths stored, CRPS scored."""
    from causalrate.forecast.metrics import crps_samples

    study = synthetic_study(
        """\
        - {name: paths, type: python, function: "planted.py:sample_paths", accepts_nan: true}
        - {name: naive, type: naive}
        """
    )
    code, _, err = cli("assess", study, "--out", tmp_path / "run", "--no-cards")
    assert code == 0, err
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as conn:
        rows = conn.execute(
            "SELECT f.forecast, f.samples, f.m_crps, w.truth FROM forecasts f JOIN windows w USING (window) "
            "WHERE system = 'paths' AND perturbation = 'P0' LIMIT 5"
        ).fetchall()
        naive = conn.execute("SELECT samples, m_crps, m_mae FROM forecasts WHERE system = 'naive' LIMIT 5").fetchall()
    for forecast, blob, crps, truth in rows:
        paths = np.frombuffer(blob, dtype="<f8").reshape(8, -1)
        assert np.allclose(forecast_values(forecast), np.median(paths, axis=0))
        assert crps == pytest.approx(crps_samples(np.array(json.loads(truth)), paths).mean(), rel=1e-12)
    assert all(blob is None and crps == pytest.approx(mae) for blob, crps, mae in naive)
    scores = pd.read_csv(tmp_path / "run" / "scores.csv")
    assert set(scores[scores.score == "crps"]["system"]) == {"paths", "naive"}
    # its paths make it a distribution (it declares no quantiles): rated on WQL and coverage; naive's point is not
    for score in ("wql", "coverage_error"):
        rows = scores[(scores.score == score) & (scores.perturbation == "P0")].set_index("system")
        assert np.isfinite(rows.loc["paths", "raw"]) and pd.isna(rows.loc["paths", "note"]), score
        assert pd.isna(rows.loc["naive", "raw"]) and "no quantiles" in rows.loc["naive", "note"], score


def test_biased_needs_an_attribute_with_two_values():
    """`biased` plants an error gap between groups of series: on data whose attributes have one value each
    (one sensor) it would be naive × 1.1, rated as if it showed the bias rating working; refused (exit 2)."""
    from pathlib import Path
    from types import SimpleNamespace

    from causalrate.errors import UserError
    from causalrate.systems.reference import Biased, BiasedSettings

    one = SimpleNamespace(series=[SimpleNamespace(attributes={"dataset": "co2", "domain": "atmosphere"})])
    with pytest.raises(UserError, match=r"two or more values \(dataset, domain: one value each"):
        Biased.from_data(BiasedSettings(), one)
    two = SimpleNamespace(
        series=[SimpleNamespace(attributes={"site": "x", "region": r}) for r in ("north", "south", "north")]
    )
    assert Biased.from_data(BiasedSettings(), two) == {"attribute": "region", "value": "north"}
    system = Biased(BiasedSettings(attribute="site", value="x"), base_dir=Path("."))
    with pytest.raises(UserError, match="attribute 'site' has one value"):
        system.check(two)
