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
    cells, cell = np.unique(np.c_[blocks[valid], groups[valid]].astype(str), axis=0, return_inverse=True)
    onehot = np.zeros((groups.size, len(cells)))
    onehot[np.flatnonzero(valid), cell.ravel()] = 1.0
    sums, sizes = w @ (onehot * v[:, None]), w @ onehot  # [B, cells]: every group's weighted sum and size at once
    gaps = np.full(weights.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        overall = np.abs((w @ v) / w.sum(axis=1))
        for block in np.unique(cells[:, 0]):
            members = np.flatnonzero(cells[:, 0] == block)
            if members.size < 2:
                continue  # nothing to compare with
            block_sum, block_size = sums[:, members].sum(axis=1), sizes[:, members].sum(axis=1)
            for g in members:
                mean_g = sums[:, g] / sizes[:, g]
                mean_rest = (block_sum - sums[:, g]) / (block_size - sizes[:, g])
                gaps = np.fmax(gaps, np.abs(mean_g - mean_rest) / overall)
    return gaps
