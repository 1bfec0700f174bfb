"""Secrets: read from the environment, and scrubbed from every text that is stored, logged or shown.

A system setting that names an environment variable holding a secret (an API key, a header
value) declares it with `declare` when the settings are validated, in every process that builds
the system. `scrub` replaces the current value of every declared variable with ``***``: the whole
value and each credential part of it (the token of "Bearer <token>"), each also JSON-, repr-,
URL-, HTML- and base64-encoded, in any letter case (an endpoint may echo it upper-cased). The
boundary that calls it: every error text and per-forecast fact written to a run's store
(`ForecastStore.put_forecasts`), the reason a system cannot run (kept in the run and its outputs),
and every message or traceback the CLI prints.
Code that cuts a text short scrubs it first, so a cut never leaves half a secret.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import os
import re
from functools import lru_cache
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

_NAMES: set[str] = set()
MASK = "***"


def declare(*names: str) -> None:
    """Mark environment variables whose values must never appear in any output."""
    _NAMES.update(n for n in names if n)


_CONCEALED: set[str] = set()


def conceal(*values: str) -> None:
    """Mark literal values (e.g. a credential found in a URL of the config) that must never appear in any output."""
    _CONCEALED.update(v for v in values if v)


def secret_values() -> list[str]:
    """The current values of the declared variables, longest first (a secret inside another is masked whole)."""
    values = {os.environ.get(name, "") for name in _NAMES} | _CONCEALED
    return sorted((v for v in values if v), key=len, reverse=True)


MIN_PART = 8  # a word of a secret this long is a credential in its own right ("Bearer" is shorter; keys are longer)


def credential_parts(secret: str) -> list[str]:
    """The secret and the parts of it that are secret alone: the credential of "scheme credential"
    (a header value such as "Bearer <token>") and every word of at least MIN_PART characters."""
    words = secret.split()
    parts = [w for w in words if len(w) >= MIN_PART]
    if len(words) == 2:  # scheme credential
        parts.append(words[1])
    return [secret, *parts]


def encodings(value: str) -> set[str]:
    """The forms in which an echo may carry `value`: raw, JSON, repr, URL, HTML and base64 encoded."""
    raw = value.encode()
    b64 = base64.b64encode(raw).decode()
    return {
        value,
        json.dumps(value)[1:-1],
        repr(raw)[2:-1],
        repr(value)[1:-1],
        quote(value, safe=""),
        quote_plus(value),
        html.escape(value),
        b64,
        b64.rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
    }


@lru_cache(maxsize=64)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    forms = {form for secret in secrets for part in credential_parts(secret) for form in encodings(part)}
    if not forms:
        return None
    alternatives = sorted(forms, key=len, reverse=True)  # the longest first: a secret inside another goes whole
    return re.compile("|".join(re.escape(f) for f in alternatives), re.IGNORECASE)


def scrub(text: str, extra: list[str] | tuple[str, ...] = ()) -> str:
    """`text` with every declared (and every `extra`) secret, in every form above, replaced by ***; and every
    base64 block whose decoded text holds one (an endpoint echoing its request headers encoded) by *** whole."""
    pattern = _pattern(tuple(sorted({*secret_values(), *(e for e in extra if e)})))
    if pattern is None:
        return text
    return pattern.sub(MASK, BASE64_BLOCK.sub(lambda block: _masked_block(block.group(0), pattern), text))


BASE64_BLOCK = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")  # a run of base64 (standard or URL-safe) characters


def _masked_block(block: str, pattern: re.Pattern[str]) -> str:
    """*** if the base64 block decodes to a text that carries a secret (at whatever offset), else the block."""
    padded = block.rstrip("=") + "=" * (-len(block.rstrip("=")) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            decoded = decode(padded).decode("utf-8", errors="ignore")
        except (binascii.Error, ValueError):
            continue
        if pattern.search(decoded):
            return MASK
    return block


SECRET_WORDS = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "auth",
    "signature",
    "sig",
    "credential",
    "sessionid",
)  # a parameter name's word that is, or ends with, one of these names a credential
SECRET_NAMES = ("code", "sid", "jwt", "session")  # a parameter named exactly so (Azure's ?code=, a session id)


def secrets_in_url(url: str) -> list[str]:
    """The parts of a URL that look like a credential: any user info (`user:password@`, or a token alone as
    `token@`), every query, fragment (`#access_token=`) or path (`;jsessionid=`) parameter named like one
    (api_key, token, sig, ?code=, ...), and the value of any secret already declared (a key pasted into the URL).
    A URL is stored in the run and shown in its report, so it must carry none (headers_env holds them, read
    from the environment). The values found are concealed (scrubbed), so the error that refuses the URL cannot
    print them."""
    parts = urlsplit(url)
    found = []
    if parts.username or parts.password:
        found.append("user info before '@'")
        conceal(parts.username or "", parts.password or "")
    path_params = [p for segment in parts.path.split("/") for p in segment.split(";")[1:]]
    params = [
        *((where, name, value) for where, text in (("query", parts.query), ("fragment", parts.fragment))
          for name, value in parse_qsl(text, keep_blank_values=True)),
        *(("path", *p.partition("=")[::2]) for p in path_params),
    ]  # fmt: skip
    for where, name, value in params:
        words = re.split(r"[^a-z]+", name.lower())
        if value and (name.lower() in SECRET_NAMES or any(w.endswith(SECRET_WORDS) for w in words)):
            found.append(f"{where} parameter {name!r}")
            conceal(value)
    declared = [v for v in secret_values() if len(v) >= MIN_PART]
    if not found and any(form.lower() in url.lower() for v in declared for form in encodings(v)):
        found.append("the value of a secret environment variable")
    return found


def scrub_optional(text: str | None) -> str | None:
    return None if text is None else scrub(text)
