"""Local HTTP servers that stand in for the Gemini API and a served model, replaying recorded responses.

The Gemini responses in tests/fixtures/gemini/ follow the generateContent response format of
the API reference (candidates → content → parts → text, usageMetadata); the server fills in
the answer text. A script of behaviours (429, 500, a slow reply, a malformed answer) is
consumed first, then every request gets a good answer.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).parent / "fixtures" / "gemini"


class FakeServer:
    """Serves in a thread; `script` behaviours are used first, one per request, then 'good'."""

    def __init__(self, answer, *, script: list[str] | None = None) -> None:
        self.answer = answer  # (request JSON, behaviour, path, headers) → response (status, body dict or bytes)
        self.script = list(script or [])
        self.lock = threading.Lock()
        self.seen = Counter()
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    behaviour = server.script.pop(0) if server.script else "good"
                    server.seen[behaviour] += 1
                    server.headers.append(dict(self.headers))
                if behaviour == "slow":
                    time.sleep(2.5)
                status, payload = server.answer(body, behaviour, self.path, dict(self.headers))
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def gemini_answer(body: dict, behaviour: str, path: str, headers: dict) -> tuple[int, dict]:
    """Answer a generateContent request the way the API does, per behaviour."""
    if behaviour == "429":
        return 429, recorded("rate_limited")
    if behaviour == "500":
        return 500, recorded("server_error")
    if behaviour == "400":
        return 400, recorded("bad_request")
    text = "".join(p.get("text", "") for p in body["contents"][-1]["parts"])
    targets = re.search(r"following timestamps: (.*?)\.\n", text).group(1).split(", ")
    last = [float(v) for _, v in re.findall(r"^\((\S+), ([0-9.]+)\)$", text, flags=re.M)]  # history, not the example
    value = last[-1] if last else 100.0  # a chart-only prompt has no numbers: a fixed guess
    if behaviour == "malformed":
        answer = f"The forecast is {value} for each day."
    else:
        lines = "\n".join(f"({t}, {value})" for t in targets)
        answer = f"<forecast>\n{lines}\n</forecast>"
    response = recorded("ok")
    response["candidates"][0]["content"]["parts"][0]["text"] = answer
    return 200, response


def http_answer(body: dict, behaviour: str, path: str, headers: dict) -> tuple[int, dict | bytes]:
    """A served naive forecaster: repeats each row's last known value."""
    if behaviour in ("429", "500"):
        return int(behaviour), {"error": "try later"}
    if behaviour == "401":
        return 401, {"error": "bad token"}
    if behaviour == "not-json":
        return 200, b"<html>oops</html>"
    rows = [[v for v in row if v is not None] for row in body["inputs"]]
    forecast = [[row[-1]] * body["horizon"] for row in rows]
    if behaviour == "wrong-shape":
        forecast = np.asarray(forecast)[:, :-1].tolist()
    if "quantiles" in body:  # the naive forecast ± 10 % per unit of distance from the median
        spread = [[[v * (1 + (q - 0.5) / 5) for v in row] for q in body["quantiles"]] for row in forecast]
        return 200, {"quantiles": spread}
    return 200, {"forecast": forecast}


ECHO_PATHS = ("not-json", "no-forecast", "wrong-shape", "4xx", "5xx", "timeout")


def echo_answer(body: dict, behaviour: str, path: str, headers: dict) -> tuple[int, dict | bytes]:
    """A hostile endpoint: for the error path named in the URL it answers badly, echoing the request headers
    (and so the secrets in them) in the body, for both the http protocol and Gemini's."""
    secret_first = sorted(headers.items(), key=lambda kv: kv[0].lower() not in ("authorization", "x-goog-api-key"))
    headers = dict(secret_first)
    echo = json.dumps(headers)
    kind = next(k for k in ECHO_PATHS if k in path)
    if kind == "timeout":
        time.sleep(2.5)
    if kind == "not-json":
        return 200, f"<html>you sent {echo}</html>".encode()
    if kind == "no-forecast":
        return 200, {"echo": headers}
    if kind == "4xx":
        return 401, {"error": {"code": 401, "message": f"bad credentials {echo}", "status": "UNAUTHENTICATED"}}
    if kind == "5xx":
        return 503, {"error": {"code": 503, "message": f"overloaded {echo}", "status": "UNAVAILABLE"}}
    if "generateContent" in path:  # a well-formed Gemini reply whose answer is the echo: unparsable
        response = recorded("ok")
        response["candidates"][0]["content"]["parts"][0]["text"] = f"your headers: {echo}"
        return 200, response
    return 200, {"forecast": [[1.0]], "echo": headers}


def _upper(text: str) -> str:
    return text.upper()


def _base64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def _url(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _html(text: str) -> str:
    import html

    return html.escape(text)


# how a careless endpoint may echo the credential it was sent (the token alone, without "Bearer")
ECHO_FORMS = {"bare": str, "url": _url, "base64": _base64, "html": _html, "upper": _upper}


def revoked_answer(body: dict, behaviour: str, path: str, headers: dict) -> tuple[int, dict]:
    """403 "token <token> is revoked", the token taken from the Authorization header and written in the form the
    URL's last segment names (an ECHO_FORMS key)."""
    token = headers.get("Authorization", "").split()[-1]
    form = ECHO_FORMS[path.rstrip("/").rsplit("/", 1)[-1]]
    return 403, {"error": f"token {form(token)} is revoked"}
