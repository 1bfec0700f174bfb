"""The default rating rule (METHOD §6, `rule: tiers`): ties by significance, tie groups into levels.

Two systems are tied on a score when their paired bootstrap difference is not significant after
Benjamini–Hochberg over all pairs (5 %). Systems, sorted best first, are cut into tie groups of
mutually indistinguishable systems; the groups — not the systems — are split into the L levels, so
no level between two occupied ones is empty and a system is never rated better than one whose
score is significantly better (the order of the levels follows the order of the scores).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from scipy import stats

ALPHA = 0.05


def paired_p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of 'a and b do not differ' from paired replicates (the same resamples)."""
    d = a - b
    d = d[np.isfinite(d)]
    if d.size == 0 or not d.any():
        return 1.0
    below, above = np.sum(d <= 0) + 1, np.sum(d >= 0) + 1
    return float(min(1.0, 2 * min(below, above) / (d.size + 1)))


def significance(key: np.ndarray, replicates: np.ndarray | None, *, alpha: float = ALPHA) -> np.ndarray:
    """[S, S] True where two systems differ significantly (BH over the pairs); exact values without replicates."""
    n = key.size
    sig = np.zeros((n, n), dtype=bool)
    pairs = list(combinations(range(n), 2))
    if not pairs:
        return sig
    if replicates is None:
        for i, j in pairs:
            sig[i, j] = sig[j, i] = key[i] != key[j]
        return sig
    p = np.array([paired_p_value(replicates[:, i], replicates[:, j]) for i, j in pairs])
    adjusted = stats.false_discovery_control(p, method="bh")
    for (i, j), q in zip(pairs, adjusted, strict=True):
        sig[i, j] = sig[j, i] = q < alpha
    return sig


def tie_groups(key: np.ndarray, sig: np.ndarray) -> list[list[int]]:
    """Indices cut into groups, best first: a system joins the current group unless it differs from a member."""
    groups: list[list[int]] = []
    for i in np.argsort(key, kind="stable"):
        if groups and not any(sig[i, j] for j in groups[-1]):
            groups[-1].append(int(i))
        else:
            groups.append([int(i)])
    return groups


def group_levels(n_groups: int, levels: int) -> np.ndarray:
    """Level of each tie group: 1..n when n ≤ L (no gaps), else L near-equal runs (as numpy's array_split)."""
    if n_groups <= levels:
        return np.arange(1, n_groups + 1)
    out = np.empty(n_groups, dtype=int)
    for level, members in enumerate(np.array_split(np.arange(n_groups), levels), start=1):
        out[members] = level
    return out


def tier_ratings(
    raw: np.ndarray, replicates: np.ndarray | None, *, levels: int, higher_is_better: bool = False
) -> tuple[np.ndarray, list[list[int]]]:
    """Ratings [S] (1 = best) and, per system, the systems it is statistically indistinguishable from.

    raw [S] holds only rateable (finite) values; replicates [B, S] are paired resamples of the
    same score (None: only equal values tie).
    """
    key = -np.asarray(raw, dtype=float) if higher_is_better else np.asarray(raw, dtype=float)
    reps = None if replicates is None else (-replicates if higher_is_better else replicates)
    sig = significance(key, reps)
    groups = tie_groups(key, sig)
    ratings = np.empty(key.size, dtype=int)
    for group, level in zip(groups, group_levels(len(groups), levels), strict=True):
        ratings[group] = level
    tied = [[j for j in range(key.size) if j != i and not sig[i, j]] for i in range(key.size)]
    return ratings, tied
