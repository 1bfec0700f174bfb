"""Partial order and binning into L levels (METHOD §6, steps 1–3)."""

from __future__ import annotations

import numpy as np


def bin_ratings(raw: np.ndarray, *, levels: int, higher_is_better: bool = False) -> np.ndarray:
    """Rating 1..levels per value, 1 = best.

    Values are sorted best first and split into `levels` contiguous groups as equal as
    possible (the first groups take the remainder, as numpy's array_split). Equal values
    get the best group that contains their value. NaN (no score) gets the worst level.
    """
    raw = np.asarray(raw, dtype=np.float64)
    ratings = np.full(raw.size, levels, dtype=int)
    finite = np.flatnonzero(np.isfinite(raw))
    if finite.size == 0:
        return ratings
    key = -raw[finite] if higher_is_better else raw[finite]
    order = np.argsort(key, kind="stable")
    group_of_position = np.empty(finite.size, dtype=int)
    for level, positions in enumerate(np.array_split(np.arange(finite.size), levels), start=1):
        group_of_position[positions] = level
    sorted_key = key[order]
    first_position = np.searchsorted(sorted_key, sorted_key, side="left")  # ties → best group of their value
    ratings[finite[order]] = group_of_position[first_position]
    return ratings
