"""Bias with a magnitude (METHOD §4): the largest gap between one group's mean outcome and the rest.

bias = max over groups g of |mean R_g − mean R_rest| / mean R, where rest = the other groups of g's
comparison set (all other industries; for `company`, the other companies of g's industry). Unlike
WRS it does not saturate: a pair that already differs for an honest system still shows how much
more a biased one adds. Computed for many weightings at once (bootstrap count vectors), so the
observed value is the all-ones weighting.
"""

from __future__ import annotations

import numpy as np

from causalrate.causal.resampling import GroupedCounts, group_sums
from causalrate.causal.wrs import Grouping


def bias_gap(sums: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """[B] relative bias gap under each weighting, from the groups' weighted sizes and sums per block
    (uncertainty.group_sums: the same sums the replicate WRS is made of)."""
    width = next((n.shape[1] for n, _, _ in sums), 0)
    size = sum((n.sum(axis=0) for n, _, _ in sums), np.zeros(width))
    total = sum((s1.sum(axis=0) for _, s1, _ in sums), np.zeros(width))
    gaps = np.full(width, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        overall = np.abs(total / size)
        for n, s1, _ in sums:
            if len(n) < 2:
                continue  # nothing to compare with
            block_sum, block_size = s1.sum(axis=0), n.sum(axis=0)
            for g in range(len(n)):
                mean_g = s1[g] / n[g]
                mean_rest = (block_sum - s1[g]) / (block_size - n[g])
                gap = np.abs(mean_g - mean_rest)
                # no gap is no bias, also where every error is 0 (a perfect oracle: 0 / 0)
                gaps = np.fmax(gaps, np.where(gap == 0, 0.0, gap / overall))
    return gaps


def observed_bias(values: np.ndarray, grouping: Grouping) -> float:
    """The bias gap of the windows' outcomes themselves (every window weighted once)."""
    return float(bias_gap(group_sums(GroupedCounts.of(np.ones((1, values.size)), grouping), values))[0])
