"""How sure a rating is: block-bootstrap intervals, power, inconclusive flags and rating stability.

Windows of one series overlap and are correlated, so the bootstrap resamples whole windows
within each series (each replicate keeps every series' window count). Replicates are count
vectors over windows, so every mean-type score of every replicate is one matrix product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from causalrate.causal.wrs import DEFAULT_LEVELS, Grouping, exceeds


def bootstrap_counts(series_index: np.ndarray, *, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """[B, W] counts: how often each window is drawn in each replicate (resampled within its series)."""
    counts = np.zeros((replicates, series_index.size))
    for s in np.unique(series_index):
        members = np.flatnonzero(series_index == s)
        counts[:, members] = rng.multinomial(members.size, np.full(members.size, 1 / members.size), size=replicates)
    return counts


def replicate_means(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """[B] weighted means of values [W] (NaN = missing, left out) under each replicate's counts; [B, k] for the
    k columns of values [W, k] at once."""
    valid = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):  # no [B, W] copy: missing values weigh 0 as zeros
        return (counts @ np.where(valid, values, 0.0)) / (counts @ valid.astype(float))


def interval(samples: np.ndarray, *, level: float = 0.95) -> tuple[float, float]:
    if not np.isfinite(samples).any():
        return np.nan, np.nan
    lo, hi = np.nanquantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class GroupedCounts:
    """The bootstrap counts with each group's windows side by side, built once per WRS grouping: every
    system's and perturbation's replicate WRS then slices a group's columns instead of copying them."""

    counts: np.ndarray  # [B, W]: columns block by block, group by group (both sorted), windows ascending
    blocks: list[list[tuple[np.ndarray, slice]]]  # per block: per group, its window ids and its columns

    @classmethod
    def of(cls, counts: np.ndarray, grouping: Grouping) -> GroupedCounts:
        blocks, start = [], 0
        for block in grouping.blocks:
            members = []
            for ids in block:
                members.append((ids, slice(start, start + ids.size)))
                start += ids.size
            blocks.append(members)
        order = [ids for block in grouping.blocks for ids in block]
        return cls(counts[:, np.concatenate(order)] if order else counts[:, :0], blocks)


def group_sums(grouped: GroupedCounts, values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per block: the weighted size, sum and sum of squares [groups, B] of every group with a finite value
    (window order), under each replicate's counts; what the replicate WRS and the bias gap are made of."""
    out = []
    for block in grouped.blocks:
        n, s1, s2 = [], [], []
        for ids, columns in block:
            v, c = values[ids], grouped.counts[:, columns]
            ok = np.isfinite(v)
            if not ok.all():
                if not ok.any():
                    continue
                v, c = v[ok], c[:, ok]
            n.append(c.sum(axis=1))
            s1.append(c @ v)
            s2.append(c @ v**2)
        width = grouped.counts.shape[0]
        out.append(tuple(np.array(m).reshape(len(n), width) for m in (n, s1, s2)))
    return out


def replicate_wrs(
    sums: list[tuple[np.ndarray, np.ndarray, np.ndarray]], levels: tuple[tuple[float, float], ...] = DEFAULT_LEVELS
) -> np.ndarray:
    """[B] WRS of each replicate from group_sums(): Welch tests on count-weighted group means and variances."""
    total = np.zeros(sums[0][0].shape[1] if sums else 0)
    for n, s1, s2 in sums:
        mean = s1 / np.maximum(n, 1)
        var = np.maximum(s2 - n * mean**2, 0) / np.maximum(n - 1, 1)
        pairs = [(i, j) for i in range(len(n)) for j in range(i + 1, len(n))]
        if not pairs:
            continue
        a, b = np.array(pairs).T
        na, ma, va, nb, mb, vb = n[a], mean[a], var[a], n[b], mean[b], var[b]
        sa, sb = va / np.maximum(na, 1), vb / np.maximum(nb, 1)
        se2 = sa + sb
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.abs(ma - mb) / np.sqrt(se2)
            df = se2**2 / (sa**2 / np.maximum(na - 1, 1) + sb**2 / np.maximum(nb - 1, 1))
        ok = (na >= 2) & (nb >= 2)
        t = np.where(se2 > 0, t, np.where(ma != mb, np.inf, 0.0))
        df = np.where(np.isfinite(df) & (df > 0), df, 1.0)
        # every pair × replicate at once per level; added pair by pair, level by level (fixed order)
        passed = [(weight, ok & exceeds(t, df, c_level)) for c_level, weight in levels]
        for k in range(len(pairs)):
            for weight, hits in passed:
                total += weight * hits[k]
    return total


@dataclass(frozen=True)
class Power:
    """The one-sided test of 'the perturbation does not increase the error', and its power."""

    p_value: float
    power: float  # achieved power against the minimal effect of interest
    n_min: float  # windows needed for 80 % power (normal approximation)
    min_effect: float
    detected: bool
    inconclusive: bool  # no effect detected, and too little power to call it absent


def power_analysis(
    differences: np.ndarray, *, standard_error: float, min_effect: float, alpha: float = 0.05, target: float = 0.8
) -> Power:
    """z = mean / se (se from the block bootstrap); power = 1 − Φ(z_{1−α} − δ/se); n_min = ((z_{1−α} + z_0.8) σ/δ)².

    σ is the per-window standard deviation implied by the bootstrap se (se·√n), which accounts
    for the correlation of overlapping windows.
    """
    d = differences[np.isfinite(differences)]
    n = d.size
    if n < 2 or not np.isfinite(standard_error) or min_effect <= 0:
        return Power(np.nan, np.nan, np.nan, min_effect, False, True)
    mean = float(d.mean())
    if standard_error == 0:
        p = 0.0 if mean > 0 else 1.0
        return Power(p, 1.0, 1.0, min_effect, p < alpha, False)
    z_alpha, z_power = special.ndtri(1 - alpha), special.ndtri(target)  # the normal quantile (norm.ppf)
    p = float(special.ndtr(-(mean / standard_error)))  # the normal upper tail (norm.sf)
    power = float(special.ndtr(-(z_alpha - min_effect / standard_error)))
    sigma = standard_error * np.sqrt(n)
    n_min = float(((z_alpha + z_power) * sigma / min_effect) ** 2)
    detected = p < alpha
    return Power(p, power, n_min, min_effect, detected, (not detected) and power < target)


def benjamini_hochberg(p: np.ndarray | list[float], *, axis: int = -1) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values along `axis`: scipy.stats.false_discovery_control(p, method="bh"),
    step for step (tested equal), here so that rating never imports scipy.stats (a quarter of a second)."""
    p = np.asarray(p, dtype=float)
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("p-values must lie in [0, 1]")
    if p.size <= 1 or p.shape[axis] <= 1:
        return p[()]
    p = np.moveaxis(p, axis, -1)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1) * (m / np.arange(1, m + 1))
    ranked = np.minimum.accumulate(ranked[..., ::-1], axis=-1)[..., ::-1]  # step-up: never above a larger p's
    adjusted = np.empty_like(ranked)
    np.put_along_axis(adjusted, order, ranked, axis=-1)
    return np.clip(np.moveaxis(adjusted, -1, axis), 0, 1)


def stability(replicate_ratings: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per system: the share of replicates [B, S] in which it keeps its observed rating [S]."""
    return (replicate_ratings == observed[None, :]).mean(axis=0)
