"""Every user mistake: a clear message naming file and field, exit code 2, no traceback."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import write_yaml

STUDY = """\
name: bad
data: {source: csv, path: prices.csv}
windows: {input_length: 10, horizon: 5, stride: 5}
systems:
  - {name: naive, type: naive}
"""


def wide_csv(path: Path, *, n: int = 60, **columns) -> None:
    dates = pd.bdate_range("2022-01-03", periods=n)
    rng = np.random.default_rng(0)
    data = {"date": dates, "AAA": 100 + np.cumsum(rng.normal(0, 1, n))}
    data.update(columns)
    pd.DataFrame(data).to_csv(path, index=False)


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        (("stride: 5", "stride: 0"), "windows.stride", "greater than 0"),
        (("horizon: 5", "horizon: -1"), "windows.horizon", "greater than 0"),
        (("horizon: 5", "horizon: five"), "windows.horizon", "valid integer"),
        (("name: bad", "name: bad\nrating: {levels: 1}"), "rating.levels", "greater than or equal to 2"),
        (("name: bad", "name: bad\nrating: {scores: [speed]}"), "rating.scores", "unknown score 'speed'"),
        (("name: bad", "name: bad\nsurprise: 1"), "surprise", "unknown key"),
        (("type: naive", "type: prophet"), "systems.0", "unknown system type 'prophet'"),
        (("type: naive}", "type: arima, order: [1, 1]}"), "systems.0", "order"),
        (("type: naive}", "type: naive, speed: 3}"), "systems.0", "speed: unknown key"),
        (
            ("name: bad", "name: bad\nperturbations: [{id: P0, operator: none}, {id: P1, operator: melt}]"),
            "perturbations",
            "unknown perturbation operator 'melt'",
        ),
        (("name: bad", "name: bad\noutcome: accuracy"), "outcome", "unknown outcome"),
        (("name: bad", "name: bad\ncausal: {schemes: [weather]}"), "causal.schemes", "unknown assignment scheme"),
    ],
)
def test_config_errors(tmp_path, cli, change, field, expected):
    config = write_yaml(tmp_path / "s.yaml", STUDY.replace(*change))
    code, _out, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    assert code == 2
    assert str(config) in err and field in err and expected in err, err
    assert "Traceback" not in err


def test_yaml_syntax_error_names_the_line(tmp_path, cli):
    config = write_yaml(tmp_path / "s.yaml", "name: x\nsystems: [\n  - a: b\n")
    code, _, err = cli("assess", config)
    assert code == 2 and "not valid YAML" in err and "line" in err


def test_missing_config_and_wrong_shape(tmp_path, cli):
    assert cli("assess", tmp_path / "none.yaml")[0] == 2
    both = write_yaml(tmp_path / "both.yaml", "model: {name: a, type: naive}\nsystems: []\n")
    code, _, err = cli("assess", both)
    assert code == 2 and "exactly one of" in err


@pytest.mark.parametrize(
    ("columns", "n", "expected"),
    [
        ({}, 12, "too short for one window"),
        ({"FLAT": 5.0}, 60, "constant"),
        ({"EMPTY": np.nan}, 60, "all values are missing"),
        ({"WORDS": ["x"] * 60}, 60, "non-numeric value 'x'"),
        ({"GAPPY": [1.0, np.nan] * 30}, 60, "missing or infinite values"),
    ],
)
def test_bad_series(tmp_path, cli, columns, n, expected):
    wide_csv(tmp_path / "prices.csv", n=n, **columns)
    config = write_yaml(tmp_path / "s.yaml", STUDY)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and expected in err and "prices.csv" in err, err


def test_duplicate_dates(tmp_path, cli):
    wide_csv(tmp_path / "prices.csv")
    frame = pd.read_csv(tmp_path / "prices.csv")
    pd.concat([frame, frame.iloc[[3]]]).to_csv(tmp_path / "prices.csv", index=False)
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", STUDY), "--out", tmp_path / "run")
    assert code == 2 and "duplicate dates" in err


def test_missing_file_and_unknown_series(tmp_path, cli):
    config = write_yaml(tmp_path / "s.yaml", STUDY)
    code, _, err = cli("assess", config)
    assert code == 2 and "no such file" in err
    wide_csv(tmp_path / "prices.csv")
    config = write_yaml(tmp_path / "s.yaml", STUDY.replace("path: prices.csv", "path: prices.csv, series: [ZZZ]"))
    code, _, err = cli("assess", config)
    assert code == 2 and "ZZZ" in err and "available" in err


def test_yfinance_offline_without_cache(tmp_path, cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "yfinance", None)  # not installed / unreachable
    config = write_yaml(
        tmp_path / "s.yaml",
        STUDY.replace(
            "{source: csv, path: prices.csv}", f"{{source: yfinance, series: [AAA], cache_dir: {tmp_path}/c}}"
        ),
    )
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    assert code == 2
    assert str(tmp_path / "c") in err and "data.source: csv" in err


def test_yfinance_uses_the_disk_cache(tmp_path, cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "yfinance", None)
    (tmp_path / "c").mkdir()
    wide_csv(tmp_path / "c" / "AAA_2022-01-01_2022-12-31.csv")
    frame = pd.read_csv(tmp_path / "c" / "AAA_2022-01-01_2022-12-31.csv").rename(columns={"date": "Date"})
    frame.to_csv(tmp_path / "c" / "AAA_2022-01-01_2022-12-31.csv", index=False)
    data = f"{{source: yfinance, series: [AAA], start: 2022-01-01, end: 2022-12-31, cache_dir: {tmp_path}/c}}"
    body = STUDY.replace("{source: csv, path: prices.csv}", data).replace("stride: 5", "stride: 20")
    body += "causal: {schemes: [uniform, level], draws: 2}\n"
    code, _out, err = cli(
        "assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--workers", "1", "--no-cards"
    )
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert doc["not_rated"]["wrs_industry"].startswith("the run has no 'industry' grouping")
    assert doc["provenance"]["data_source"].startswith("yfinance cache")


def test_biased_needs_its_group(tmp_path, cli):
    wide_csv(tmp_path / "prices.csv")
    body = STUDY.replace("type: naive}", "type: biased}") + "causal: {schemes: [uniform]}\n"
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body))
    assert code == 2 and "never has value 'Technology'" in err


def test_schemes_need_their_attribute(tmp_path, cli):
    wide_csv(tmp_path / "prices.csv")
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", STUDY))
    assert code == 2 and "needs attribute(s) ['industry']" in err


def test_existing_run_is_not_overwritten(tmp_path, cli):
    wide_csv(tmp_path / "prices.csv")
    body = STUDY + "causal: {schemes: [uniform], draws: 2}\n"
    config = write_yaml(tmp_path / "s.yaml", body)
    assert cli("assess", config, "--out", tmp_path / "run", "--workers", "1", "--no-cards")[0] == 0
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1", "--no-cards")
    assert code == 2 and "--overwrite" in err
    assert cli("assess", config, "--out", tmp_path / "run", "--workers", "1", "--overwrite", "--no-cards")[0] == 0


def test_systems_that_cannot_run_are_listed_never_skipped_silently(synthetic_study, cli, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    study = synthetic_study(
        """\
        - {name: naive, type: naive}
        - {name: window_min, type: python, function: "planted.py:window_min"}
        - {name: chronos, type: chronos, model: models/not-here}
        - {name: gemini, type: gemini, api_key_env: NO_SUCH_KEY}
        """
    )
    code, _, err = cli("assess", study, "--out", tmp_path / "run", "--no-cards")
    assert code == 2
    assert "2 system(s) cannot run here" in err and "- chronos:" in err and "- gemini:" in err
    assert "NO_SUCH_KEY is not set" in err and "--skip-unavailable" in err
    assert not (tmp_path / "run").exists()
    code, _, err = cli("assess", study, "--out", tmp_path / "run", "--skip-unavailable")
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert [s["name"] for s in doc["not_assessed"]] == ["chronos", "gemini"]
    assert {s["name"] for s in doc["systems"]} == {"naive", "window_min"}
    assert "## Not assessed" in (tmp_path / "run" / "report.md").read_text()
    assert "NO_SUCH_KEY" in (tmp_path / "run" / "cards" / "comparison.html").read_text()
    code, _, err = cli("rate", tmp_path / "run", "--levels", "2", "--no-cards")
    assert code == 0, err
    assert json.loads((tmp_path / "run" / "ratings.json").read_text())["not_assessed"] == doc["not_assessed"]
