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
import gzip
import html
import io
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


MIN_CONCEALED = 4  # a shorter value (a user name "u") is no secret, and masking it would mask every "u" printed


def conceal(*values: str) -> None:
    """Mark literal values (e.g. a credential found in a URL of the config) that must never appear in any output."""
    _CONCEALED.update(v for v in values if len(v) >= MIN_CONCEALED)


def secret_values() -> list[str]:
    """The current values of the declared variables and of every variable named like a credential (a python
    system's own API_KEY or TOKEN, which no setting declares), longest first (a secret inside another is masked
    whole)."""
    named = {v for v in credential_variables() if len(os.environ.get(v, "")) >= MIN_PART}
    values = {os.environ.get(name, "") for name in _NAMES | named} | _CONCEALED
    return sorted((v for v in values if v), key=len, reverse=True)


ENV_WORDS = ("key", "token", "secret", "password", "passwd", "credential", "credentials")
_ENV_NAMES: dict[int, frozenset[str]] = {}  # the credential-named variables, by how many variables there are


def credential_variables() -> frozenset[str]:
    """The environment variables named like a credential: a word of the name ends with one of ENV_WORDS
    (OPENAI_API_KEY, HF_TOKEN, DB_PASSWORD). Read again when a variable is added or removed."""
    if len(os.environ) not in _ENV_NAMES:
        _ENV_NAMES.clear()
        _ENV_NAMES[len(os.environ)] = frozenset(
            name for name in os.environ if any(w.endswith(ENV_WORDS) for w in re.split(r"[^a-z]+", name.lower()) if w)
        )
    return _ENV_NAMES[len(os.environ)]


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
    """`text` with every declared (and every `extra`) secret, in every form above, replaced by ***; every block
    that decodes to a text holding one (base64, also wrapped over lines, URL-safe, gzipped; base32; hex; nested
    two deep) by *** whole (an endpoint echoing its request headers encoded); and every line that holds one once
    its HTML character references or \\u escapes are read (&#101;, \\u0065) by *** whole."""
    pattern = _pattern(tuple(sorted({*secret_values(), *(e for e in extra if e)})))
    if pattern is None:
        return text

    def wrapped(match: re.Match[str]) -> str:
        first = re.split(r"\r?\n|\\n", match.group(0))[0]
        if _decodes_to_secret(first, pattern):  # one block followed by a word: the block pass masks it alone
            return match.group(0)
        return MASK if _holds(re.sub(r"\\n|\s", "", match.group(0)), pattern) else match.group(0)

    def block(match: re.Match[str]) -> str:
        return MASK if _decodes_to_secret(match.group(0), pattern) else match.group(0)

    text = pattern.sub(MASK, ENCODED_BLOCK.sub(block, WRAPPED_BLOCK.sub(wrapped, text)))
    lines = text.splitlines(keepends=True)
    return "".join(
        MASK + line[len(line.rstrip("\r\n")) :] if _escaped_secret(line, pattern) else line for line in lines
    )


ENCODED_BLOCK = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,6}")  # a run of base64, base32 or hex characters
# base64 wrapped over lines (MIME's 76 columns), the breaks real or JSON-escaped (\n)
# (lines of at least 40: MIME wraps at 76, PEM at 64; a run only from its start, so the search stays linear)
WRAPPED_BLOCK = re.compile(r"(?<![A-Za-z0-9+/])(?:[A-Za-z0-9+/]{40,}(?:\r?\n|\\n))+[A-Za-z0-9+/]+={0,2}")
MAX_DECODED = 1_000_000  # bytes a gzipped block may inflate to before it is judged (no zip bomb)
MAX_INSPECTED = 100_000  # characters of one encoded block decoded and searched; a longer block is masked whole


def _holds(text: str, pattern: re.Pattern[str], depth: int = 2) -> bool:
    """Whether `text` carries a secret, read as it is or with its encoded blocks decoded (`depth` levels)."""
    if pattern.search(text):
        return True
    return depth > 0 and any(_decodes_to_secret(m.group(0), pattern, depth) for m in ENCODED_BLOCK.finditer(text))


def _decodes_to_secret(block: str, pattern: re.Pattern[str], depth: int = 2) -> bool:
    """Whether a block of base64 / base32 / hex characters decodes to a text that carries a secret (a block
    too long to inspect quickly counts as one: in an error text or a log line it is noise, never needed)."""
    if len(block) > MAX_INSPECTED:
        return True
    return any(_holds(decoded, pattern, depth - 1) for decoded in _decodings(block))


def _decodings(block: str) -> list[str]:
    """The texts a block may encode: base64 (standard, URL-safe; gunzipped where it is gzip), base32, hex."""
    stripped = block.rstrip("=")
    attempts = [
        lambda: base64.b64decode(stripped + "=" * (-len(stripped) % 4)),
        lambda: base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4)),
        lambda: base64.b32decode(stripped.upper() + "=" * (-len(stripped) % 8)),
        lambda: bytes.fromhex(block),
    ]
    out = []
    for attempt in attempts:
        try:
            raw = attempt()
        except (binascii.Error, ValueError):
            continue
        if raw[:2] == b"\x1f\x8b":  # gzip
            try:
                with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unzipped:
                    raw = unzipped.read(MAX_DECODED)
            except (OSError, EOFError):
                pass
        out.append(raw.decode("utf-8", errors="ignore"))
    return out


def _escaped_secret(line: str, pattern: re.Pattern[str]) -> bool:
    """Whether a line holds a secret once its HTML character references and \\uXXXX escapes are read."""
    if "&" not in line and "\\u" not in line:
        return False
    unescaped = html.unescape(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), line))
    return unescaped != line and bool(pattern.search(unescaped))


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
