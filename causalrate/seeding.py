"""Stable seeds: the same names and numbers give the same random stream on every run and platform."""

from __future__ import annotations

import hashlib
import json
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


def row_seeds(*prefix: object, keys: list[tuple]) -> np.ndarray:
    """One stable seed per row, e.g. per (series, window start, perturbation): stable_seed(*prefix, *key), the
    prefix's JSON written once (a JSON list of prefix + key is the two lists' texts joined)."""
    if not prefix:
        return np.array([stable_seed(*key) for key in keys], dtype=np.uint64)
    head = _JSON.encode(prefix)[:-1]
    return np.array(
        [_seed_of(f"{head}, {_items(key)}]") if key else _seed_of(head + "]") for key in keys],
        dtype=np.uint64,
    )
