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


def levels_of(key: np.ndarray, sig: np.ndarray, levels: int) -> np.ndarray:
    """Level of every system [S] (1 = best) from its key and the significance matrix."""
    groups = tie_groups(key, sig)
    ratings = np.empty(key.size, dtype=int)
    for group, level in zip(groups, group_levels(len(groups), levels), strict=True):
        ratings[group] = level
    return ratings


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
    tied = [[j for j in range(key.size) if j != i and not sig[i, j]] for i in range(key.size)]
    return levels_of(key, sig, levels), tied


def translated_p_values(observed: float, d: np.ndarray) -> np.ndarray:
    """[B] paired_p_value of every replicate b, its test distribution taken as d moved to centre on d[b].

    A replicate has no resamples of its own; the observed paired differences d, shifted by
    d[b] − observed, stand in for them (the translation approximation of a double bootstrap). With
    d[b] = observed it is exactly paired_p_value(d).
    """
    finite = np.sort(d[np.isfinite(d)])
    if finite.size == 0 or not finite.any():
        return np.ones(d.size)
    threshold = observed - d  # d − observed + d[b] ≤ 0  ⇔  d ≤ observed − d[b]
    below = np.searchsorted(finite, threshold, side="right") + 1
    above = finite.size - np.searchsorted(finite, threshold, side="left") + 1
    p = np.minimum(1.0, 2 * np.minimum(below, above) / (finite.size + 1))
    return np.where(np.isfinite(threshold), p, 1.0)


def replicate_tier_ratings(
    raw: np.ndarray, replicates: np.ndarray, *, levels: int, higher_is_better: bool = False, alpha: float = ALPHA
) -> np.ndarray:
    """[B, S] the tiers rule re-run on every replicate: the replicate's values order the systems, each pair
    is tested on its translated paired differences (translated_p_values), BH over the pairs, tie groups,
    levels. A replicate equal to the observed values gives exactly tier_ratings."""
    key = -np.asarray(raw, dtype=float) if higher_is_better else np.asarray(raw, dtype=float)
    reps = -replicates if higher_is_better else np.asarray(replicates, dtype=float)
    n, b = key.size, reps.shape[0]
    pairs = list(combinations(range(n), 2))
    sig = np.zeros((b, n, n), dtype=bool)
    if pairs:
        p = np.column_stack([translated_p_values(key[i] - key[j], reps[:, i] - reps[:, j]) for i, j in pairs])
        differ = stats.false_discovery_control(p, axis=1, method="bh") < alpha
        first, second = (np.array(side) for side in zip(*pairs, strict=True))
        sig[:, first, second] = sig[:, second, first] = differ
    return np.vstack([levels_of(reps[r], sig[r], levels) for r in range(b)])
