"""The default rating rule (METHOD §6, `rule: tiers`): ordered groups of practically equal systems, as levels.

Two systems differ on a score when their paired difference is significant after Benjamini–Hochberg over
all pairs (5 %) AND larger than the score's margin δ (practical equivalence, Score.margin). The test
follows where the score's replicates come from (its `resampling` fact, PAIRED_TESTS): window-block
bootstrap replicates of the rated value get the bootstrap p-value; observational draws, whose *mean* is
the rated value, get a paired t-test (their standard error is sd/√B, not the spread of one draw).
Systems, sorted best first, are cut into ordered groups (tie_groups): the best opens the first group and
each next system joins the current group unless it differs from that group's FIRST member, so groups are
contiguous in the order, a better raw never gets a worse level and ties do not chain in whatever order
they happen to be found. The groups — not the systems — are positions on the L levels: the best group 1,
the worst group L, the others spread evenly between (group_levels), so "L" always means the worst of the
systems compared.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from causalrate.causal.resampling import benjamini_hochberg
from causalrate.causal.welch import two_sided_p

ALPHA = 0.05


def bootstrap_p_value(d: np.ndarray) -> float:
    """Two-sided p of 'no difference' from paired bootstrap replicates d = a − b of the rated value,
    2 · min(#{d ≤ 0} + 1, #{d ≥ 0} + 1) / (n + 1)."""
    d = d[np.isfinite(d)]
    if d.size == 0 or not d.any():
        return 1.0
    below, above = np.sum(d <= 0) + 1, np.sum(d >= 0) + 1
    return float(min(1.0, 2 * min(below, above) / (d.size + 1)))


def translated_bootstrap_p_values(observed: float, d: np.ndarray) -> np.ndarray:
    """[B] bootstrap_p_value of every replicate b, its test distribution taken as d moved to centre on d[b].

    A replicate has no resamples of its own; the observed paired differences d, shifted by
    d[b] − observed, stand in for them (the translation approximation of a double bootstrap). With
    d[b] = observed it is exactly bootstrap_p_value(d).
    """
    finite = np.sort(d[np.isfinite(d)])
    if finite.size == 0 or not finite.any():
        return np.ones(d.size)
    threshold = observed - d  # d − observed + d[b] ≤ 0  ⇔  d ≤ observed − d[b]
    below = np.searchsorted(finite, threshold, side="right") + 1
    above = finite.size - np.searchsorted(finite, threshold, side="left") + 1
    p = np.minimum(1.0, 2 * np.minimum(below, above) / (finite.size + 1))
    return np.where(np.isfinite(threshold), p, 1.0)


def t_test_p_value(d: np.ndarray) -> float:
    """Two-sided paired t-test p of 'mean d = 0' from per-draw differences d = a − b (NaN draws dropped):
    scipy's one-sample t on d, i.e. ttest_rel(a, b). Fewer than 2 finite draws: 1 (tied). No spread:
    0 when every d is the same non-zero value, 1 when all are 0."""
    finite = d[np.isfinite(d)]
    return float(_t_p(np.array([finite.mean() if finite.size else 0.0]), finite)[0])


def translated_t_test_p_values(observed: float, d: np.ndarray) -> np.ndarray:
    """[B] t_test_p_value re-run for every draw b as a replicate of the rated mean: the draws' sd kept,
    the mean moved to mean d + (d[b] − mean d)/√n (mean_replicates), i.e. t_b = t + (d[b] − mean d)/sd.
    A draw at the mean gets exactly t_test_p_value(d). `observed` is not needed: the draws' own mean is
    the centre of their test."""
    del observed
    d = np.asarray(d, dtype=float)
    finite = d[np.isfinite(d)]
    return _t_p(mean_replicates(finite.mean() if finite.size else 0.0, d), finite)


def mean_replicates(value: float | np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Draws [B, ...] turned into replicates of their mean (`value`, the rated one): value + (draw − mean
    draw)/√n, n the finite draws.

    One draw spreads √n times as widely as the mean of n draws, which is what is rated; re-rating a
    single draw would call two systems tied on the mean "different" in most draws.
    """
    n = np.maximum(np.sum(np.isfinite(draws), axis=0), 1)
    with warnings.catch_warnings():  # a system with no finite draw: its replicates stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return value + (draws - np.nanmean(draws, axis=0)) / np.sqrt(n)


def _t_p(means: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """Two-sided t p-values of the means [k] with the standard error and degrees of freedom of `finite`."""
    if finite.size < 2:
        return np.ones(means.size)
    se = float(np.std(finite, ddof=1)) / np.sqrt(finite.size)
    # no spread: as Welch's edge rule, a certain difference or none; else the one t tail (causal.welch)
    p = two_sided_p(means / se, finite.size - 1) if se > 0 else np.where(means != 0.0, 0.0, 1.0)
    return np.where(np.isfinite(means), p, 1.0)


@dataclass(frozen=True)
class PairedTest:
    """A two-sided test of 'two systems do not differ' on their paired replicate differences d = a − b:
    p_value(d); for stability (rate.stability) replicate_p_values(observed, d), the [B] p-values of each
    replicate re-tested, and replicate_values(raw [S], replicates [B, S]), the replicates as values of
    the rated score (the order the re-tiering sorts by)."""

    p_value: Callable[[np.ndarray], float]
    replicate_p_values: Callable[[float, np.ndarray], np.ndarray]
    replicate_values: Callable[[np.ndarray, np.ndarray], np.ndarray]


# a score's `resampling` fact (score.scores.Score) → the test its tiers use
PAIRED_TESTS: dict[str, PairedTest] = {
    "windows": PairedTest(bootstrap_p_value, translated_bootstrap_p_values, lambda raw, reps: reps),
    "draws": PairedTest(t_test_p_value, translated_t_test_p_values, mean_replicates),
}
BOOTSTRAP = PAIRED_TESTS["windows"]


def significance(
    key: np.ndarray, replicates: np.ndarray | None, *, test: PairedTest = BOOTSTRAP, alpha: float = ALPHA
) -> np.ndarray:
    """[S, S] True where two systems differ significantly by `test` (BH over the pairs); exact values
    without replicates."""
    n = key.size
    sig = np.zeros((n, n), dtype=bool)
    pairs = list(combinations(range(n), 2))
    if not pairs:
        return sig
    if replicates is None:
        for i, j in pairs:
            sig[i, j] = sig[j, i] = key[i] != key[j]
        return sig
    p = np.array([test.p_value(replicates[:, i] - replicates[:, j]) for i, j in pairs])
    adjusted = benjamini_hochberg(p)
    for (i, j), q in zip(pairs, adjusted, strict=True):
        sig[i, j] = sig[j, i] = q < alpha
    return sig


def practically_different(values: np.ndarray, sig: np.ndarray, margin: np.ndarray | float = 0.0) -> np.ndarray:
    """[..., S, S] True where two systems differ significantly (sig) AND by more than δ (METHOD §6.2): values
    [..., S] on the raw scale, margin δ per system [S] (a pair uses the larger) or one for all."""
    values = np.asarray(values, dtype=float)
    delta = np.broadcast_to(np.asarray(margin, dtype=float), values.shape[-1:])
    gap = np.abs(values[..., :, None] - values[..., None, :])
    with np.errstate(invalid="ignore"):
        return sig & (gap > np.maximum(delta[:, None], delta[None, :]))


def tie_groups(order: np.ndarray, differ: np.ndarray) -> list[list[int]]:
    """Indices taken best first (`order`, a stable argsort of the keys) cut into ordered groups: the best opens
    the first; each next joins the current group unless it differs (practically_different) from the group's
    first member, else it opens the next group."""
    groups: list[list[int]] = []
    for i in order:
        if groups and not differ[i, groups[-1][0]]:
            groups[-1].append(int(i))
        else:
            groups.append([int(i)])
    return groups


def group_levels(n_groups: int, levels: int) -> np.ndarray:
    """Level of each tie group, best first, as a position (METHOD §6.2): the best group 1, the worst L, the
    groups between spread evenly, 1 + round((g − 1)(L − 1)/(G − 1)) with halves rounded up; one group: 1.
    So L always means "the worst of the systems compared"; a middle level may stay empty."""
    if n_groups <= 1:
        return np.ones(n_groups, dtype=int)
    g = np.arange(n_groups)
    return 1 + np.floor(g * (levels - 1) / (n_groups - 1) + 0.5).astype(int)


def levels_of(order: np.ndarray, differ: np.ndarray, levels: int) -> np.ndarray:
    """Level of every system [S] (1 = best) from their order best first and which pairs differ."""
    groups = tie_groups(order, differ)
    ratings = np.empty(order.size, dtype=int)
    for group, level in zip(groups, group_levels(len(groups), levels), strict=True):
        ratings[group] = level
    return ratings


def resolution_warning(bootstrap_size: int, n_systems: int) -> str | None:
    """Too few bootstrap replicates to tell even one outlying system from the rest: the smallest bootstrap p is
    2/(B + 1), and one system unlike all S − 1 others is found only when its S − 1 pairs pass Benjamini–Hochberg
    over the S(S − 1)/2 pairs, 2/(B + 1) ≤ α(S − 1)/(S(S − 1)/2) = 2α/S, i.e. B ≥ S/α − 1."""
    if bootstrap_size <= 0 or n_systems < 3 or 2 / (bootstrap_size + 1) <= 2 * ALPHA / n_systems:
        return None
    need = math.ceil(n_systems / ALPHA - 1)
    return (
        f"rigor.bootstrap_size: {bootstrap_size} replicates are too few for {n_systems} systems: the smallest "
        f"bootstrap p-value, 2/{bootstrap_size + 1} = {2 / (bootstrap_size + 1):.3f}, cannot pass Benjamini–Hochberg "
        f"over the {n_systems * (n_systems - 1) // 2} pairs even for one system unlike all the others, so every "
        f"score would read its systems as tied; use at least {need}"
    )


def tier_ratings(
    raw: np.ndarray,
    replicates: np.ndarray | None,
    *,
    levels: int,
    higher_is_better: bool = False,
    test: PairedTest = BOOTSTRAP,
    margin: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, list[list[int]]]:
    """Ratings [S] (1 = best) and, per system, the other members of its group (the systems it is tied with).

    raw [S] holds only rateable (finite) values; replicates [B, S] are paired resamples of the
    same score (None: only equal values tie), tested by `test` (PAIRED_TESTS[the score's replicates]);
    margin: δ in the raw score's units (one, or per system).
    """
    key = -np.asarray(raw, dtype=float) if higher_is_better else np.asarray(raw, dtype=float)
    reps = None if replicates is None else (-replicates if higher_is_better else replicates)
    differ = practically_different(key, significance(key, reps, test=test), margin)
    groups = tie_groups(np.argsort(key, kind="stable"), differ)
    ratings = np.empty(key.size, dtype=int)
    tied: list[list[int]] = [[] for _ in range(key.size)]
    for group, level in zip(groups, group_levels(len(groups), levels), strict=True):
        ratings[group] = level
        for i in group:
            tied[i] = sorted(j for j in group if j != i)
    return ratings, tied


def replicate_tier_ratings(
    raw: np.ndarray,
    replicates: np.ndarray,
    *,
    levels: int,
    higher_is_better: bool = False,
    test: PairedTest = BOOTSTRAP,
    alpha: float = ALPHA,
    margin: np.ndarray | float = 0.0,
) -> np.ndarray:
    """[B, S] the tiers rule re-run on every replicate: the replicate's values (test.replicate_values) order
    the systems, each pair is re-tested on its translated paired differences (test.replicate_p_values), BH
    over the pairs, differs only beyond the margin δ on the replicate's values, ordered groups, levels. Under
    the bootstrap test a replicate equal to the observed values gives exactly tier_ratings."""
    key = -np.asarray(raw, dtype=float) if higher_is_better else np.asarray(raw, dtype=float)
    reps = -replicates if higher_is_better else np.asarray(replicates, dtype=float)
    n, b = key.size, reps.shape[0]
    pairs = list(combinations(range(n), 2))
    sig = np.zeros((b, n, n), dtype=bool)
    if pairs:
        p = np.column_stack([test.replicate_p_values(key[i] - key[j], reps[:, i] - reps[:, j]) for i, j in pairs])
        differ = benjamini_hochberg(p, axis=1) < alpha
        first, second = (np.array(side) for side in zip(*pairs, strict=True))
        sig[:, first, second] = sig[:, second, first] = differ
    values = test.replicate_values(key, reps)
    sig = practically_different(values, sig, margin)
    # a replicate's levels depend only on its order and which pairs differ, and replicates repeat few of
    # those: each distinct pattern is tiered once
    order = np.argsort(values, axis=1, kind="stable")
    patterns, inverse = np.unique(np.column_stack([order, sig.reshape(b, -1)]), axis=0, return_inverse=True)
    tiered = [levels_of(row[:n], row[n:].reshape(n, n).astype(bool), levels) for row in patterns]
    return np.vstack(tiered)[inverse.ravel()]
