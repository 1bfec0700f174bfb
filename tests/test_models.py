"""Foundation-model, LLM and endpoint systems, end to end, offline.

One study runs every adapter in both modalities on tiny checkpoints saved to disk (loaded by
the same from_pretrained calls as real ones) and on local fake servers for Gemini and HTTP.
All series share one date span and each holds one window, so every prompt asks for the same
timestamps and a tiny chat model trained for seconds can answer in the right format.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("chronos")
pytest.importorskip("google.genai")

from causalrate.cli import main
from causalrate.forecast.encoding import forecast_values
from causalrate.systems.llm import numeric_prompt, plot_prompt
from causalrate.systems.plot import render_window
from tests import tiny_models
from tests.conftest import managed_python
from tests.fake_servers import FakeServer, gemini_answer, http_answer
from tests.test_runs import made

INPUT, HORIZON = 12, 3
KEY = "AIzaTEST-do-not-leak-4242"
SCRIPT = ["429", "500", "slow", "malformed"]  # then every request is answered well


def write_data(folder: Path, *, series: int = 30) -> tuple[Path, np.ndarray, np.ndarray]:
    """`series` series in three industries, one window each (the same dates for all)."""
    rng = np.random.default_rng(5)
    dates = pd.bdate_range("2024-01-02", periods=INPUT + HORIZON)
    rows = []
    for i in range(series):
        industry = ["Alpha", "Beta", "Gamma"][i % 3]
        level = {"Alpha": 100.0, "Beta": 50.0, "Gamma": 20.0}[industry]
        values = level * np.exp(np.cumsum(rng.normal(0, 0.01, dates.size)))
        rows.append(pd.DataFrame({"date": dates, "series": f"S{i:02d}", "value": values, "industry": industry}))
    frame = pd.concat(rows)
    frame["company"] = frame["series"]
    frame.to_csv(folder / "prices.csv", index=False)
    day = np.array(dates.values, dtype="datetime64[D]")
    return folder / "prices.csv", day[:INPUT], day[INPUT:]


STUDY = """\
name: models
seed: 11
data: {{source: csv, path: prices.csv, layout: long, attribute_columns: [industry, company]}}
windows: {{input_length: {input}, horizon: {horizon}, stride: 1}}
perturbations:
  - {{id: P0, operator: none}}
  - {{id: P1, operator: drop_to_zero, period: 12, phase: 6}}
  - {{id: P3, operator: missing, period: 12, phase: 6}}
outcome: rmax_scaled
causal: {{draws: 3, schemes: [uniform, industry]}}
rigor: {{bootstrap_size: 20, refute: false}}
forecast: {{batch_size: 8, timeout: 120}}
systems:
  - {{name: naive, type: naive}}
  - {{name: chronos, type: chronos, model: ckpt/chronos, num_samples: 6}}
  - {{name: chronos-bolt, type: chronos, model: ckpt/bolt}}
{moment}  - {{name: phi3, type: phi3, model: ckpt/phi3, max_new_tokens: 60, parse_retries: 0}}
  - {{name: phi3-untrained, type: phi3, model: ckpt/phi3-untrained, max_new_tokens: 20, parse_retries: 1}}
  - {{name: phi3-vision, type: phi3-vision, model: ckpt/vlm, max_new_tokens: 60, parse_retries: 0}}
  - {{name: gemini, type: gemini, base_url: "{url}", api_key_env: TEST_GEMINI_KEY, timeout: 1, backoff: 0}}
  - {{name: gemini-vision, type: gemini-vision, base_url: "{url}", api_key_env: TEST_GEMINI_KEY,
     timeout: 1, backoff: 0}}
  - {{name: served, type: http, url: "{served}/forecast", headers_env: {{Authorization: TEST_HTTP_TOKEN}}, backoff: 0}}
"""


MOMENT = "  - {name: moment, type: moment, model: ckpt/moment, head: ckpt/moment-head.safetensors, seq_len: 64}\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    _, input_dates, targets = write_data(folder, series=12)
    ckpt = folder / "ckpt"
    tiny_models.build_chronos(ckpt / "chronos")
    tiny_models.build_chronos_bolt(ckpt / "bolt")
    moment = managed_python("moment")  # MOMENT runs in its own environment, when it is built
    if moment is not None:
        tiny_models.build_moment_in(moment, ckpt / "moment", horizon=HORIZON)
    rng = np.random.default_rng(0)
    samples = [rng.uniform(10, 200) * np.exp(np.cumsum(rng.normal(0, 0.01, INPUT))) for _ in range(40)]
    for i in range(0, 39, 3):  # some prompts see a drop to zero, some a missing value
        samples[i][6] = 0.0
        samples[i + 1][6] = np.nan
    answer = tiny_models.constant_answer(targets, 101.5)
    context = "The series holds daily values of one stock's closing price."
    tiny_models.build_chat_models(
        ckpt,
        prompts=[numeric_prompt(v, input_dates, targets, context=context) for v in samples],
        vision_prompts=[plot_prompt(input_dates, targets, context=context)] * len(samples),
        images=[render_window(v, input_dates) for v in samples],
        answer=answer,
    )
    env = {"TEST_GEMINI_KEY": KEY, "TEST_HTTP_TOKEN": "Bearer http-secret-777"}
    mp = pytest.MonkeyPatch()
    for k, v in env.items():
        mp.setenv(k, v)
    mp.setenv("CAUSALRATE_CACHE_DIR", str(folder / "cache"))
    with FakeServer(gemini_answer, script=SCRIPT) as gemini, FakeServer(http_answer) as served:
        study = folder / "study.yaml"
        study.write_text(
            STUDY.format(
                input=INPUT,
                horizon=HORIZON,
                url=gemini.url,
                served=served.url,
                moment=MOMENT if moment is not None else "",
            )
        )
        code = main(["assess", str(study), "--out", str(folder / "run"), "--workers", "2", "--no-cards"])
        yield {
            "code": code,
            "folder": folder,
            "gemini": gemini,
            "served": served,
            "targets": targets,
            "moment": moment is not None,
        }
    mp.undo()


def rows(run) -> pd.DataFrame:
    with sqlite3.connect(run["folder"] / "run" / "forecasts.sqlite") as conn:
        return pd.read_sql_query("SELECT system, perturbation, forecast, error, samples, info FROM forecasts", conn)


def test_every_adapter_runs_end_to_end(run):
    assert run["code"] == 3  # phi3-untrained fails every row by design: assess says so (exit 3) after writing all
    frame = rows(run)
    failed = frame.groupby("system")["error"].apply(lambda e: e.notna().mean())
    expected = ["naive", "chronos", "chronos-bolt", "phi3", "phi3-vision", "gemini", "gemini-vision", "served"]
    for system in expected + (["moment"] if run["moment"] else []):
        assert failed[system] == 0, (system, frame[frame.system == system]["error"].dropna().head(2).tolist())
    doc = json.loads((run["folder"] / "run" / "ratings.json").read_text())
    assert {s["name"]: s["modality"] for s in doc["systems"]}["phi3-vision"] == "plot"
    assert {s["name"]: s["family"] for s in doc["systems"]}["chronos"] == "time-series FM"
    rated = {r["system"] for r in doc["ratings"] if r["rating"] is not None}
    assert {"chronos", "phi3", "phi3-vision", "gemini-vision", "served"} <= rated
    assert run["moment"] <= ("moment" in rated)


def test_chat_models_answer_in_the_format_and_failures_keep_the_raw_answer(run):
    frame = rows(run)
    phi3 = frame[frame.system == "phi3"]
    assert all(forecast_values(f).tolist() == [101.5] * HORIZON for f in phi3["forecast"])
    untrained = frame[frame.system == "phi3-untrained"]
    assert untrained["error"].notna().all()
    assert untrained["error"].str.contains("unparsable answer").all()
    assert untrained["error"].str.contains("; answer: ").all()  # the raw answer is kept
    assert all(json.loads(i)["attempts"] == 2 for i in untrained["info"])  # parse_retries: 1


def test_sample_paths_are_kept_and_scored(run):
    frame = rows(run)
    chronos = frame[(frame.system == "chronos") & frame.error.isna()]
    assert chronos["samples"].map(lambda b: len(b) // 8).eq(6 * HORIZON).all()  # 6 paths × horizon, float64
    bolt = frame[(frame.system == "chronos-bolt") & frame.error.isna()]
    assert bolt["samples"].map(lambda b: len(b) // 8).eq(9 * HORIZON).all()  # the quantile grid
    scores = pd.read_csv(run["folder"] / "run" / "scores.csv")
    crps = scores[scores.score == "crps"].set_index(["system", "perturbation"])["raw"]
    assert np.isfinite(crps.loc["chronos"]).all()


def test_gemini_retries_and_records_usage_and_never_leaks_the_key(run):
    gemini = run["gemini"]
    assert gemini.seen["429"] == gemini.seen["500"] == gemini.seen["slow"] == gemini.seen["malformed"] == 1
    assert all(h.get("x-goog-api-key") == KEY for h in gemini.headers)
    info = [json.loads(i) for i in rows(run).query("system in ['gemini', 'gemini-vision']")["info"]]
    assert all(i["prompt_tokens"] >= 612 and i["output_tokens"] >= 48 and i["latency_s"] > 0 for i in info)
    assert sum(i["requests"] for i in info) == len(info) + 3 + 1  # 429, 500, timeout retried; malformed re-asked
    for path in run["folder"].rglob("*"):
        if path.is_file() and path.suffix != ".safetensors":
            data = path.read_bytes()
            assert KEY.encode() not in data, path
            assert b"http-secret-777" not in data, path


def test_plot_image_enters_the_cache_key(run, monkeypatch, tmp_path):
    """Re-running hits the cache; a different chart style (same numbers) does not."""
    from causalrate.systems import plot

    folder = run["folder"]
    monkeypatch.setenv("TEST_GEMINI_KEY", KEY)
    monkeypatch.setenv("TEST_HTTP_TOKEN", "x")
    monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(folder / "cache"))
    study = folder / "vision.yaml"
    text = (folder / "study.yaml").read_text().split("systems:")[0]
    vision = next(line for line in (folder / "study.yaml").read_text().splitlines() if "type: phi3-vision" in line)
    study.write_text(text + "systems:\n" + vision + "\n")  # the module's run's phi3-vision, as it was
    assert main(["assess", str(study), "--out", str(tmp_path / "a"), "--no-cards", "--workers", "1"]) == 0
    monkeypatch.setattr(plot, "SIZE_INCHES", (6.0, 3.0))
    assert main(["assess", str(study), "--out", str(tmp_path / "b"), "--no-cards", "--workers", "1"]) == 0
    counts = [made(tmp_path / r) for r in ("a", "b")]
    assert counts[0]["made"] == 0 and counts[0]["cached"] > 0  # a: every forecast from the module's run's cache
    assert counts[1] == {"made": counts[0]["cached"], "cached": 0}  # b: every one afresh


def test_fit_head_trains_moment_on_a_training_period_then_assess_uses_it(tmp_path, cli, moment_python):
    """fit-head and assess both run MOMENT in its own environment."""
    from tests.conftest import synthetic_long_csv

    synthetic_long_csv(tmp_path / "prices.csv", length=200)
    tiny_models.build_moment_in(moment_python, tmp_path / "moment", horizon=10)
    head = "heads/moment.safetensors"
    (tmp_path / "study.yaml").write_text(
        f"""
name: head
data: {{source: csv, path: prices.csv, layout: long, attribute_columns: [industry, company], start: 2021-06-01}}
windows: {{input_length: 40, horizon: 10, stride: 10}}
perturbations: [{{id: P0, operator: none}}, {{id: P1, operator: drop_to_zero}}]
outcome: rmax_scaled
causal: {{draws: 2, schemes: [uniform]}}
rigor: {{bootstrap_size: 10, refute: false}}
systems:
  - {{name: naive, type: naive}}
  - {{name: moment, type: moment, model: moment, head: {head}, seq_len: 64}}
"""
    )
    code, _, err = cli("assess", tmp_path / "study.yaml", "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "head: no file" in err  # MOMENT's forecasting head is never silently random
    code, _, err = cli(
        "fit-head", tmp_path / "study.yaml", "--system", "moment", "--start", "2021-01-01", "--end", "2021-07-01"
    )
    assert code == 2 and "must end before the assessed data starts" in err
    code, out, err = cli(
        "fit-head",
        tmp_path / "study.yaml",
        "--system",
        "moment",
        "--start",
        "2021-01-01",
        "--end",
        "2021-05-31",
        "--epochs",
        "30",
        "--lr",
        "0.01",
    )
    assert code == 0, err
    first, last = (float(x) for x in out.split("MSE ")[1].split(";")[0].split(" → "))
    assert last < 0.5 * first
    assert (tmp_path / head).is_file()
    code, _, err = cli("assess", tmp_path / "study.yaml", "--out", tmp_path / "run", "--no-cards", "--workers", "1")
    assert code == 0, err
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as conn:
        errors = [e for (e,) in conn.execute("SELECT error FROM forecasts WHERE system = 'moment'")]
    assert errors and all(e is None for e in errors)
