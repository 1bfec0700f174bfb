"""Prompt, strict parser, chart rendering, and the remote systems' failure handling (no torch needed)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.llm import ParseError, number, numeric_prompt, parse_forecast
from causalrate.systems.plot import render_window
from causalrate.systems.remote import Gemini, Http
from tests.fake_servers import FakeServer, gemini_answer, http_answer

DATES = np.arange(np.datetime64("2024-03-01"), np.datetime64("2024-03-09"))
TARGETS = np.arange(np.datetime64("2024-03-09"), np.datetime64("2024-03-11"))
KEY = "AIzaUNIT-secret-9001"


def test_numbers_are_six_significant_digits_never_scientific():
    assert number(1234567.0) == "1234570"
    assert number(0.000123456789) == "0.000123457"
    assert number(152.34567) == "152.346"
    assert number(float("nan")) == "NaN"


def test_numeric_prompt_lists_history_targets_and_missing_values():
    values = np.array([1.5, 2.0, np.nan, 0.0, 1e7, 3.25, 4.0, 5.0])
    prompt = numeric_prompt(values, DATES, TARGETS, context="ctx")
    assert "(2024-03-03, NaN)" in prompt and "Missing values are written NaN." in prompt
    assert "(2024-03-05, 10000000)" in prompt and "e+" not in prompt
    assert "following timestamps: 2024-03-09, 2024-03-10." in prompt
    assert "Missing values" not in numeric_prompt(np.ones(8), DATES, TARGETS, context="ctx")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("no tags at all", "expected one <forecast>"),
        ("<forecast>\n(2024-03-09, 1)\n</forecast>", "expected 2"),
        ("<forecast>\n(2024-03-09, 1)\n(2024-03-11, 2)\n</forecast>", "expected 2024-03-10"),
        ("<forecast>\n(2024-03-09, 1)\n(2024-03-10, two)\n</forecast>", "not a number"),
        ("<forecast>\n(2024-03-09, 1)\n(2024-03-10, inf)\n</forecast>", "not a finite"),
        ("<forecast>\n2024-03-09: 1\n(2024-03-10, 2)\n</forecast>", r"is not '\(timestamp, value\)'"),
        ("<forecast>\n(2024-03-09, 1)\n(2024-03-10, 2)\n</forecast><forecast></forecast>", "found 2"),
    ],
)
def test_parser_is_strict(text, why):
    with pytest.raises(ParseError, match=why):
        parse_forecast(text, TARGETS)


def test_parser_reads_a_good_answer_with_surrounding_text():
    text = "Sure.\n<forecast>\n(2024-03-09, 1.5)\n( 2024-03-10 , -2e3 )\n</forecast>"
    assert parse_forecast(text, TARGETS).tolist() == [1.5, -2000.0]


def test_chart_is_deterministic_shows_gaps_and_drops():
    from PIL import Image

    values = np.linspace(100, 110, 8)
    a, b = render_window(values, DATES), render_window(values.copy(), DATES)
    assert a == b and a.startswith(b"\x89PNG")
    gap, drop = values.copy(), values.copy()
    gap[4], drop[4] = np.nan, 0.0
    assert len({a, render_window(gap, DATES), render_window(drop, DATES)}) == 3
    pixels = np.asarray(Image.open(io.BytesIO(render_window(drop, DATES))).convert("RGB"))
    assert pixels.shape == (360, 640, 3)


def batch(inputs: np.ndarray) -> Batch:
    b = inputs.shape[0]
    return Batch(
        inputs=inputs,
        horizon=2,
        seeds=np.arange(b, dtype=np.uint64),
        attributes=({},) * b,
        input_dates=np.tile(DATES, (b, 1)),
        truth_dates=np.tile(TARGETS, (b, 1)),
    )


def gemini(url: str, **extra) -> Gemini:
    settings = Gemini.Settings(**{"base_url": url, "api_key_env": "UNIT_KEY", "timeout": 1, "backoff": 0, **extra})
    return Gemini(settings, base_dir=Path("."))


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("UNIT_KEY", KEY)


@pytest.mark.usefixtures("key")
def test_gemini_gives_up_after_max_attempts_and_hides_the_key():
    pytest.importorskip("google.genai")
    with FakeServer(gemini_answer, script=["429"] * 3 + ["400"]) as server:
        out = gemini(server.url, max_attempts=3, concurrency=1).forecast(batch(np.ones((2, 8))))
    assert isinstance(out, Prediction)
    errors = sorted(out.errors)
    assert "HTTP 429" in errors[1] and "after 3 attempts" in errors[1]
    assert "400" in errors[0] and "API key not valid" in errors[0]
    assert all(KEY not in e for e in errors)


@pytest.mark.usefixtures("key")
def test_gemini_keeps_an_answer_that_never_parses():
    pytest.importorskip("google.genai")
    with FakeServer(gemini_answer, script=["malformed"] * 3) as server:
        out = gemini(server.url, parse_retries=2).forecast(batch(np.ones((1, 8))))
    assert "after 3 attempt(s)" in out.errors[0] and "The forecast is 1.0 for each day." in out.errors[0]
    assert out.info[0]["attempts"] == 3 and out.info[0]["prompt_tokens"] == 3 * 612


def test_missing_api_key_is_a_clear_user_error(monkeypatch):
    monkeypatch.delenv("UNIT_KEY", raising=False)
    with pytest.raises(UserError, match="environment variable UNIT_KEY is not set"):
        gemini("http://127.0.0.1:9").check(None)


def http(url: str, **extra) -> Http:
    return Http(Http.Settings(url=url, backoff=0, timeout=1, **extra), base_dir=Path("."))


def test_http_endpoint_round_trip_with_missing_values_and_retries(monkeypatch):
    monkeypatch.setenv("UNIT_TOKEN", "Bearer t0ken-secret")
    inputs = np.array([[1.0, 2.0, np.nan, 4.0, 5.0, 6.0, 7.0, np.nan]])
    with FakeServer(http_answer, script=["429", "500"]) as server:
        out = http(server.url, headers_env={"Authorization": "UNIT_TOKEN"}).forecast(batch(inputs))
    assert out.tolist() == [[7.0, 7.0]]
    assert server.seen["429"] == server.seen["500"] == 1
    assert server.headers[-1]["Authorization"] == "Bearer t0ken-secret"


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("not-json", "response is not JSON"),
        ("wrong-shape", r"shape \(1, 1\), expected \(1, 2\)"),
        ("401", "HTTP 401"),
        ("slow", "after 2 attempts"),
    ],
)
def test_http_bad_responses_are_clear_failures(behaviour, message):
    with FakeServer(http_answer, script=[behaviour] * 2) as server, pytest.raises(Exception, match=message):
        http(server.url, max_attempts=2).forecast(batch(np.ones((1, 8))))


def test_every_system_type_declares_family_and_modality():
    modalities = {name: cls.modality for name, cls in SYSTEMS.items()}
    assert modalities["phi3-vision"] == modalities["gemini-vision"] == "plot"
    assert modalities["chronos"] == modalities["phi3"] == modalities["gemini"] == "numeric"
    assert SYSTEMS.get("moment").family == "time-series FM" and SYSTEMS.get("gemini").family == "general-purpose LLM"


def test_remote_cache_identity_ignores_how_it_is_called():
    a = gemini("http://x", concurrency=1, timeout=5).identity()
    b = gemini("http://x", concurrency=8, timeout=50, max_attempts=2, backoff=3).identity()
    assert a == b
    assert a != gemini("http://x", max_new_tokens=100).identity()
    assert http("http://x", max_attempts=1).identity() == http("http://x", max_attempts=9).identity()
    assert http("http://x").identity() != http("http://x", model_version="v2").identity()


def test_an_endpoint_that_is_down_is_stopped_after_three_batches(synthetic_study, cli, tmp_path):
    """Every request answered 503: three batches spend their retries (none retried row by row), then the
    system's remaining batches fail unsent, with the reason, and stderr says so."""
    down = lambda body, behaviour, path, headers: (503, {"error": "down for maintenance"})  # noqa: E731
    with FakeServer(down) as server:
        system = f"- {{name: api, type: http, url: '{server.url}', max_attempts: 2, backoff: 0, timeout: 5}}\n"
        config = synthetic_study(system, draws=2, stride=20, extra="forecast: {batch_size: 4}\n")
        code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards", "--workers", "1")
    assert code == 3 and "api: 3 batches in a row could not reach it" in err and "HTTP 503" in err, err
    # three batches × two attempts, plus the one batch a worker already holds beside the one it runs (it holds
    # two, so it never waits on the main process); without the breaker 36 × 5 × 2
    assert 3 * 2 <= sum(server.seen.values()) <= 4 * 2
    import sqlite3

    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as db:
        errors = [e for (e,) in db.execute("SELECT error FROM forecasts")]
    assert len(errors) == 4 * 36 and all(errors)
    unsent = sum(e.startswith("not sent: 3 batches in a row could not reach it") for e in errors)
    assert len(errors) - 16 <= unsent <= len(errors) - 12  # the batches sent: three, or four with the held one
