"""Weighted Rejection Score (METHOD §4): Welch t-tests (causal.welch) between attribute groups, weighted by level."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from causalrate.causal.welch import moments, welch

DEFAULT_LEVELS: tuple[tuple[float, float], ...] = ((0.95, 1.0), (0.70, 0.7), (0.60, 0.6))


def unit_scaled(values: np.ndarray) -> np.ndarray:
    """values / max |finite value|: Welch's t, the design effect and the bias gap do not change with the scale,
    and squares of outcomes as large as 1e160 (a model answering a huge constant) no longer overflow."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    return values / top if 0 < top < np.inf else values


def block_means(values: np.ndarray, series: np.ndarray, *, bandwidth: int) -> np.ndarray:
    """Means of non-overlapping runs of consecutive windows: each series' finite values (window order) cut
    into ⌊m / ℓ⌋ runs as equal as np.array_split makes them (none shorter than ℓ), ℓ = bandwidth capped at
    ⌊m / 2⌋ (as the bootstrap's blocks). Windows ℓ or more apart share no point, so the runs' means are
    nearly independent: what METHOD §4's dependence-robust test compares."""
    ok = np.isfinite(values)
    out: list[float] = []
    for s in np.unique(series[ok]):
        x = values[ok & (series == s)]
        length = max(1, min(bandwidth, x.size // 2))
        out.extend(float(run.mean()) for run in np.array_split(x, x.size // length))
    return np.array(out)


def design_effect(values: np.ndarray, series: np.ndarray, *, bandwidth: int) -> float:
    """n · Var(mean) / s² under the windows' dependence: how many dependent windows count as one.

    Var(mean) is the variance of the group's block_means over their number K (the means of non-overlapping
    runs of `bandwidth` windows), so the Welch test on n / D windows has the standard error of Welch's test
    on the K block means; with its df read from K (Grouping.df_sizes) it is that test, which holds its size
    on heavy-tailed outcomes and on groups that are one series (bench/calibration.py; the Newey–West
    estimate used before rejected 9–24 % at α = 5 % on single-series groups). Not floored at 1: a floor made
    the test conservative (0–2 % rejections with two blocks a group). values: the group's outcomes in window
    order (NaN: left out); series: their series. bandwidth 0 (the paper's per-window tests), fewer than two
    blocks, or block means without spread: 1.
    """
    ok = np.isfinite(values)
    n = int(ok.sum())
    if bandwidth < 1 or n < 2:
        return 1.0
    s2 = float(np.var(values[ok], ddof=1))
    means = block_means(values, series, bandwidth=bandwidth)
    spread = float(np.var(means, ddof=1)) if means.size >= 2 else 0.0
    if s2 == 0 or spread == 0:
        return 1.0
    return n * spread / means.size / s2


def exceeds(t: np.ndarray, df: np.ndarray, level: float) -> np.ndarray:
    """|t| > the two-sided critical value at `level`, elementwise; exactly `|t| > stats.t.ppf(q, df)`.

    The inverse t distribution is the costly part, so it is avoided: the t critical value is never
    below the normal one (below it, no test passes), and above it the tail probability (special.stdtr,
    7× cheaper) decides, except within 1e-9 of the boundary, where the quantile itself is evaluated
    (special.stdtrit, which is what stats.t.ppf computes).
    """
    t, df = np.broadcast_arrays(np.abs(np.asarray(t, dtype=float)), np.asarray(df, dtype=float))
    shape, t, df = t.shape, t.ravel(), df.ravel()
    q = (1 + level) / 2
    out = t > special.ndtri(q) - 1e-6
    idx = np.flatnonzero(out)
    tail = special.stdtr(df[idx], -t[idx])  # P(T > |t|): below 1 − q exactly when |t| is beyond the critical value
    decided = tail < 1 - q
    close = np.flatnonzero(np.abs(tail - (1 - q)) <= 1e-9 * (1 - q))
    decided[close] = t[idx[close]] > special.stdtrit(df[idx[close]], q)
    out[idx] = decided
    return out.reshape(shape)


def level_weighted(t: np.ndarray, df: np.ndarray, levels: Sequence[tuple[float, float]] = DEFAULT_LEVELS) -> np.ndarray:
    """A WRS from its tests (METHOD §4): over the pairs (axis 0; a further axis: replicates), the weights of
    the confidence levels at which |t| exceeds the two-sided critical value; an untested pair (t NaN) adds 0.

    Added pair by pair, level by level, in one fixed order, so that the observed WRS and a replicate that
    draws every window once are equal to the last bit (the tiers rule compares them for ties).
    """
    hits = [(w, exceeds(t, df, c)) for c, w in levels]  # all pairs (and replicates) at once per level
    total = np.zeros(np.shape(t)[1:])
    for pair in range(len(t)):
        for w, hit in hits:
            total += w * hit[pair]
    return total


@dataclass(frozen=True)
class Grouping:
    """One WRS comparison: the window ids of every group of every block (both sorted; pairs only inside a
    block), found once from the labels and reused by every system and perturbation (comparing text labels
    per call was a tenth of the 1M-row rating stage)."""

    attribute: str
    blocks: tuple[tuple[np.ndarray, ...], ...]

    @classmethod
    def of(cls, labels: np.ndarray, within: np.ndarray | None = None, attribute: str = "") -> Grouping:
        in_blocks = np.zeros(labels.size, dtype=int) if within is None else within
        blocks = []
        for block in sorted(set(in_blocks.tolist())):
            in_block = in_blocks == block
            names = sorted(set(labels[in_block].tolist()))
            blocks.append(tuple(np.flatnonzero(in_block & (labels == g)) for g in names))
        return cls(attribute, tuple(blocks))

    def samples(self, values: np.ndarray) -> list[list[np.ndarray]]:
        """Per block, the finite values of each group that has any (window order)."""
        out = []
        for block in self.blocks:
            groups = (values[ids] for ids in block)
            out.append([v for v in (g[np.isfinite(g)] for g in groups) if v.size])
        return out

    def single_series_note(self, series: np.ndarray | None) -> str | None:
        """The row's note when groups this WRS tests are each one series (METHOD §4): there the series and the
        group are the same unit, so a difference between groups is one between series. None: no such group."""
        if series is None:
            return None
        tested = [ids for block in self.blocks if len(block) >= 2 for ids in block if ids.size]
        single = sum(np.unique(series[ids]).size == 1 for ids in tested)
        if not single:
            return None
        if single == len(tested):
            counted = f"all {single} groups compared are a single series each"
        else:
            counted = f"{single} of the {len(tested)} groups compared " + (
                "is a single series" if single == 1 else "are a single series each"
            )
        return (
            counted
            + ": the series and the group are the same unit, so a difference there is between series, not between "
            "kinds of series"
        )

    def df_sizes(self, values: np.ndarray, series: np.ndarray | None, *, bandwidth: int) -> list[list[float]] | None:
        """The count Welch's df reads for every group samples() keeps, in its order: the number of its
        block_means (the independent units its variance is estimated from); None without series or bandwidth
        (the paper's tests: the windows themselves)."""
        if series is None or bandwidth < 1:
            return None
        out = []
        for block in self.blocks:
            kept = [ids for ids in block if np.isfinite(values[ids]).any()]
            out.append([float(block_means(values[ids], series[ids], bandwidth=bandwidth).size) for ids in kept])
        return out

    def design_effects(self, values: np.ndarray, series: np.ndarray | None, *, bandwidth: int) -> list[list[float]]:
        """design_effect of every group samples() keeps, in its order (all 1 without series or bandwidth)."""
        out = []
        for block in self.blocks:
            kept = [ids for ids in block if np.isfinite(values[ids]).any()]
            if series is None or bandwidth < 1:
                out.append([1.0] * len(kept))
            else:
                out.append([design_effect(values[ids], series[ids], bandwidth=bandwidth) for ids in kept])
        return out


def wrs(
    outcomes: np.ndarray,
    groups: np.ndarray,
    *,
    within: np.ndarray | None = None,
    levels: Sequence[tuple[float, float]] = DEFAULT_LEVELS,
) -> tuple[float, int]:
    """WRS over all unordered pairs of groups (only pairs inside the same `within` block, if given).

    Returns (score, number of pairs tested). Groups with fewer than 2 outcomes are skipped.
    """
    return grouped_wrs(Grouping.of(groups, within).samples(outcomes), levels)


def grouped_wrs(
    samples: list[list[np.ndarray]],
    levels: Sequence[tuple[float, float]] = DEFAULT_LEVELS,
    design_effects: list[list[float]] | None = None,
    df_sizes: list[list[float]] | None = None,
) -> tuple[float, int]:
    """WRS of Grouping.samples() and its number of tests: level_weighted(pair_tests())."""
    t, df = pair_tests(samples, design_effects, df_sizes)
    return float(level_weighted(t, df, levels)), t.size


def pair_tests(
    samples: list[list[np.ndarray]],
    design_effects: list[list[float]] | None = None,
    df_sizes: list[list[float]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Welch's (t, df) of every pair of groups inside each block of Grouping.samples() that the test's edge
    rule keeps (welch: both groups with two outcomes or more), block by block; each group's size divided by
    its design effect (Grouping.design_effects; None: independent windows, the paper) and its df read from
    its number of blocks (Grouping.df_sizes; None: from the effective size)."""
    ts, dfs = [np.empty(0)], [np.empty(0)]
    for k, block in enumerate(samples):
        if len(block) < 2:
            continue
        deff = np.asarray(design_effects[k] if design_effects is not None else np.ones(len(block)), dtype=float)
        mean, var, n = np.array([moments(x) for x in block]).T
        a, b = np.triu_indices(len(block), 1)
        if df_sizes is None:
            t, df = welch(mean[a], var[a], n[a], mean[b], var[b], n[b], deff[a], deff[b])
        else:
            size = np.asarray(df_sizes[k], dtype=float)
            t, df = welch(mean[a], var[a], n[a], mean[b], var[b], n[b], deff[a], deff[b], size[a], size[b])
        ts.append(t)
        dfs.append(df)
    t, df = np.concatenate(ts), np.concatenate(dfs)
    tested = ~np.isnan(t)
    return t[tested], df[tested]


@dataclass(frozen=True)
class Dimension:
    """A data attribute rated for bias (METHOD §4: every categorical attribute is one): its groups are compared
    all pairs with each other, or, nested in a `parent` attribute, only within each value of the parent."""

    attribute: str
    parent: str | None = None


def attribute_dimensions(
    table: pd.DataFrame, attributes: Sequence[str], nesting: Mapping[str, str] | None = None
) -> tuple[Dimension, ...]:
    """The bias dimensions of a window table's attributes (in the data's order).

    An attribute with a single value has nothing to compare; one that groups the windows exactly as an earlier
    attribute does is that dimension again (the quickstart's `sector` is its `industry`), so it is left out.
    Nesting: `nesting` (child → parent) as declared, else detected: A is nested in B when every value of A falls
    within one value of B and B has fewer values (the parent with the most values when several fit).
    """
    kept: list[str] = []
    codes: dict[str, np.ndarray] = {}
    for name in attributes:
        labels = table[name].astype(str).to_numpy()
        _, code = np.unique(labels, return_inverse=True)
        if code.max(initial=0) < 1 or any(_same_partition(code, codes[k]) for k in kept):
            continue
        kept.append(name)
        codes[name] = code
    out = []
    for name in kept:
        if nesting is not None:
            parent = nesting.get(name)
        else:
            parents = [p for p in kept if p != name and _nested(codes[name], codes[p])]
            parent = max(parents, key=lambda p: int(codes[p].max()), default=None)  # first of the finest
        out.append(Dimension(name, parent if parent in codes else None))
    return tuple(out)


def _pairs(a: np.ndarray, b: np.ndarray) -> int:
    """How many distinct (a, b) value pairs occur."""
    return int(np.unique(np.stack([a, b]), axis=1).shape[1])


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """a and b group the rows alike (one value of b for each of a, and as many values)."""
    return bool(a.max(initial=0) == b.max(initial=0) and _pairs(a, b) == a.max(initial=0) + 1)


def _nested(child: np.ndarray, parent: np.ndarray) -> bool:
    """Every value of `child` falls within one value of `parent`, which has fewer values."""
    return bool(parent.max(initial=0) < child.max(initial=0) and _pairs(child, parent) == child.max(initial=0) + 1)


def wrs_plans(table: pd.DataFrame, groups: list[str], dimensions: Sequence[Dimension] = ()) -> list[Grouping]:
    """The grouping of each WRS: terciles of window characteristics, then every bias dimension (a nested one
    compared within its parent's values, as companies within their industry)."""
    plans = [Grouping.of(table[f"{name}_tercile"].to_numpy(), attribute=name) for name in groups]
    for d in sorted(dimensions, key=lambda d: d.parent is not None):  # the flat ones first, as they always were
        within = None if d.parent is None else table[d.parent].to_numpy()
        plans.append(Grouping.of(table[d.attribute].to_numpy(), within, attribute=d.attribute))
    return plans


def wrs_scores(
    outcomes: dict[str, pd.DataFrame], plans: list[Grouping], *, series: np.ndarray | None = None, bandwidth: int = 0
) -> pd.DataFrame:
    """WRS per system and perturbation for every grouping (wrs_plans); with series and a bandwidth, on
    effective sample sizes (design_effect) with df from the number of blocks (Grouping.df_sizes), else the
    paper's tests on windows taken as independent. `note`: Grouping.single_series_note where groups are single
    series (with series given), else None."""
    rows = []
    notes = {plan.attribute: plan.single_series_note(series) for plan in plans}
    for system, wide in outcomes.items():
        for perturbation in wide.columns:
            values = unit_scaled(wide[perturbation].to_numpy())
            for plan in plans:
                deff = plan.design_effects(values, series, bandwidth=bandwidth)
                sizes = plan.df_sizes(values, series, bandwidth=bandwidth)
                score, pairs = grouped_wrs(plan.samples(values), design_effects=deff, df_sizes=sizes)
                rows.append(
                    {
                        "system": system,
                        "perturbation": perturbation,
                        "attribute": plan.attribute,
                        "wrs": score,
                        "pairs": pairs,
                        "note": notes[plan.attribute],
                    }
                )
    return pd.DataFrame(rows, columns=["system", "perturbation", "attribute", "wrs", "pairs", "note"])
