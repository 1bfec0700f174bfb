"""Secrets never leave the process: a hostile endpoint that echoes the request headers on every error path.

Every remote system type (`http`, `gemini`, `gemini-vision`) meets every error path (a non-JSON 200,
JSON without a forecast, a wrong shape or unparsable answer, 4xx, 5xx, a timeout) on a real localhost
server; neither secret, nor a piece of one, may appear in any file of the run, its cards, the
forecast cache, or what the CLI printed.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import sqlite3
import textwrap

import pandas as pd
import pytest

from causalrate.redact import _decodings, declare, scrub
from tests.conftest import synthetic_long_csv, write_yaml
from tests.fake_servers import ECHO_FORMS, ECHO_PATHS, FakeServer, echo_answer, revoked_answer

pytest.importorskip("google.genai")

TOKEN = "Bearer s3cr3t-ECHO-4242"
KEY = "AIzaECHOkey-s3cr3t-777"
PIECES = ("s3cr3t-ECHO", "ECHOkey", "s3cr3t-777")


def _systems(url: str) -> str:
    lines = ["  - {name: naive, type: naive}"]
    for kind in ECHO_PATHS:
        lines.append(
            f"  - {{name: http-{kind}, type: http, url: '{url}/{kind}', headers_env: {{Authorization: ECHO_TOKEN}},"
            " timeout: 1, max_attempts: 1, backoff: 0}"
        )
        for kind_type in ("gemini", "gemini-vision"):
            lines.append(
                f"  - {{name: {kind_type}-{kind}, type: {kind_type}, model: {kind}, base_url: '{url}',"
                " api_key_env: ECHO_KEY, timeout: 1, max_attempts: 1, backoff: 0, parse_retries: 0}"
            )
    return "\n".join(lines)


@pytest.mark.e2e
def test_no_error_path_of_any_remote_system_leaks_a_secret(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("ECHO_TOKEN", TOKEN)
    monkeypatch.setenv("ECHO_KEY", KEY)
    cache = tmp_path / "forecast-cache"
    synthetic_long_csv(tmp_path / "prices.csv")
    with FakeServer(echo_answer) as server:
        study = write_yaml(
            tmp_path / "study.yaml",
            f"""\
name: echo
data: {{source: csv, path: prices.csv, layout: long, attribute_columns: [industry, company], series: [A1, B1]}}
windows: {{input_length: 40, horizon: 10, stride: 60}}
perturbations:
  - {{id: P0, operator: none}}
  - {{id: P1, operator: drop_to_zero}}
outcome: rmax_scaled
causal: {{schemes: [uniform, industry], draws: 3}}
rigor: {{bootstrap_size: 0}}
forecast: {{timeout: 60, retries: 0}}
systems:
{_systems(server.url)}
""",
        )
        run = tmp_path / "run"
        code, out, err = cli("assess", study, "--out", run, "--workers", "2", "--no-cards")
        assert code == 3, err  # every remote system fails every row by design: rated worst, then exit 3
        card = cli("card", run, "--format", "html,md")
        assert card[0] == 0, card[2]
    assert {h.get("Authorization") for h in server.headers} >= {TOKEN}  # the secrets were sent (and echoed)
    assert any(h.get("x-goog-api-key") == KEY for h in server.headers)

    with sqlite3.connect(run / "forecasts.sqlite") as conn:
        rows = pd.read_sql("SELECT system, error FROM forecasts", conn)
    errors = rows.dropna().groupby("system")["error"].first()
    assert set(errors.index) == set(rows["system"]) - {"naive"}, "every echoing system must fail"
    for kind in ("not-json", "no-forecast", "4xx", "5xx"):
        assert "***" in errors[f"http-{kind}"], errors[f"http-{kind}"]  # echoed, then scrubbed
    for kind in ("4xx", "wrong-shape"):
        assert "***" in errors[f"gemini-{kind}"], errors[f"gemini-{kind}"]

    printed = out + err + card[1] + card[2]
    files = [p for folder in (run, cache) for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".html" for p in files) and (run / "ratings.json").is_file()
    for piece in PIECES:
        assert piece not in printed
        for path in files:
            assert piece.encode() not in path.read_bytes(), path


def test_an_echoed_bare_or_encoded_credential_is_scrubbed_everywhere(tmp_path, monkeypatch, cli):
    """ "403 token <token> is revoked" with the token alone (no "Bearer"), URL-encoded, base64, HTML-escaped and
    upper-cased: none reaches the store, the cache, the cards (the detailed report included) or the terminal."""
    token = "Bearer Zq9-s3cr3t+tok/en=&<x>"  # characters each encoding changes
    credential = token.split()[1]
    monkeypatch.setenv("REVOKED_TOKEN", token)
    synthetic_long_csv(tmp_path / "prices.csv")
    with FakeServer(revoked_answer) as server:
        systems = "\n".join(
            f"  - {{name: http-{form}, type: http, url: '{server.url}/{form}', "
            "headers_env: {Authorization: REVOKED_TOKEN}, timeout: 1, max_attempts: 1, backoff: 0}"
            for form in ECHO_FORMS
        )
        study = write_yaml(
            tmp_path / "study.yaml",
            f"""\
name: revoked
data: {{source: csv, path: prices.csv, layout: long, attribute_columns: [industry, company], series: [A1, B1]}}
windows: {{input_length: 40, horizon: 10, stride: 60}}
perturbations: [{{id: P0, operator: none}}, {{id: P1, operator: drop_to_zero}}]
outcome: rmax_scaled
causal: {{schemes: [uniform], draws: 2}}
rigor: {{bootstrap_size: 0}}
systems:
  - {{name: naive, type: naive}}
{systems}
""",
        )
        run = tmp_path / "run"
        code, out, err = cli("assess", study, "--out", run, "--workers", "1", "--no-cards")
        assert code == 3, err
        card = cli("card", run, "--format", "html,md")
        assert card[0] == 0, card[2]
    with sqlite3.connect(run / "forecasts.sqlite") as conn:
        errors = pd.read_sql("SELECT system, error FROM forecasts WHERE error IS NOT NULL", conn)
    assert set(errors["system"]) == {f"http-{form}" for form in ECHO_FORMS}
    assert errors["error"].str.contains("token \\*\\*\\* is revoked").all(), errors["error"].unique()
    leaks = {form(credential) for form in ECHO_FORMS.values()} | {credential.lower()}
    printed = out + err + card[1] + card[2]
    files = [p for folder in (run, tmp_path / "forecast-cache") for p in folder.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".report.html") for p in files)
    for leak in leaks:
        assert leak not in printed
        for path in files:
            assert leak.encode() not in path.read_bytes(), (leak, path)


def test_scrub_masks_each_credential_part_in_each_encoding(monkeypatch):
    monkeypatch.setenv("UNIT_PARTS", "Bearer abc+def/ghi=")
    declare("UNIT_PARTS")
    for form in ECHO_FORMS.values():
        assert scrub(f"token {form('abc+def/ghi=')} revoked") == "token *** revoked", form
    assert scrub("Bearer is a word; the scheme alone is no secret") == "Bearer is a word; the scheme alone is no secret"


def test_scrub_masks_escaped_forms_and_the_longest_secret_first(monkeypatch):
    monkeypatch.setenv("UNIT_SCRUB", 'to"k\\en')
    declare("UNIT_SCRUB")
    assert scrub('a to"k\\en b') == "a *** b"
    assert scrub('{"h": "to\\"k\\\\en"}') == '{"h": "***"}'
    assert scrub("tok", extra=["tok", "tokenX"]) == "***"
    assert scrub("tokenX") == "tokenX"


def test_an_excerpt_is_scrubbed_before_it_is_cut():
    """A secret that straddles the excerpt's end must not leave its first half behind."""
    from causalrate.systems.remote import _answer_table

    raw = ("x" * 190 + TOKEN + "tail").encode()
    with pytest.raises(ValueError) as info:
        _answer_table(raw, "forecast", rows=1, horizon=1, secrets=[TOKEN])
    assert "Bearer" not in str(info.value) and "***" in str(info.value)


def test_a_secret_inside_a_base64_block_is_scrubbed(monkeypatch):
    """An endpoint echoing its request headers base64-encoded: the secret's own base64 is no substring of the
    block's (it depends on the offset), so the block is decoded and masked whole when it carries a secret."""
    import base64

    monkeypatch.setenv("UNIT_B64", "sk-live-0123456789abcdef")
    declare("UNIT_B64")
    for prefix in ("", "x", "xy"):  # every alignment of the secret inside the encoded block
        headers = f"{prefix}Host: api\r\nAuthorization: Bearer sk-live-0123456789abcdef\r\nAccept: */*"
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            block = encode(headers.encode()).decode()
            assert scrub(f"echo: {block} end") == "echo: *** end", (prefix, encode)
    harmless = base64.b64encode(b"nothing secret in these headers at all").decode()
    assert scrub(f"echo: {harmless}") == f"echo: {harmless}"


def _wrapped(b: bytes) -> str:
    return "\n".join(textwrap.wrap(base64.b64encode(b).decode(), 64))  # PEM's lines


ENCODINGS = {
    "hex": lambda b: b.hex(),
    "HEX": lambda b: b.hex().upper(),
    "base32": lambda b: base64.b32encode(b).decode(),
    "gzip-base64": lambda b: base64.b64encode(gzip.compress(b)).decode(),
    "base64-twice": lambda b: base64.b64encode(base64.b64encode(b)).decode(),
    "hex-in-base64": lambda b: base64.b64encode(b.hex().encode()).decode(),
    "base64-wrapped": _wrapped,
    "wrapped-in-json": lambda b: json.dumps(_wrapped(b)),
    "html-decimal": lambda b: b.decode().replace("e", "&#101;"),
    "html-hex": lambda b: b.decode().replace("e", "&#x65;"),
    "json-u-escapes": lambda b: b.decode().replace("e", "\\u0065"),
}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_secret_in_any_encoding_an_echo_uses_is_scrubbed(monkeypatch, encoding):
    """The sweep's echoing endpoint leaked the headers hex-encoded, base32, gzipped then base64, base64 wrapped
    over lines (MIME/PEM) and with HTML character references or JSON \\u escapes: each is masked now."""
    monkeypatch.setenv("UNIT_ENC", "Bearer sk-live-0123456789abcdef")
    declare("UNIT_ENC")
    headers = b"Host: api\r\nAuthorization: Bearer sk-live-0123456789abcdef\r\nAccept: */*"
    scrubbed = scrub(f"echo: {ENCODINGS[encoding](headers)}\nnext line")
    assert "***" in scrubbed and scrubbed.endswith("\nnext line"), scrubbed
    for piece in ("0123456789abcdef", "sk-live"):
        assert piece not in scrubbed.lower()
    blocks = [decoded for m in re.finditer(r"\S{16,}", scrubbed) for decoded in _decodings(m.group(0))]
    assert not any("sk-live-0123456789abcdef" in text for text in (scrubbed, *blocks))


def test_a_harmless_text_with_long_words_and_escapes_is_left_alone(monkeypatch):
    monkeypatch.setenv("UNIT_ENC", "Bearer sk-live-0123456789abcdef")
    declare("UNIT_ENC")
    text = (
        'HTTP 400 {"error": "bad request 0123456789abcdef0123 at 2f3a9c1e8b7d6054"} &amp; \\u0041\nAAAAAAAAAAAAAAAAAAAA'
    )
    assert scrub(text) == text


def test_a_credential_in_an_http_url_is_refused_and_not_printed(tmp_path, cli):
    from causalrate.redact import secrets_in_url

    assert secrets_in_url("https://h/v1?api_key=abc123&x=1") == ["query parameter 'api_key'"]
    assert secrets_in_url("https://u:pw123456@h/v1") == ["user info before '@'"]
    assert secrets_in_url("https://h/v1?model=small&keyframes=3") == []
    config = tmp_path / "s.yaml"
    config.write_text(
        "name: s\ndata: {source: embedded, series: [AAPL], start: 2022-01-01, end: 2022-06-30}\n"
        "windows: {input_length: 20, horizon: 5, stride: 10}\n"
        "systems:\n  - {name: served, type: http, url: 'https://example.invalid/f?token=ghp_s3cr3tvalue99'}\n"
    )
    code, _, err = cli("assess", config, "--out", tmp_path / "run")
    assert code == 2 and "query parameter 'token'" in err and "headers_env" in err, err
    assert "ghp_s3cr3tvalue99" not in err


def test_what_a_python_system_prints_is_scrubbed(tmp_path, monkeypatch, capsys):
    import numpy as np

    from causalrate.systems.python_system import PythonFunction, PythonSettings
    from tests.test_statsforecast import batch_of

    monkeypatch.setenv("UNIT_PRINTED", "pk-printed-0123456789")
    declare("UNIT_PRINTED")
    (tmp_path / "chatty.py").write_text(
        "import os, sys\n"
        "def f(inputs, horizon):\n"
        "    print('calling with', os.environ['UNIT_PRINTED'])\n"
        "    print('key again', os.environ['UNIT_PRINTED'], file=sys.stderr)\n"
        "    return inputs[:, -1:].repeat(horizon, axis=1)\n"
    )
    system = PythonFunction(PythonSettings(function="chatty.py:f"), base_dir=tmp_path)
    system.forecast(batch_of(np.arange(12.0).reshape(2, 6), horizon=3, season=1))
    captured = capsys.readouterr()
    assert "pk-printed-0123456789" not in captured.out + captured.err
    assert "calling with ***" in captured.err and "key again ***" in captured.err


def test_a_variable_named_like_a_credential_is_scrubbed_undeclared(monkeypatch):
    """A python system printed its own API key (read from an environment variable no setting declares) to the
    console unscrubbed; a variable named like a credential is a secret now. PWD and short values are not."""
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-proj-9f8e7d6c5b4a")
    monkeypatch.setenv("HF_TOKEN", "short")
    assert scrub("key sk-proj-9f8e7d6c5b4a used") == "key *** used"
    assert scrub("token short and /work/here") == "token short and /work/here"
    monkeypatch.setenv("MODEL_NAME", "chronos-bolt-small")  # not named like a credential: shown as it is
    assert scrub("model chronos-bolt-small") == "model chronos-bolt-small"
