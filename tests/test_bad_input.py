"""Every user mistake: a clear message naming file and field, exit code 2, no traceback."""

import json
import os
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
        (("prices.csv}", "prices.csv, series: [AAA, AAA]}"), "data.series", "repeated: ['AAA']"),
        (("prices.csv}", "prices.csv, series: []}"), "data.series", "leave data.series out to use every series"),
        (("name: bad", "name: bad\nrating: {scores: []}"), "rating.scores", "leave rating.scores out to rate every"),
        (("name: bad", "name: bad\ncausal: {high: 0.1, low: 0.9}"), "causal", "must be above causal.low (0.9)"),
        (
            ("name: bad", "name: bad\nrigor: {bootstrap_size: 20, replicates: 20}"),
            "rigor.replicates",
            "unknown key",
        ),
    ],
)
def test_config_errors(tmp_path, cli, change, field, expected):
    config = write_yaml(tmp_path / "s.yaml", STUDY.replace(*change))
    code, _out, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    assert code == 2
    assert str(config) in err and field in err and expected in err, err


def test_a_period_beyond_the_input_is_refused(tmp_path, cli):
    """One point per 20 of a 10-point input would perturb about half the windows, described as if all were."""
    wide_csv(tmp_path / "prices.csv")
    suite = "perturbations: [{id: P0, operator: none}, {id: P1, operator: halve, period: 20}]"
    config = write_yaml(tmp_path / "s.yaml", STUDY.replace("name: bad", f"name: bad\n{suite}"))
    code, _out, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    expected = "perturbations: P1: period 20 exceeds windows.input_length 10, so only about 10/20 of the windows"
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert "Traceback" not in err


def test_yaml_syntax_error_names_the_line(tmp_path, cli):
    config = write_yaml(tmp_path / "s.yaml", "name: x\nsystems: [\n  - a: b\n")
    code, _, err = cli("assess", config)
    assert code == 2 and "not valid YAML" in err and "line" in err


def test_a_config_in_utf16_is_read_and_one_in_another_encoding_is_named(tmp_path, cli):
    """Notepad's "Unicode" (UTF-16 with its mark) was 'cannot read the config ('utf-8' codec can't decode...)';
    YAML allows it. Latin-1 text or a binary file: exit 2 saying it is not UTF-8, on which line."""
    from causalrate.yamlio import read_yaml

    (tmp_path / "u16.yaml").write_bytes("name: caf\u00e9\nsystems: []\n".encode("utf-16"))
    assert read_yaml(tmp_path / "u16.yaml") == {"name": "caf\u00e9", "systems": []}
    (tmp_path / "l1.yaml").write_bytes("name: x\n# caf\u00e9\nsystems: []\n".encode("latin-1"))
    code, _, err = cli("assess", tmp_path / "l1.yaml")
    assert code == 2 and f"{tmp_path / 'l1.yaml'}: not UTF-8 text: byte 0xe9 on line 2" in err, err


def test_impossible_date_names_the_line(tmp_path, cli):
    config = write_yaml(tmp_path / "s.yaml", STUDY.replace("prices.csv}", "prices.csv, start: 2021-13-01}"))
    code, _, err = cli("assess", config)
    assert code == 2 and "line 2" in err and "'2021-13-01' is not a date" in err and "Traceback" not in err, err


def test_paths_of_the_wrong_kind_name_the_flag(finished_run, cli, tmp_path):
    """A folder for the config, a file for --out, a folder or a missing folder for export's --out."""
    config, run = finished_run
    code, _, err = cli("assess", tmp_path)
    assert code == 2 and "a folder; give the study or model YAML file" in err, err
    (tmp_path / "taken").write_text("x")
    code, _, err = cli("assess", config, "--out", tmp_path / "taken")
    assert code == 2 and "--out" in err and "a file is there" in err, err
    pytest.importorskip("pyarrow")
    code, _, err = cli("export", run, "--out", tmp_path)
    assert code == 2 and "--out" in err and "a folder; give the parquet file's path" in err, err
    code, _, err = cli("export", run, "--out", tmp_path / "new" / "rows.parquet")
    assert code == 0 and (tmp_path / "new" / "rows.parquet").is_file(), err


def test_missing_config_and_wrong_shape(tmp_path, cli):
    assert cli("assess", tmp_path / "none.yaml")[0] == 2
    both = write_yaml(tmp_path / "both.yaml", "model: {name: a, type: naive}\nsystems: []\n")
    code, _, err = cli("assess", both)
    assert code == 2 and "exactly one of" in err


@pytest.mark.parametrize(
    ("columns", "n", "expected"),
    [
        ({}, 12, "too short for one window"),
        ({"FLAT": 42.0}, 60, "the series is constant (42); nothing to forecast"),
        ({"EMPTY": np.nan}, 60, "all values are missing"),
        ({"WORDS": ["x"] * 60}, 60, "non-numeric value 'x'"),
        ({"FLAGS": [True, False] * 30}, 60, "non-numeric value True"),
        ({"GAPPY": [1.0, np.nan] * 30}, 60, "missing or infinite values"),
        ({"HUGE": [1e300, 2e300] * 30}, 60, "series 'HUGE': a value of 2e+300"),
    ],
)
def test_bad_series(tmp_path, cli, columns, n, expected):
    wide_csv(tmp_path / "prices.csv", n=n, **columns)
    config = write_yaml(tmp_path / "s.yaml", STUDY)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and expected in err and "prices.csv" in err, err
    assert "np.float64" not in err


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
    """cache_dir is relative to the YAML's folder (like every path in it), not to the working directory."""
    import sys

    monkeypatch.setitem(sys.modules, "yfinance", None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (tmp_path / "c").mkdir()
    wide_csv(tmp_path / "c" / "AAA_2022-01-01_2022-12-31.csv")
    frame = pd.read_csv(tmp_path / "c" / "AAA_2022-01-01_2022-12-31.csv").rename(columns={"date": "Date"})
    frame.to_csv(tmp_path / "c" / "AAA_2022-01-01_2022-12-31.csv", index=False)
    data = "{source: yfinance, series: [AAA], start: 2022-01-01, end: 2022-12-31, cache_dir: c}"
    body = STUDY.replace("{source: csv, path: prices.csv}", data).replace("stride: 5", "stride: 20")
    body += "causal: {schemes: [uniform, level], draws: 2}\n"
    code, _out, err = cli(
        "assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--workers", "1", "--no-cards"
    )
    assert code == 0, err
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert "wrs_industry" not in doc["not_rated"]  # one series, no industry attribute: not a score of this data
    assert doc["provenance"]["data_source"].startswith("yfinance cache")


def test_biased_needs_its_group(tmp_path, cli):
    wide_csv(tmp_path / "prices.csv")
    body = STUDY.replace("type: naive}", "type: biased}") + "causal: {schemes: [uniform]}\n"
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body))
    assert code == 2 and "system type biased: no attribute to target (the series have no attributes)" in err


def test_schemes_need_their_attribute(tmp_path, cli):
    """Listed schemes must fit the data (the default ones are those it can carry); the message lists the data's
    attributes, not the window table's own columns (level, start, series)."""
    wide_csv(tmp_path / "prices.csv")
    body = STUDY + "causal: {schemes: [uniform, industry]}\n"
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body))
    assert code == 2 and "needs attribute(s) ['industry']" in err
    assert "the series have no attributes" in err and "data.attribute_columns" in err
    assert "'level'" not in err and "'start'" not in err and "'series'" not in err


def test_dates_outside_the_data(tmp_path, cli):
    wide_csv(tmp_path / "prices.csv")
    body = STUDY.replace("path: prices.csv", "path: prices.csv, start: 2030-01-01, end: 2030-12-31")
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--no-cards")
    assert code == 2 and "no data between data.start 2030-01-01 and data.end 2030-12-31" in err, err
    assert "the data cover 2022-01-03 to 2022-03-25" in err and "missing (NaN)" not in err


def test_gemini_without_any_google_package_is_listed_not_a_crash(synthetic_study, cli, tmp_path, monkeypatch):
    import sys

    from causalrate.errors import UserError
    from causalrate.systems.checkpoints import require

    for name in [m for m in sys.modules if m.startswith("google.")]:  # as if never imported
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "google", None)  # and no `google` namespace package at all
    with pytest.raises(UserError, match=r"pip install 'causalrate\[gemini\]'"):
        require("google.genai", "gemini", system="gemini")
    monkeypatch.setenv("SOME_KEY", "k")
    study = synthetic_study("- {name: naive, type: naive}\n- {name: g, type: gemini, api_key_env: SOME_KEY}\n")
    code, _, err = cli("assess", study, "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "- g:" in err and "'google.genai'" in err and "Traceback" not in err, err


def two_systems(tmp_path: Path) -> Path:
    """A small study of two systems on two series."""
    wide_csv(tmp_path / "prices.csv", BBB=50 + np.arange(60.0) % 7)
    body = STUDY.replace("systems:", "causal: {schemes: [uniform], draws: 2}\nsystems:")
    body += "  - {name: random, type: random}\n"
    return write_yaml(tmp_path / "s.yaml", body)


@pytest.fixture
def finished_run(tmp_path, cli):
    config = two_systems(tmp_path)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1", "--no-cards")
    assert code == 0, err
    return config, tmp_path / "run"


def test_flag_mistakes_name_the_flag(finished_run, cli, tmp_path):
    config, run = finished_run
    code, _, err = cli("rate", run, "--levels", "0", "--no-cards")
    assert code == 2 and "--levels: input should be greater than or equal to 2, got 0" in err, err
    assert "rating.levels" not in err
    code, _, err = cli("study", "export", run, "--out", tmp_path / "kit", "--per-question", "10")
    assert code == 2 and "--per-question: from 2 to 2" in err and "--questions" not in err, err
    code, _, err = cli("study", "export", run, "--out", tmp_path / "kit", "--participants", "0")
    assert code == 2 and "--participants" in err and "at least 1, got 0" in err, err
    code, _, err = cli("assess", config, "--resume", run, "--out", tmp_path / "other")
    assert code == 2 and "--out" in err and "resumed in place" in err, err
    assert not (tmp_path / "other").exists()


def test_workers_beyond_the_machine_and_an_address_without_ray_are_refused(tmp_path, cli):
    """--workers 100000 started a process per waiting batch (a warm-up: all of them); exit 2 at once, before the
    data is read, naming the bound. --address without --executor ray was ignored: the run went local, unsaid."""
    import os

    from causalrate.forecast.runner import WORKERS_PER_CORE, check_workers

    wide_csv(tmp_path / "prices.csv")
    config = write_yaml(tmp_path / "s.yaml", STUDY)
    bound = WORKERS_PER_CORE * (os.cpu_count() or 1)
    for executor in ("local", "ray"):
        code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "100000", "--executor", executor)
        assert code == 2 and f"--workers 100000: at most {bound} on this machine" in err, err
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "0")
    assert code == 2 and "--workers 0: must be at least 1" in err, err
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--address", "10.0.0.9:6379")
    assert code == 2 and "--address 10.0.0.9:6379: a Ray cluster's address; add --executor ray" in err, err
    assert not (tmp_path / "run").exists()
    check_workers(bound, address=None)  # the bound itself is allowed
    check_workers(100000, address="10.0.0.9:6379")  # a cluster decides how to run what is submitted


def test_a_full_disk_is_exit_2_naming_the_folder_and_how_to_resume(tmp_path, cli, monkeypatch):
    """SQLite's 'database or disk is full' (a 200 kB tmpfs as --out) was a traceback, exit 1, for assess and rate."""
    import sqlite3

    from causalrate.forecast.store import ForecastStore

    wide_csv(tmp_path / "prices.csv")
    config = write_yaml(tmp_path / "s.yaml", STUDY)

    def full(self, rows):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(ForecastStore, "_write", full)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards", "--workers", "1")
    assert code == 2 and "Traceback" not in err, err
    assert f"{tmp_path / 'run'}: cannot write its database (database or disk is full); free space there" in err
    assert f"causalrate assess {config} --resume {tmp_path / 'run'}" in err


def test_a_half_written_or_hand_edited_run_says_what_it_lacks(finished_run, cli, tmp_path):
    """A run whose assess stopped before ratings.json: card said 'not a causalrate run directory'; a store
    without its config: rate said 'invalid config (top level): ... got None'."""
    import shutil
    import sqlite3

    _, run = finished_run
    stopped = shutil.copytree(run, tmp_path / "stopped")
    (stopped / "ratings.json").unlink()
    code, _, err = cli("card", stopped, "--format", "md")
    assert code == 2 and f"{stopped}: no ratings.json beside its forecasts.sqlite: the run's assess did not" in err
    assert f"causalrate assess CONFIG --resume {stopped}" in err and f"causalrate rate {stopped}" in err, err
    edited = shutil.copytree(run, tmp_path / "edited")
    with sqlite3.connect(edited / "forecasts.sqlite") as db:
        db.execute("DELETE FROM meta WHERE key = 'config'")
    code, _, err = cli("rate", edited, "--no-cards")
    assert code == 2 and "forecasts.sqlite: holds no study config (meta 'config')" in err, err


def test_export_of_an_unfinished_run_warns(finished_run, cli, tmp_path):
    import sqlite3

    pytest.importorskip("pyarrow")
    _, run = finished_run
    with sqlite3.connect(run / "forecasts.sqlite") as conn:  # as a run killed while forecasting leaves it
        conn.execute("UPDATE meta SET value = ? WHERE key = 'status'", (json.dumps("forecasting"),))
    code, out, err = cli("export", run, "--out", tmp_path / "rows.parquet")
    assert code == 0 and "warning" in err and "unfinished" in err and "--resume" in err, err
    assert "warning" not in out and (tmp_path / "rows.parquet").is_file()


def test_missing_chromium_is_a_warning_on_stderr(finished_run, cli, monkeypatch, tmp_path):
    _, run = finished_run
    monkeypatch.setenv("CAUSALRATE_CHROMIUM", str(tmp_path / "no-chromium"))
    code, out, err = cli("rate", run)
    assert code == 0 and "cards need Chromium" in err and "Chromium" not in out, (out, err)
    assert "nan" not in (run / "report.md").read_text()


def test_listings_are_aligned_plain_text(cli):
    """`systems` and `perturbations`: descriptions in one column, no reStructuredText, no raw placeholders."""
    for command in ("systems", "perturbations"):
        code, out, _ = cli(command)
        lines = out.splitlines()
        assert code == 0 and len(lines) > 5
        columns = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines}
        assert len(columns) == 1, f"{command}: descriptions start at columns {columns}"
        assert "``" not in out
    out = cli("perturbations")[1]
    assert "spike" in out and "multiplied by <factor>" in out and "{factor" not in out


def test_rate_without_causalml_skips_the_map_as_assess_did(tmp_path, cli, monkeypatch):
    """A partial install without causalml: `assess` and `rate` both rate everything else, say on stderr what
    was skipped and the one command that adds it; a failed `rate --out` leaves nothing behind."""
    config = two_systems(tmp_path)
    monkeypatch.setitem(__import__("sys").modules, "causalml", None)  # find_spec → None, import → ImportError
    run = tmp_path / "run"
    code, _, err = cli("assess", config, "--out", run, "--workers", "1", "--no-cards")
    assert code == 0 and "no fragility map: causalml is not installed" in err and "pip install causalml" in err, err
    not_rated = json.loads((run / "ratings.json").read_text())["not_rated"]
    assert "pip install causalml" in not_rated["fragility_spread"], not_rated
    code, _, err = cli("rate", run, "--levels", "5", "--no-cards")
    assert code == 0 and "no fragility map" in err and "Traceback" not in err, err
    import causalrate.rerate

    def fails(*args, **kwargs):
        raise causalrate.errors.UserError("planted")

    monkeypatch.setattr(causalrate.rerate, "analyze", fails)  # after the store is copied into --out
    code, _, err = cli("rate", run, "--out", tmp_path / "other", "--no-cards")
    assert code == 2 and "planted" in err and not (tmp_path / "other").exists()
    (tmp_path / "file").write_text("x")
    code, _, err = cli("rate", run, "--out", tmp_path / "file", "--no-cards")
    assert code == 2 and "--out" in err and "a file is there" in err, err


def test_few_windows_warn_and_unreal_outputs_fail_their_rows(synthetic_study, cli, tmp_path):
    """Complex or text forecasts are failure rows with the reason, never cast; a small study is warned about."""
    systems = (
        '- {name: cplx, type: python, function: "planted.py:complex_out"}\n'
        '- {name: text, type: python, function: "planted.py:text_out"}\n- {name: naive, type: naive}\n'
    )
    config = synthetic_study(systems, draws=2, stride=40)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards", "--workers", "1")
    assert code == 3 and "Traceback" not in err, err
    assert "cplx: ValueError: the forecast must be real numbers (int or float), got complex128 values" in err, err
    assert "text: ValueError: the forecast must be real numbers" in err and "only 18 windows" in err, err


def test_kits_and_runs_the_user_keeps(finished_run, cli, tmp_path):
    """study export refuses to overwrite a kit without --overwrite (and a run without the bias ratings it needs);
    a run that stopped before its first forecast does not block a plain re-run, one with forecasts does."""
    import sqlite3

    config, run = finished_run
    code, _, err = cli("study", "export", run, "--out", tmp_path / "no-kit", "--questions", "2")
    assert code == 2 and "the kit's bias question needs a bias dimension, and the run rated no WRS score" in err, err
    from tests.conftest import make_synthetic_study

    (tmp_path / "syn").mkdir()
    systems = "- {name: naive, type: naive}\n- {name: random, type: random}\n"
    study = make_synthetic_study(tmp_path / "syn", systems, draws=2, stride=20)
    assert cli("assess", study, "--out", tmp_path / "industries", "--no-cards", "--workers", "1")[0] == 0
    kit = tmp_path / "kit"
    code, _, err = cli("study", "export", tmp_path / "industries", "--out", kit, "--questions", "2")
    assert code == 0, err
    (kit / "consent.md").write_text("our own consent text")
    code, _, err = cli("study", "export", tmp_path / "industries", "--out", kit, "--questions", "2", "--seed", "1")
    assert code == 2 and "--overwrite" in err and (kit / "consent.md").read_text() == "our own consent text", err
    assert cli("study", "export", tmp_path / "industries", "--out", kit, "--questions", "2", "--overwrite")[0] == 0
    assert (kit / "consent.md").read_text() != "our own consent text"

    with sqlite3.connect(run / "forecasts.sqlite") as db:  # as a run that died before any batch finished
        db.execute("UPDATE meta SET value = ? WHERE key = 'status'", (json.dumps("forecasting"),))
        kept = db.execute("SELECT count(*) FROM forecasts").fetchone()[0]
    code, _, err = cli("assess", config, "--out", run, "--workers", "1", "--no-cards")
    assert kept and code == 2 and f"resume it with --resume {run}" in err, err
    with sqlite3.connect(run / "forecasts.sqlite") as db:
        db.execute("DELETE FROM forecasts")
    code, _, err = cli("assess", config, "--out", run, "--workers", "1", "--no-cards")
    assert code == 0, err


def test_stimuli_name_each_system_and_draw_without_warnings(monkeypatch):
    import warnings

    from causalrate.userstudy import stimuli

    figures = []
    monkeypatch.setattr(stimuli.mpl, "png", lambda fig: figures.append(fig) or b"")
    clean = np.linspace(100, 120, 40)
    perturbed = clean.copy()
    perturbed[30] = 0.0
    panels = {label: ([1.0] * 5, [2.0] * 5) for label in "ABC"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stimuli.question_figure(
            clean=clean, perturbed=perturbed, truth=np.full(5, 121.0), panels=panels,
            group_errors={"industry": {label: {"Tech": 1.0} for label in "ABC"}}, title="Q01", outcome="rmax",
            rankings={"robustness_rank": {"A": 1, "B": 2, "C": 3}, "bias_rank": {"A": 1, "B": 1, "C": 2}}, step="day",
        )  # fmt: skip
        figures[0].canvas.draw()
    assert [w.message for w in caught] == []
    titles = [ax.get_title() for ax in figures[0].axes if ax.get_title().startswith("System")]
    assert titles == ["System A", "System B", "System C"]
    assert all(ax.get_legend() is None for ax in figures[0].axes if ax.get_title().startswith("System"))


def test_rigor_replicates_is_read_as_the_older_name_of_bootstrap_size(tmp_path):
    """Studies written before the rename still run: `rigor.replicates` sets rigor.bootstrap_size."""
    from causalrate.config import load_config

    config = write_yaml(tmp_path / "s.yaml", STUDY + "rigor: {replicates: 30}\n")
    assert load_config(config)[0].rigor.bootstrap_size == 30


# --- issue 42: each case of the sweep a clear answer -------------------------------------------------------


@pytest.mark.parametrize("where", ["plugin", "model file"])
def test_sys_exit_at_import_is_exit_2_naming_the_file(tmp_path, cli, where):
    """sys.exit(0) in a plugin or a python system's file ended the run with exit 0 and nothing written."""
    wide_csv(tmp_path / "prices.csv")
    (tmp_path / "mine.py").write_text(
        "import sys\nsys.exit(0)\ndef f(inputs, horizon):\n    return inputs[:, -horizon:]\n"
    )
    body = STUDY.replace("name: bad", "name: bad\nplugins: [mine.py]") if where == "plugin" else STUDY
    if where == "model file":
        body += '  - {name: mine, type: python, function: "mine.py:f"}\n'
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "mine.py" in err and "SystemExit" in err and "Traceback" not in err, err


def test_quantile_levels_out_of_order_are_refused(tmp_path, cli):
    """[0.9, 0.5, 0.1] was read as if sorted: the grid's rows scored against the wrong levels (CRPS 13.4 vs 2.7)."""
    wide_csv(tmp_path / "prices.csv")
    (tmp_path / "q.py").write_text(
        "import numpy as np\ndef f(inputs, horizon):\n    return np.zeros((len(inputs), 3, horizon))\n"
    )
    body = STUDY + '  - {name: q, type: python, function: "q.py:f", quantiles: [0.9, 0.5, 0.1]}\n'
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "ascending order" in err and "[0.1, 0.5, 0.9]" in err and "Traceback" not in err, err


def test_a_key_given_twice_is_refused_at_its_line(tmp_path, cli):
    config = write_yaml(tmp_path / "s.yaml", STUDY.replace("name: bad", "name: bad\nseed: 1\nseed: 2"))
    code, _, err = cli("assess", config)
    assert code == 2 and "'seed' is given twice" in err and "line 3" in err, err


def test_an_alias_bomb_is_refused_at_once_with_a_short_message(tmp_path, cli):
    """413 bytes of nested aliases took 19-57 s and 3.2 GB and printed a 1 GB message."""
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 9):
        lines.append(f"{chr(97 + k)}: &{chr(97 + k)} [" + ", ".join([f"*{chr(96 + k)}"] * 9) + "]")
    config = write_yaml(tmp_path / "s.yaml", STUDY + "\n".join(lines) + "\n")
    code, _, err = cli("assess", config)
    assert code == 2 and "expand to more than 100000 values" in err and len(err) < 2000, err[:3000]


def test_a_huge_config_is_refused(tmp_path, cli):
    config = write_yaml(tmp_path / "s.yaml", STUDY + "#" + "x" * 1_100_000 + "\n")
    code, _, err = cli("assess", config)
    assert code == 2 and "a config is at most" in err, err[:3000]


def test_export_of_a_run_with_failure_rows_and_an_unwritable_out(tmp_path, cli):
    """export ended in a TypeError on any run with a failure row; --out /proc/x.parquet in an OSError."""
    wide_csv(tmp_path / "prices.csv")
    (tmp_path / "planted.py").write_text((Path(__file__).parent / "planted.py").read_text())
    body = STUDY.replace("systems:", "causal: {schemes: [uniform], draws: 2}\nsystems:")
    body += '  - {name: broken, type: python, function: "planted.py:always_fails"}\n'
    config = write_yaml(tmp_path / "s.yaml", body)
    run = tmp_path / "run"
    code, _, err = cli("assess", config, "--out", run, "--workers", "1", "--no-cards", "--allow-failed-systems")
    assert code == 0, err
    code, _, err = cli("export", run)
    assert code == 0, err
    rows = pd.read_parquet(run / "forecasts.parquet")
    broken = rows[rows["system"] == "broken"]
    assert len(broken) and broken["forecast"].isna().all() and broken["error"].notna().all()
    code, _, err = cli("export", run, "--out", "/proc/x.parquet")
    assert code == 2 and "/proc/x.parquet" in err and "Traceback" not in err, err


def test_a_second_writer_of_one_run_folder_is_refused(tmp_path, cli):
    """Two assess into one --out at the same instant both ran and left ratings.json without its forecasts."""
    from causalrate.pipeline import writer_lock

    config = two_systems(tmp_path)
    with writer_lock(tmp_path / "run"):  # as the first assess holds it while it runs
        code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1", "--no-cards")
    assert code == 2 and "another causalrate assess is writing this run folder" in err, err
    assert not (tmp_path / "run" / "forecasts.sqlite").exists()


def test_a_repeated_csv_header_is_refused(tmp_path, cli):
    """pandas renames the second `AAA` to `AAA.1`: a series (or an attribute) silently lost or renamed."""
    wide_csv(tmp_path / "prices.csv", BBB=np.arange(60.0) % 7 + 50)
    text = (tmp_path / "prices.csv").read_text().replace("date,AAA,BBB", "date,AAA,AAA", 1)
    (tmp_path / "prices.csv").write_text(text)
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", STUDY), "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "repeats column(s) ['AAA']" in err and "prices.csv" in err, err


def test_attributes_of_a_series_not_in_the_data_are_refused(tmp_path, cli):
    wide_csv(tmp_path / "prices.csv")
    body = STUDY.replace("prices.csv}", "prices.csv, attributes: {AAB: {industry: X}}}")
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "data.attributes names series ['AAB'] not in the data" in err, err


def test_a_model_named_like_a_reference_system_is_refused(tmp_path, cli):
    config = write_yaml(tmp_path / "m.yaml", "model: {name: naive, type: arima}\n")
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "'naive' is the name of a reference system" in err, err


def test_an_outcome_metric_that_is_never_finite_is_refused_before_forecasting(tmp_path, cli, monkeypatch):
    """An all-NaN plugin metric as the outcome was rated (every effect NaN, every system tied)."""
    from causalrate.forecast.metrics import METRICS

    monkeypatch.setattr(METRICS, "_entries", dict(METRICS._entries))  # the plugin's metric leaves with the test
    wide_csv(tmp_path / "prices.csv")
    (tmp_path / "nan_metric.py").write_text(
        "import numpy as np\nfrom causalrate.forecast.metrics import metric\n\n"
        "@metric('nan_everywhere', 'never a number')\n"
        "def nan_everywhere(truth, forecast, clean_input):\n    return np.full(len(truth), np.nan)\n"
    )
    body = STUDY.replace("name: bad", "name: bad\nplugins: [nan_metric.py]\noutcome: nan_everywhere")
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "metric 'nan_everywhere'" in err and "no finite value" in err, err
    assert not (tmp_path / "run" / "forecasts.sqlite").exists()


def test_card_without_chromium_writes_what_it_can_and_says_what_it_could_not(finished_run, cli, monkeypatch):
    """`card RUN` without Chromium exited 2 and wrote nothing unless --format dropped png and pdf."""
    import causalrate.report.render as render

    monkeypatch.setattr(render, "browser_problem", lambda: "no Chromium here (test)")
    _, run = finished_run
    code, _, err = cli("card", run)
    assert code == 0 and "no Chromium here (test)" in err and "wrote the other formats" in err, err
    assert list((run / "cards").glob("*.html")) and not list((run / "cards").glob("*.png"))
    code, _, err = cli("card", run, "--format", "html,png")
    assert code == 2 and "no png" in err and "Traceback" not in err, err


# --- issue 42, the fresh sweep (cases it found) -----------------------------------------------------------


def test_an_out_folder_that_cannot_be_made_names_it(tmp_path, cli):
    """--out under /proc (or any folder the OS will not make) ended in a FileNotFoundError traceback."""
    wide_csv(tmp_path / "prices.csv")
    config = write_yaml(tmp_path / "s.yaml", STUDY)
    code, _, err = cli("assess", config, "--out", "/proc/nope/run", "--no-cards")
    assert code == 2 and "/proc/nope" in err and "cannot read or write it" in err and "Traceback" not in err, err


@pytest.mark.parametrize("where", ["a file on its path", "read-only to root", "read-only to its user"])
def test_an_out_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path, cli, monkeypatch, where):
    """A file on --out's path, or a folder the OS refuses a new file in, was found by the writer's lock after the
    data was read, the systems built and the plugins checked (minutes for a large model): now at once, before any
    of it, naming the folder; nothing is left behind. As root, chmod 555 stops no write: sysfs refuses root too."""
    wide_csv(tmp_path / "prices.csv")
    config = write_yaml(tmp_path / "s.yaml", STUDY)
    (tmp_path / "taken").write_text("x")
    root = os.geteuid() == 0
    if where == "a file on its path":
        out, said = tmp_path / "taken" / "run", f"{tmp_path / 'taken'} is a file, not a folder"
    elif where == "read-only to root":
        if not Path("/sys/kernel").is_dir():
            pytest.skip("no sysfs here")
        out, said = Path("/sys/causalrate-run"), "cannot read or write it: no file can be made in /sys ("
    else:
        if root:
            pytest.skip("root writes into a folder of mode 555")
        (tmp_path / "locked").mkdir(mode=0o555)
        out, said = tmp_path / "locked", f"cannot read or write it: no file can be made in {tmp_path / 'locked'} ("

    def prepared(*_, **__):
        raise AssertionError("the study was prepared")

    monkeypatch.setattr("causalrate.pipeline.prepare", prepared)
    code, _, err = cli("assess", config, "--out", out, "--no-cards")
    assert code == 2 and f"--out {out}: {said}" in err and "Traceback" not in err, err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        ("{type: http, url: 'https://Zq9tok3nSECRETx1@example.org/f'}", "user info before '@'"),
        ("{type: http, url: 'https://example.org/f#access_token=Zq9tok3nSECRETx1'}", "fragment parameter"),
        ("{type: http, url: 'https://example.org/f;jsessionid=Zq9tok3nSECRETx1'}", "path parameter 'jsessionid'"),
        ("{type: http, url: 'https://example.org/api/f?code=Zq9tok3nSECRETx1'}", "query parameter 'code'"),
        ("{type: gemini, base_url: 'https://proxy.example.org/?key=Zq9tok3nSECRETx1'}", "query parameter 'key'"),
    ],
)
def test_a_credential_in_any_part_of_a_url_is_refused_unprinted(tmp_path, cli, system, expected):
    """A URL is written to ratings.json and the report: a token as user info, in the fragment, a path parameter,
    Azure's ?code= or a Gemini proxy's base_url was accepted and published (only ?api_key= and user:pass were
    refused). The refusal names the field and never prints the value."""
    wide_csv(tmp_path / "prices.csv")
    config = write_yaml(tmp_path / "s.yaml", STUDY + f"  - {{name: served, {system[1:]}\n")
    code, out, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    instead = "api_key_env" if "gemini" in system else "headers_env"
    assert code == 2 and "systems.1" in err and expected in err and instead in err, err
    assert "Zq9tok3nSECRETx1" not in out + err and not (tmp_path / "run" / "forecasts.sqlite").exists()


def test_an_unrelated_parameter_named_like_a_code_is_not_a_credential():
    from causalrate.redact import secrets_in_url

    assert secrets_in_url("https://example.org/f?country_code=US&model=v2") == []


def test_recency_without_a_window_corrupted_near_its_end_is_undefined_not_a_failure(tmp_path, cli):
    """A suite that never corrupts a point among the last inputs (here: always the oldest; a small study's random
    placement can do the same): every system's recency row read "insufficient … rated worst" with 0 failed
    forecasts. It is undefined (a note saying why, "—")."""
    wide_csv(tmp_path / "prices.csv")
    suite = "perturbations: [{id: P0, operator: none}, {id: P1, operator: drop_to_zero, placement: offset, offset: 0}]"
    body = STUDY.replace("name: bad", f"name: bad\n{suite}")
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--no-cards")
    assert code == 0, err
    ratings = json.loads((tmp_path / "run" / "ratings.json").read_text())["ratings"]
    rows = [r for r in ratings if r["score"] == "recency"]
    undefined = [r for r in rows if r["raw"] is None]
    assert undefined, "the planted study has a perturbation with no window corrupted near its end"
    for r in undefined:
        assert not r["insufficient"] and r["note"].startswith("undefined: no window has the corrupted point"), r


@pytest.mark.parametrize(("seed", "where"), [("-5", "yaml"), (str(2**32), "yaml"), ("-1", "flag"), ("2" * 30, "flag")])
def test_a_seed_numpy_cannot_take_is_exit_2_naming_it(tmp_path, cli, seed, where):
    """A negative seed or one of 2**32 or more ended in numpy's ValueError traceback (after reading the data)."""
    wide_csv(tmp_path / "prices.csv")
    body = STUDY.replace("name: bad", f"name: bad\nseed: {seed}") if where == "yaml" else STUDY
    flags = ("--seed", seed) if where == "flag" else ()
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), *flags, "--out", tmp_path / "run")
    expected = "seed: Input should be" if where == "yaml" else "--seed: expected 0 to 4294967295"
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_a_config_nested_thousands_deep_is_refused_at_its_line(tmp_path, cli):
    """5,000 nested brackets were a RecursionError traceback."""
    config = write_yaml(tmp_path / "s.yaml", "name: " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = cli("assess", config)
    assert code == 2 and "nested more than 50 levels deep" in err and "line 1" in err and "Traceback" not in err, err


def test_a_forecast_beyond_the_data_bound_is_a_failure_row_not_an_overflow(tmp_path, cli):
    """A model answering 1e308 (finite) overflowed its squared errors: MASE and CRPS NaN rows read "insufficient"
    with 0 failed forecasts and numpy's overflow warnings on stderr. It is a failure row with the reason now."""
    wide_csv(tmp_path / "prices.csv")
    (tmp_path / "m.py").write_text(
        "import numpy as np\ndef f(inputs, horizon):\n    return np.full((len(inputs), horizon), 1e308)\n"
    )
    body = STUDY + '  - {name: huge, type: python, function: "m.py:f"}\n'
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--no-cards")
    assert code == 3 and "huge: ValueError" not in err and "a value beyond ±1e+150" in err, err
    assert "RuntimeWarning" not in err and "overflow" not in err, err


def test_a_date_that_is_no_date_is_named_with_its_row(tmp_path, cli):
    """pandas' message advised passing `format='mixed'` (an argument of its own the user cannot pass) and named
    no value; now the value and its row."""
    wide_csv(tmp_path / "prices.csv")
    text = (tmp_path / "prices.csv").read_text().replace("2022-02-01", "2022-02-31", 1)
    (tmp_path / "prices.csv").write_text(text)
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", STUDY), "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "'2022-02-31' (row 23) is not a date" in err and "format=" not in err, err


# --- sweep 2: executors ------------------------------------------------------------------------------------


def test_a_system_killing_its_worker_fails_only_its_own_rows(tmp_path, cli):
    """A python system calling os._exit took the worker down before its queue had sent the batch it had just
    finished, another system's: that batch was blamed for the crash, retried beside it and failed — naive's 54
    rows read "worker crashed", rated worst. Answers are now written before the next batch starts."""
    import sqlite3

    wide_csv(tmp_path / "prices.csv")
    (tmp_path / "m.py").write_text("import os\ndef f(inputs, horizon):\n    os._exit(3)\n")
    body = STUDY.replace("systems:", "causal: {schemes: [uniform], draws: 2}\nsystems:")
    body += '  - {name: dies, type: python, function: "m.py:f"}\n'
    config = write_yaml(tmp_path / "s.yaml", body)
    code, _, err = cli(
        "assess", config, "--out", tmp_path / "run", "--workers", "1", "--no-cards", "--allow-failed-systems"
    )
    assert code == 0, err
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as db:
        query = "SELECT system, group_concat(DISTINCT coalesce(error, 'ok')) FROM forecasts GROUP BY 1"
        errors = dict(db.execute(query))
    assert errors["naive"] == "ok" and errors["dies"].startswith("worker crashed (exit code 3)"), errors


def test_a_process_a_system_forks_does_not_outlive_the_run(tmp_path, cli):
    """A system that forked left its child running after the run (re-parented to init)."""
    wide_csv(tmp_path / "prices.csv")
    pids = tmp_path / "pids"
    (tmp_path / "m.py").write_text(
        "import os, time\n"
        "def f(inputs, horizon):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        time.sleep(600)\n"
        "        os._exit(0)\n"
        f"    with open({str(pids)!r}, 'a') as out:\n"
        "        out.write(f'{pid}\\n')\n"
        "    return inputs[:, -horizon:]\n"
    )
    body = STUDY + '  - {name: forks, type: python, function: "m.py:f"}\n'
    config = write_yaml(tmp_path / "s.yaml", body)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--workers", "1", "--no-cards")
    assert code == 0, err
    for pid in map(int, pids.read_text().split()):
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "\nState:\tZ" in status.read_text(), f"process {pid} still runs"


@pytest.mark.parametrize("value", [".inf", ".nan"])
def test_an_infinite_or_nan_setting_is_refused(tmp_path, cli, value):
    """forecast.timeout: .inf passed `gt=0` and ended in a pydantic traceback when the parameters were written."""
    config = write_yaml(tmp_path / "s.yaml", STUDY.replace("name: bad", f"name: bad\nforecast: {{timeout: {value}}}"))
    code, _, err = cli("assess", config)
    assert code == 2 and "forecast.timeout" in err and "finite number" in err and "Traceback" not in err, err


def test_a_huge_timeout_is_no_limit():
    """forecast.timeout: 1e12 made every forecast fail ("OverflowError: timestamp out of range for platform
    time_t": the interval timer cannot hold it), naive's included, and exit 3 blaming the systems."""
    from causalrate.forecast.worker import time_limit

    with time_limit(1e12):
        assert sum(range(10)) == 45


# --- sweep 2: duration faults ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [  # each was exit 2 blaming the built-in operator as a broken plugin, or rated a system on NaN or inf inputs
        ("{id: F, operator: stuck, params: {k: 500}}", "F: k 500 points is not below windows.input_length 10"),
        ("{id: F, operator: gap, params: {k: 10}}", "a duration fault lasts at most 9 points"),
        ("{id: F, operator: gap, grid: {k: [1, 50]}}", "F@50: k 50 points is not below windows.input_length 10"),
        ("{id: F, operator: clip, params: {q: 1.5}}", "F: q 1.5 is outside (0, 1]"),
        ("{id: F, operator: offset, params: {c: .inf}}", "F: settings must be finite numbers, got {'c': inf}"),
        ("{id: F, operator: gain, params: {c: .nan}}", "F: settings must be finite numbers, got {'c': nan}"),
        ("{id: F, operator: spike, params: {factor: .nan}}", "F: settings must be finite numbers"),
        ("{id: F, operator: drift, params: {k: 3}, grid: {c: [1, .inf]}}", "F@inf: settings must be finite"),
    ],
)
def test_a_fault_setting_out_of_range_is_refused_naming_the_entry(tmp_path, cli, entry, expected):
    wide_csv(tmp_path / "prices.csv")
    body = STUDY.replace("name: bad", f"name: bad\nperturbations: [{{id: P0, operator: none}}, {entry}]")
    code, _, err = cli("assess", write_yaml(tmp_path / "s.yaml", body), "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and expected in err and "Traceback" not in err and "plugin" not in err, err
