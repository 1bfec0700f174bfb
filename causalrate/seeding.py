"""Stable seeds: the same names and numbers give the same random stream on every run and platform."""

from __future__ import annotations

import hashlib
import json

import numpy as np


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from JSON-serialisable parts (never Python's salted hash())."""
    digest = hashlib.blake2b(json.dumps(parts, default=str).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(stable_seed(*parts))


def row_seeds(*prefix: object, keys: list[tuple]) -> np.ndarray:
    """One stable seed per row, e.g. per (series, window start, perturbation)."""
    return np.array([stable_seed(*prefix, *key) for key in keys], dtype=np.uint64)
