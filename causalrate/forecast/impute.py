"""Imputation of missing input values for systems that do not accept NaN (METHOD §2)."""

from __future__ import annotations

import numpy as np


def _ffill(x: np.ndarray) -> np.ndarray:
    """Forward-fill along rows; leading NaN stay NaN."""
    idx = np.where(np.isnan(x), 0, np.arange(x.shape[1]))
    np.maximum.accumulate(idx, axis=1, out=idx)
    return x[np.arange(x.shape[0])[:, None], idx]


def impute(inputs: np.ndarray, method: str) -> np.ndarray:
    """Fill NaN in [batch, n] inputs: ffill (leading gaps back-filled), linear, or zero."""
    if not np.isnan(inputs).any():
        return inputs
    if method == "zero":
        return np.nan_to_num(inputs, nan=0.0)
    if method == "ffill":
        return _ffill(_ffill(inputs)[:, ::-1])[:, ::-1]  # then back-fill leading gaps
    if method == "linear":
        out = inputs.copy()
        t = np.arange(inputs.shape[1])
        for row in out:
            gap = np.isnan(row)
            if gap.any() and not gap.all():
                row[gap] = np.interp(t[gap], t[~gap], row[~gap])
        return out
    raise ValueError(f"unknown imputation {method!r}")
