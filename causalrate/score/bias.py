"""Bias with a magnitude (METHOD §4): the largest gap between one group's mean outcome and the rest.

bias = max over groups g of |mean R_g − mean R_rest| / mean R, where rest = the other groups of g's
comparison set (all other industries; for `company`, the other companies of g's industry). Unlike
WRS it does not saturate: a pair that already differs for an honest system still shows how much
more a biased one adds. Computed for many weightings at once (bootstrap count vectors), so the
observed value is the all-ones weighting.
"""

from __future__ import annotations

import numpy as np


def bias_gap(
    weights: np.ndarray, values: np.ndarray, groups: np.ndarray, within: np.ndarray | None = None
) -> np.ndarray:
    """[B] relative bias gap under each weighting [B, W] of the windows' outcomes [W] (NaN = missing)."""
    valid = np.isfinite(values)
    w = weights * valid
    v = np.where(valid, values, 0.0)
    blocks = np.zeros(groups.size, dtype=int) if within is None else within
    with np.errstate(invalid="ignore", divide="ignore"):
        overall = np.abs((w @ v) / w.sum(axis=1))
        gaps = np.full(weights.shape[0], np.nan)
        for block in np.unique(blocks[valid]):
            in_block = valid & (blocks == block)
            names = np.unique(groups[in_block])
            if names.size < 2:
                continue  # nothing to compare with
            for g in names:
                member, rest = in_block & (groups == g), in_block & (groups != g)
                mean_g = (w[:, member] @ v[member]) / w[:, member].sum(axis=1)
                mean_rest = (w[:, rest] @ v[rest]) / w[:, rest].sum(axis=1)
                gaps = np.fmax(gaps, np.abs(mean_g - mean_rest) / overall)
    return gaps
