"""Systems behind a network: Gemini (google-genai) and any HTTP endpoint.

Both retry rate limits (429), server errors (5xx), timeouts and dropped connections with
exponential backoff, give up after `max_attempts`, and never let a secret reach an error text,
a log, the cache or a card: secrets come from environment variables named in the config,
declared to `causalrate.redact` (the boundary every stored or shown text crosses), and every
error text is scrubbed here too, before anything cuts it short.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from causalrate.data.dataset import Dataset
from causalrate.errors import UserError
from causalrate.redact import declare, scrub, secrets_in_url
from causalrate.systems.base import SYSTEMS, Batch, Prediction, System, TransportError, quantile_levels, real_numbers
from causalrate.systems.checkpoints import require
from causalrate.systems.llm import Answer, ChatSettings, ChatSystem, Request

T = TypeVar("T")


class Transient(TransportError):
    """A failure worth trying again: rate limit, server error, timeout, dropped connection (after the last try,
    the endpoint could not be reached)."""


OPERATIONAL = ("timeout", "max_attempts", "backoff", "max_backoff", "concurrency", "headers_env")


def without_operational(identity: dict[str, Any]) -> dict[str, Any]:
    """A remote system's cache identity without the settings that change how it is called, not what it answers."""
    settings = {k: v for k, v in identity["settings"].items() if k not in OPERATIONAL}
    return {**identity, "settings": settings}


class RetrySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    timeout: float = Field(60.0, gt=0, description="seconds per request")
    max_attempts: int = Field(5, ge=1, description="tries per request on rate limits, server errors and timeouts")
    backoff: float = Field(2.0, ge=0, description="seconds before the first retry; doubles each time")
    max_backoff: float = Field(60.0, ge=0)


def with_retries(call: Callable[[], T], settings: RetrySettings, *, secrets: list[str]) -> tuple[T, int]:
    """(result, attempts); the last Transient, scrubbed of secrets, if every attempt failed."""
    for attempt in range(1, settings.max_attempts + 1):
        try:
            return call(), attempt
        except Transient as exc:
            if attempt == settings.max_attempts:
                raise Transient(f"{scrub(str(exc), secrets)} (after {attempt} attempts)") from None
            time.sleep(min(settings.backoff * 2 ** (attempt - 1), settings.max_backoff))
    raise AssertionError("unreachable")


def no_credential(url: str, instead: str) -> str:
    """`url` unchanged, or a ValueError (a config error naming the field) if it carries what looks like a
    credential: a URL is written to ratings.json and the report, so a secret in it would be published."""
    found = secrets_in_url(url)
    if found:
        raise ValueError(
            f"the url carries what looks like a credential ({', '.join(found)}); the url is written to "
            f"ratings.json and the report: {instead}"
        )
    return url


def secret_from_env(name: str, *, system: str, field: str) -> str:
    declare(name)
    value = os.environ.get(name, "")
    if not value:
        raise UserError(f"system type {system}: {field}: environment variable {name} is not set")
    return value


class GeminiSettings(ChatSettings, RetrySettings):
    model: str = Field("gemini-1.5-pro", description="the Gemini model name")
    api_key_env: str = Field("GEMINI_API_KEY", description="environment variable that holds the API key")
    base_url: str | None = Field(None, description="another endpoint (a proxy or gateway); null: Google's")
    concurrency: int = Field(4, ge=1, description="requests in flight at once per worker process")

    _no_secret_in_url = field_validator("base_url")(
        classmethod(lambda cls, url: url and no_credential(url, "the key is read from the environment (api_key_env)"))
    )

    @model_validator(mode="after")
    def _declare_secret(self) -> GeminiSettings:
        declare(self.api_key_env)
        return self


@SYSTEMS.register("gemini")
class Gemini(ChatSystem):
    """Gemini through google-genai: temperature 0, the key from the environment, usage per forecast."""

    Settings = GeminiSettings
    settings: GeminiSettings
    libraries = ("google-genai",)

    def identity(self) -> dict[str, Any]:
        return without_operational(super().identity())

    def check(self, dataset: Dataset) -> None:
        require("google.genai", "gemini", system=SYSTEMS.name_of(type(self)))
        secret_from_env(self.settings.api_key_env, system=SYSTEMS.name_of(type(self)), field="api_key_env")

    def _client(self) -> tuple[Any, str]:
        from google import genai
        from google.genai import types

        key = secret_from_env(self.settings.api_key_env, system=SYSTEMS.name_of(type(self)), field="api_key_env")
        options = types.HttpOptions(
            base_url=self.settings.base_url,
            timeout=int(self.settings.timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),  # ours, below: counted and scrubbed
        )
        return genai.Client(api_key=key, http_options=options), key

    def ask(self, requests: list[Request], *, attempt: int) -> list[Answer]:
        from google.genai import errors, types

        client, key = self._client()
        config = types.GenerateContentConfig(temperature=0.0, max_output_tokens=self.settings.max_new_tokens)

        def one(request: Request) -> Any:
            contents: list[Any] = [request.prompt]
            if request.image is not None:
                contents.insert(0, types.Part.from_bytes(data=request.image, mime_type="image/png"))
            try:
                return client.models.generate_content(model=self.settings.model, contents=contents, config=config)
            except errors.APIError as exc:
                if exc.code == 429 or exc.code >= 500:
                    raise Transient(f"HTTP {exc.code}: {exc.message or exc.status}") from None
                raise
            except Exception as exc:
                if "Timeout" in type(exc).__name__ or "Connect" in type(exc).__name__:
                    raise Transient(f"{type(exc).__name__}: {exc}") from None
                raise

        def answer(request: Request) -> Answer:
            started = time.perf_counter()
            try:
                response, tries = with_retries(lambda: one(request), self.settings, secrets=[key])
            except Exception as exc:
                message = scrub(f"{type(exc).__name__}: {exc}", [key])
                latency = {"latency_s": time.perf_counter() - started}
                return Answer("", latency, error=message, unreachable=isinstance(exc, Transient))
            usage = response.usage_metadata
            facts = {
                "latency_s": time.perf_counter() - started,
                "requests": tries,
                "prompt_tokens": int(getattr(usage, "prompt_token_count", 0) or 0),
                "output_tokens": int(getattr(usage, "candidates_token_count", 0) or 0),
            }
            return Answer(response.text or "", facts)

        with ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool:
            return list(pool.map(answer, requests))


@SYSTEMS.register("gemini-vision")
class GeminiVision(Gemini):
    """Gemini reading the chart of the input window instead of its numbers."""

    modality = "plot"


class HttpSettings(RetrySettings):
    url: str = Field(pattern=r"^https?://", description="POST {inputs, horizon} → {forecast}")
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="header name → environment variable holding its value (e.g. Authorization)"
    )
    model_version: str = Field("", description="what the endpoint serves; change it to invalidate cached forecasts")
    quantiles: list[float] | None = Field(
        None, description="levels (with 0.5) sent as `quantiles`; the answer's `quantiles` is [rows][level][horizon]"
    )
    timeout: float = Field(30.0, gt=0)
    max_attempts: int = Field(3, ge=1)
    backoff: float = Field(1.0, ge=0)

    _levels = field_validator("quantiles")(classmethod(lambda cls, v: quantile_levels(v)))

    _no_secret_in_url = field_validator("url")(
        classmethod(lambda cls, url: no_credential(url, "pass it in a header read from the environment (headers_env)"))
    )

    @model_validator(mode="after")
    def _declare_secrets(self) -> HttpSettings:
        declare(*self.headers_env.values())
        return self


@SYSTEMS.register("http")
class Http(System):
    """A served model assessed as a black box: ``POST {"inputs": [[...]], "horizon": d}`` → ``{"forecast": [[...]]}``.

    Missing input values are sent as JSON null. The answer must hold exactly one finite row of
    `horizon` numbers per input row; anything else is a failure with the reason. With `quantiles`
    stated, the request carries them and the answer's ``quantiles`` holds [rows][level][horizon]
    (the 0.5 level is the point forecast; a ``forecast`` key is then not needed).
    """

    Settings = HttpSettings
    settings: HttpSettings
    family = "served model"

    def __init__(self, settings: HttpSettings, *, base_dir) -> None:
        super().__init__(settings, base_dir=base_dir)
        if settings.quantiles:
            self.quantile_levels = tuple(settings.quantiles)
            self.output = "quantiles"

    def identity(self) -> dict[str, Any]:
        return without_operational(super().identity())

    def check(self, dataset: Dataset) -> None:
        for header, env in self.settings.headers_env.items():
            secret_from_env(env, system="http", field=f"headers_env.{header}")

    def forecast(self, batch: Batch) -> np.ndarray | Prediction:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        secrets = []
        for header, env in self.settings.headers_env.items():
            headers[header] = secret_from_env(env, system="http", field=f"headers_env.{header}")
            secrets.append(headers[header])
        inputs = [[None if np.isnan(v) else float(v) for v in row] for row in batch.inputs]
        request_body = {"inputs": inputs, "horizon": batch.horizon}
        if self.quantile_levels:
            request_body["quantiles"] = list(self.quantile_levels)
        body = json.dumps(request_body).encode()
        request = urllib.request.Request(self.settings.url, data=body, headers=headers, method="POST")

        def post() -> bytes:
            try:
                with urllib.request.urlopen(request, timeout=self.settings.timeout) as response:
                    return response.read()
            except urllib.error.HTTPError as exc:
                detail = scrub(exc.read().decode(errors="replace"), secrets)[:300]
                if exc.code == 429 or exc.code >= 500:
                    raise Transient(f"HTTP {exc.code} from {self.settings.url}: {detail}") from None
                raise ValueError(f"HTTP {exc.code} from {self.settings.url}: {detail}") from None
            except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
                raise Transient(f"{type(exc).__name__} from {self.settings.url}: {exc}") from None

        try:
            raw, _ = with_retries(post, self.settings, secrets=secrets)
            key = "quantiles" if self.quantile_levels else "forecast"
            values = _answer_table(raw, key, rows=len(inputs), horizon=batch.horizon, secrets=secrets)
            if self.quantile_levels:
                return Prediction.of_quantiles(values, self.quantile_levels, rows=len(inputs), horizon=batch.horizon)
            return values
        except Exception as exc:
            raise type(exc)(scrub(str(exc), secrets)) from None


def _answer_table(raw: bytes, key: str, *, rows: int, horizon: int, secrets: list[str]) -> np.ndarray:
    """The endpoint's answer checked: JSON, the key, [rows][horizon] (quantiles: [rows][level][horizon]) numbers."""
    excerpt = repr(scrub(raw.decode(errors="replace"), secrets)[:200])  # scrubbed before the cut
    try:
        answer = json.loads(raw)
    except ValueError:
        raise ValueError(f"response is not JSON: {excerpt}") from None
    if not isinstance(answer, dict) or key not in answer:
        raise ValueError(f"response has no {key!r} key: {excerpt}")
    try:
        values = real_numbers(answer[key], f"response {key!r}")  # "1.5" is text, not a number
    except (TypeError, ValueError):
        raise ValueError(f"response {key!r} is not a table of numbers") from None
    if values.shape[:1] + values.shape[-1:] != (rows, horizon) or values.ndim != (3 if key == "quantiles" else 2):
        expected = f"({rows}, levels, {horizon})" if key == "quantiles" else f"({rows}, {horizon})"
        raise ValueError(f"response {key!r} has shape {values.shape}, expected {expected}")
    return values
