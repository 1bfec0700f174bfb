"""Bias with a magnitude (METHOD §4): the largest gap between one group's mean outcome and the rest.

bias = max over groups g of |mean R_g − mean R_rest| / mean R, where rest = the other groups of g's
comparison set (all other industries; for `company`, the other companies of g's industry). Unlike
WRS it does not saturate: a pair that already differs for an honest system still shows how much
more a biased one adds. Computed for many weightings at once (bootstrap count vectors), so the
observed value is the all-ones weighting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Cells:
    """Each window's comparison cell (block, group), numbered in sorted order of (block, group) as text.

    The same for every system and perturbation of a run, so it is built once per grouping.
    """

    code: np.ndarray  # per window: its cell
    block: np.ndarray  # per cell: its block's number (cells of one block are compared with each other)

    @classmethod
    def of(cls, groups: np.ndarray, within: np.ndarray | None = None) -> Cells:
        blocks = np.zeros(groups.size, dtype=int) if within is None else within
        cells, code = np.unique(np.c_[blocks, groups].astype(str), axis=0, return_inverse=True)
        block = np.unique(cells[:, 0], return_inverse=True)[1]
        return cls(code.ravel(), block.ravel())


def bias_gap(weights: np.ndarray, values: np.ndarray, cells: Cells) -> np.ndarray:
    """[B] relative bias gap under each weighting [B, W] of the windows' outcomes [W] (NaN = missing)."""
    valid = np.isfinite(values)
    v = np.where(valid, values, 0.0)
    present = np.flatnonzero(np.bincount(cells.code[valid], minlength=cells.block.size))  # cells with an outcome
    column = np.full(cells.block.size, -1)
    column[present] = np.arange(present.size)
    onehot = np.zeros((values.size, present.size))
    onehot[np.flatnonzero(valid), column[cells.code[valid]]] = 1.0
    sums, sizes = weights @ (onehot * v[:, None]), weights @ onehot  # [B, cells]: every group's sum and size at once
    gaps = np.full(weights.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        overall = np.abs((weights @ v) / (weights @ valid.astype(float)))
        block = cells.block[present]
        for b in np.unique(block):
            members = np.flatnonzero(block == b)
            if members.size < 2:
                continue  # nothing to compare with
            block_sum, block_size = sums[:, members].sum(axis=1), sizes[:, members].sum(axis=1)
            for g in members:
                mean_g = sums[:, g] / sizes[:, g]
                mean_rest = (block_sum - sums[:, g]) / (block_size - sizes[:, g])
                gaps = np.fmax(gaps, np.abs(mean_g - mean_rest) / overall)
    return gaps
