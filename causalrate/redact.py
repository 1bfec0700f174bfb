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
import html
import json
import os
import re
from functools import lru_cache
from urllib.parse import quote, quote_plus

_NAMES: set[str] = set()
MASK = "***"


def declare(*names: str) -> None:
    """Mark environment variables whose values must never appear in any output."""
    _NAMES.update(n for n in names if n)


def secret_values() -> list[str]:
    """The current values of the declared variables, longest first (a secret inside another is masked whole)."""
    values = {os.environ.get(name, "") for name in _NAMES}
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
    """`text` with every declared (and every `extra`) secret, in every form above, replaced by ***."""
    pattern = _pattern(tuple(sorted({*secret_values(), *(e for e in extra if e)})))
    return text if pattern is None else pattern.sub(MASK, text)


def scrub_optional(text: str | None) -> str | None:
    return None if text is None else scrub(text)
