"""Secrets: read from the environment, and scrubbed from every text that is stored, logged or shown.

A system setting that names an environment variable holding a secret (an API key, a header
value) declares it with `declare` when the settings are validated, in every process that builds
the system. `scrub` replaces the current value of every declared variable, also in its
JSON- and repr-escaped forms, with ``***``. The boundary that calls it: every error text and
per-forecast fact written to a run's store (`ForecastStore.put_forecasts`), the reason a system
cannot run (kept in the run and its outputs), and every message or traceback the CLI prints.
Code that cuts a text short scrubs it first, so a cut never leaves half a secret.
"""

from __future__ import annotations

import json
import os

_NAMES: set[str] = set()
MASK = "***"


def declare(*names: str) -> None:
    """Mark environment variables whose values must never appear in any output."""
    _NAMES.update(n for n in names if n)


def secret_values() -> list[str]:
    """The current values of the declared variables, longest first (a secret inside another is masked whole)."""
    values = {os.environ.get(name, "") for name in _NAMES}
    return sorted((v for v in values if v), key=len, reverse=True)


def scrub(text: str, extra: list[str] | tuple[str, ...] = ()) -> str:
    """`text` with every declared (and every `extra`) secret, raw or escaped, replaced by ***."""
    for secret in sorted({*secret_values(), *(e for e in extra if e)}, key=len, reverse=True):
        for form in (secret, json.dumps(secret)[1:-1], repr(secret.encode())[2:-1], repr(secret)[1:-1]):
            text = text.replace(form, MASK)
    return text


def scrub_optional(text: str | None) -> str | None:
    return None if text is None else scrub(text)
