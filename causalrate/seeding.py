"""Stable seeds: the same names and numbers give the same random stream on every run and platform."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]

import numpy as np

_JSON = json.JSONEncoder(default=str)  # what json.dumps(parts, default=str) builds on every call, built once


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from JSON-serialisable parts (never Python's salted hash())."""
    return _seed_of(_JSON.encode(parts))


def _seed_of(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(stable_seed(*parts))


def _items(key: tuple) -> str:
    """The JSON text of a key's items without the brackets, as the encoder writes them: str and int (exactly
    those types; a bool or a numpy integer is written otherwise) by the encoder's own C escaper and int's repr,
    a key with anything else by the encoder itself."""
    if all(type(item) is str or type(item) is int for item in key):
        return ", ".join(encode_basestring_ascii(i) if type(i) is str else int.__repr__(i) for i in key)
    return _JSON.encode(key)[1:-1]


class KeyTexts:
    """Rows' keys (e.g. each window's (series, start)) written once as JSON items, for the stable seeds of any
    prefix and suffix: `seeds(*prefix, suffix=s)[i] == stable_seed(*prefix, *keys[i], *s)`. A run writes each
    window's key once and seeds every perturbation and system from it (a JSON list of parts is its pieces'
    texts joined)."""

    def __init__(self, keys: Sequence[tuple]) -> None:
        self.texts = [_items(key) for key in keys]

    def seeds(self, *prefix: object, suffix: tuple = (), rows: np.ndarray | None = None) -> np.ndarray:
        """One seed per key (per key of `rows` if given)."""
        head, tail = _items(prefix) if prefix else "", _items(suffix) if suffix else ""
        before = "[" + head + ", " if head else "["
        after = ", " + tail + "]" if tail else "]"
        bare = "[" + ", ".join(part for part in (head, tail) if part) + "]"  # a key with no items
        texts = self.texts if rows is None else [self.texts[i] for i in rows.tolist()]
        blake2b, from_bytes = hashlib.blake2b, int.from_bytes  # _seed_of, inlined: the loop runs once per forecast
        return np.array(
            [
                from_bytes(blake2b((before + t + after if t else bare).encode(), digest_size=8).digest(), "little")
                for t in texts
            ],
            dtype=np.uint64,
        )


def row_seeds(*prefix: object, keys: Sequence[tuple]) -> np.ndarray:
    """One stable seed per row, e.g. per (series, window start, perturbation): stable_seed(*prefix, *key)."""
    return KeyTexts(keys).seeds(*prefix)
