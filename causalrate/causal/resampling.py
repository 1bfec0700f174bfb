"""How sure a rating is: block-bootstrap intervals, power, inconclusive flags and rating stability.

Windows of one series overlap (with n + d = 100 and stride 2, neighbours share 98 points), so their
outcomes are dependent. The one resampler of the project is a circular block bootstrap within each
series (block_counts): blocks of consecutive windows, as long as the run of windows that share a point
with a given one, so a replicate keeps that dependence; each replicate keeps every series' window count.
Replicates are count vectors over windows, so every mean-type score of every replicate is one matrix
product. With few blocks per series a block bootstrap's spread is too small (measured in
bench/calibration.py: 0.6–0.8 of the true standard error), so mean replicates are widened about the
observed mean by one study-wide factor (small_sample_factor) before any interval, tie, power or
stability figure reads them.
A mean's interval (Resamples.intervals): with SERIES_MIN or more series, the t interval over the series
(series_interval: every series is an independent unit, whatever its windows' dependence); a block
bootstrap cannot see what varies more slowly than a series is long (a t(3) shock that widens 40 windows'
forecast spread, a level that wanders near a unit root: bench/calibration.py measured its sd at 0.4–0.6 of
the true one there, coverage 0.75–0.86). With fewer series, the studentized block-bootstrap interval
(studentized_interval), which corrects the one-sided misses of a skewed mean's percentile interval.
Why not the `arch` package (8.x, read for this): its block bootstraps resample one array as one series and
re-evaluate a function per replicate; here blocks stay within each of many series, one [B, W] count matrix
serves every score and system as matrix products (paired replicates), and its BCa jackknife leaves out single
observations, not blocks. Its Politis–White block length would not help either: the block is already the
dependence run, capped at half a series. The algorithm is the published one; the resampler stays this one kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from causalrate.causal.welch import welch
from causalrate.causal.wrs import DEFAULT_LEVELS, Grouping, level_weighted


def dependence_block(*, input_length: int, horizon: int, stride: int) -> int:
    """Windows in a run that shares a point with its first one: ⌈(n + d) / stride⌉ (METHOD §6.6)."""
    return max(1, math.ceil((input_length + horizon) / stride))


def block_counts(series_index: np.ndarray, *, block: int, bootstrap_size: int, rng: np.random.Generator) -> np.ndarray:
    """[B, W] counts, B = bootstrap_size: how often each window is drawn in each replicate of a circular block
    bootstrap.

    Per series of m windows (window ids ascending in time), ⌈m / ℓ⌉ blocks of ℓ consecutive windows start
    at uniform positions, wrapping round the series' end, and are cut to m windows. ℓ = block, capped at
    ⌊m / 2⌋ so a replicate holds at least two blocks (one block as long as the series would only rotate it:
    every replicate the same sample). Circular blocks weigh every window equally, so the replicates are
    centred on the observed mean. block = 1 is the per-window (independent) bootstrap.
    """
    counts = np.zeros((bootstrap_size, series_index.size))
    for s in np.unique(series_index):
        members = np.flatnonzero(series_index == s)
        m = members.size
        length = max(1, min(block, m // 2))
        k = -(-m // length)
        starts = rng.integers(0, m, size=(bootstrap_size, k))
        drawn = ((starts[:, :, None] + np.arange(length)) % m).reshape(bootstrap_size, k * length)[:, :m]
        flat = (drawn + (np.arange(bootstrap_size) * m)[:, None]).ravel()
        counts[:, members] = np.bincount(flat, minlength=bootstrap_size * m).reshape(bootstrap_size, m)
    return counts


SERIES_MIN = 4  # series with data from which a mean's interval is the t interval over series


def series_interval(values: np.ndarray, series: np.ndarray, *, level: float = 0.95) -> tuple[float, float] | None:
    """The t interval over series of the mean of values [W] (NaN left out), series [W] each window's series:
    m ± h, h = t_{S−1, (1+level)/2} · se, se² = S/(S−1) · Σ_i (n_i/N)² (m_i − m)² (the cluster-robust variance
    of a window mean with every series a cluster, CR1; Cameron & Miller 2015; t with S − 1 df as Ibragimov &
    Müller 2010), m_i and n_i series i's mean and windows, N = Σ n_i, m the window mean. Series are
    independent, so this holds whatever the dependence within a series and however slowly it decays; where
    series differ in their true means it is conservative. A mean of positive values (an error: SMAPE, MASE,
    CRPS) gets the same interval on the log scale, [m·e^{−h/m}, m·e^{h/m}] (se/m the delta-method se of log m):
    it stays above 0 and reaches further up, where a right-skewed mean misses (bench/calibration.py). None
    with fewer than SERIES_MIN series, or no spread between them (the block-bootstrap interval then)."""
    ok = np.isfinite(values)
    ids, unit = np.unique(series[ok], return_inverse=True)
    s = ids.size
    if s < SERIES_MIN:
        return None
    n = np.bincount(unit, minlength=s).astype(float)
    sums = np.bincount(unit, weights=values[ok], minlength=s)
    m = sums.sum() / n.sum()
    se = math.sqrt(s / (s - 1) * float(np.sum((n / n.sum() * (sums / n - m)) ** 2)))
    if not se > 0:
        return None
    half = float(special.stdtrit(s - 1, (1 + level) / 2)) * se
    if np.all(values[ok] > 0):
        return float(m * math.exp(-half / m)), float(m * math.exp(half / m))
    return float(m - half), float(m + half)


def studentized_interval(
    observed: float, sd: float, replicates: np.ndarray, replicate_sds: np.ndarray, *, level: float = 0.95
) -> tuple[float, float]:
    """The studentized (bootstrap-t) interval of a mean (Efron & Tibshirani 1993, §12.5; Hall 1992):
    [m − t*_{(1+level)/2}·s, m − t*_{(1−level)/2}·s] with t* = (m* − m) / s* over the replicates, m the
    observed mean, s its sample sd and s* a replicate's. A mean of skewed, heavy-tailed values is low in a
    sample that lacks the tail, and so is that sample's sd: t* carries that link, so the interval reaches
    further towards the tail than the percentile interval, which misses on that side. s's constant factors
    (1/√n, the windows' design effect) cancel between t* and the interval. Replicates whose sd is 0 are left
    out; where none is left (no spread at all) the percentile interval. It contains the observed mean."""
    ok = np.isfinite(replicates) & np.isfinite(replicate_sds) & (replicate_sds > 0)
    if not (np.isfinite(observed) and np.isfinite(sd) and sd > 0 and ok.any()):
        return interval(replicates[np.isfinite(replicates)], level=level)
    t = (replicates[ok] - observed) / replicate_sds[ok]
    low, high = np.quantile(t, [(1 - level) / 2, (1 + level) / 2])
    return float(min(observed - high * sd, observed)), float(max(observed - low * sd, observed))


def small_sample_factor(series_index: np.ndarray, *, block: int, level: float = 0.95) -> float:
    """How much wider than the circular block bootstrap's spread an interval must be: t_{K−1} / z at `level`
    (K blocks in all: few blocks, few degrees of freedom) over √(1 − Σ_s ℓ_s / W) (a circular block bootstrap's
    variance shrinks by about ℓ/m per series of m windows and blocks of ℓ). 1 for the per-window bootstrap.
    bench/calibration.py: with it, 95 % intervals of a mean cover 92–95 % on overlapping AR(1) windows
    (without, 70–87 %)."""
    sizes = np.unique(series_index, return_counts=True)[1]
    lengths = np.maximum(1, np.minimum(block, sizes // 2))
    blocks = int(np.sum(-(-sizes // lengths)))
    shrink = 1.0 - lengths.sum() / sizes.sum()
    if block <= 1 or blocks < 2 or shrink <= 0:
        return 1.0
    q = 0.5 + level / 2
    return float(special.stdtrit(blocks - 1, q) / special.ndtri(q) / math.sqrt(shrink))


def replicate_means(counts: np.ndarray, values: np.ndarray, *, widen: float = 1.0) -> np.ndarray:
    """[B] weighted means of values [W] (NaN = missing, left out) under each replicate's counts; [B, k] for the
    k columns of values [W, k] at once. widen: their deviations from the observed mean are multiplied by it.
    The one kernel of every resampled mean (and of the replicate sds the studentized interval reads)."""
    valid = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):  # no [B, W] copy: missing values weigh 0 as zeros
        means = (counts @ np.where(valid, values, 0.0)) / (counts @ valid.astype(float))
        if widen == 1.0:
            return means
        observed = np.where(valid, values, 0.0).sum(axis=0) / valid.sum(axis=0)
    return observed + widen * (means - observed)


@dataclass(frozen=True)
class Resamples:
    """The run's one set of block-bootstrap replicates, shared by every score, system and the recency profile
    (so every comparison between systems is paired): counts [B, W], the widening of their means, and each
    window's series [W] (None: not known, every interval from the replicates)."""

    counts: np.ndarray
    widen: float = 1.0
    series: np.ndarray | None = None

    def means(self, values: np.ndarray) -> np.ndarray:
        return replicate_means(self.counts, values, widen=self.widen)

    def intervals(
        self, values: np.ndarray, means: np.ndarray | None = None, *, level: float = 0.95
    ) -> list[tuple[float, float]]:
        """The interval of the mean of values [W] ([(lo, hi)], one entry), or of each column of [W, k] (k
        entries): series_interval where the windows' series are known and there are enough of them, else
        studentized_interval, on the widened replicate means (means: self.means(values), when already made)
        and each replicate's sd, both from replicate_means (the sd from centred squares)."""
        wide = values.reshape(values.shape[0], -1)
        reps = (self.means(values) if means is None else means).reshape(self.counts.shape[0], -1)
        valid = np.isfinite(wide)
        with np.errstate(invalid="ignore", divide="ignore"):
            observed = np.where(valid, wide, 0.0).sum(axis=0) / valid.sum(axis=0)
            centred = wide - observed
            sd = np.sqrt(np.where(valid, centred**2, 0.0).sum(axis=0) / valid.sum(axis=0))
            shift = (reps - observed) / self.widen  # each replicate's own mean, before the widening
            sds = np.sqrt(np.maximum(replicate_means(self.counts, centred**2) - shift**2, 0.0))
        out = []
        for j in range(wide.shape[1]):
            by_series = None if self.series is None else series_interval(wide[:, j], self.series, level=level)
            if by_series is not None:
                out.append(by_series)
                continue
            lo, hi = studentized_interval(observed[j], sd[j], reps[:, j], sds[:, j], level=level)
            # a mean lies within its values' range: sparse values (a few non-zero windows) give replicates with
            # a tiny sd whose t* explode (an APE of 0.01 read [0, 2e7]); the range is the bound that holds
            if valid[:, j].any():
                lo, hi = max(lo, float(np.nanmin(wide[:, j]))), min(hi, float(np.nanmax(wide[:, j])))
            out.append((lo, hi))
        return out


def interval(samples: np.ndarray, *, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of replicates of a rated value (NaN replicates left out)."""
    if not np.isfinite(samples).any():
        return np.nan, np.nan
    lo, hi = np.nanquantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def folded(lo: float, hi: float) -> tuple[float, float]:
    """The interval of |x| from that of x: [0, max |end|] when it covers 0, else its ends' magnitudes in order.
    A score rated as |mean| gets the interval of the mean, folded, so the rated value lies inside it."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return np.nan, np.nan
    if lo <= 0 <= hi:
        return 0.0, float(max(-lo, hi))
    return float(min(abs(lo), abs(hi))), float(max(abs(lo), abs(hi)))


def bias_corrected_interval(observed: float, replicates: np.ndarray, *, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval moved by the bootstrap's bias estimate (mean replicate − observed), cut at 0.

    For statistics that are not means (WRS counts rejections, bias_<attr> is a largest gap): a resample
    duplicates windows, which shrinks within-group spread and lifts every replicate, so their plain
    percentiles can lie wholly above the observed value. Removing the estimated bias centres the interval
    on what is rated; the scores are non-negative, so it is cut at 0.
    """
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0 or not np.isfinite(observed):
        return np.nan, np.nan
    shift = float(finite.mean()) - observed
    lo, hi = interval(finite, level=level)
    return max(0.0, lo - shift), max(0.0, hi - shift)


def mean_interval(draws: np.ndarray, *, level: float = 0.95) -> tuple[float, float]:
    """The t interval of the mean of independent draws (the B observational draws): mean ± t·sd/√B."""
    d = draws[np.isfinite(draws)]
    if d.size < 2:
        return (float(d[0]), float(d[0])) if d.size else (np.nan, np.nan)
    half = float(special.stdtrit(d.size - 1, (1 + level) / 2)) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return float(d.mean()) - half, float(d.mean()) + half


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
        sizes, sums, squares = (np.array(m).reshape(len(n), width) for m in (n, s1, s2))
        out.append((sizes, sums, squares))
    return out


def replicate_wrs(
    sums: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    levels: tuple[tuple[float, float], ...] = DEFAULT_LEVELS,
    design_effects: list[list[float]] | None = None,
    df_sizes: list[list[float]] | None = None,
) -> np.ndarray:
    """[B] WRS of each replicate from group_sums(): level_weighted Welch tests (causal.welch) on count-weighted
    group means and variances, each group's size divided by its design effect and its df read from its
    number of blocks (Grouping.design_effects, Grouping.df_sizes, as the observed WRS), every pair × replicate
    at once."""
    width = sums[0][0].shape[1] if sums else 0
    ts, dfs = [np.empty((0, width))], [np.empty((0, width))]
    for k, (n, s1, s2) in enumerate(sums):
        mean = s1 / np.maximum(n, 1)
        var = np.maximum(s2 - n * mean**2, 0) / np.maximum(n - 1, 1)
        deff = np.asarray(design_effects[k] if design_effects is not None else np.ones(len(n)), dtype=float)[:, None]
        a, b = np.triu_indices(len(n), 1)
        if df_sizes is None:
            t, df = welch(mean[a], var[a], n[a], mean[b], var[b], n[b], deff[a], deff[b])
        else:
            size = np.asarray(df_sizes[k], dtype=float)[:, None]
            t, df = welch(mean[a], var[a], n[a], mean[b], var[b], n[b], deff[a], deff[b], size[a], size[b])
        ts.append(t)
        dfs.append(df)
    return level_weighted(np.concatenate(ts), np.concatenate(dfs), levels)


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
