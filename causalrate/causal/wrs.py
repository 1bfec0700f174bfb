"""Weighted Rejection Score (METHOD §4): Welch t-tests between attribute groups, weighted by level."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import special

DEFAULT_LEVELS: tuple[tuple[float, float], ...] = ((0.95, 1.0), (0.70, 0.7), (0.60, 0.6))


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Welch's t statistic and its Welch–Satterthwaite degrees of freedom.

    Two groups of constant but different values give t = ±inf (a certain difference);
    two constant groups with the same value give t = 0.
    """
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff = a.mean() - b.mean()
    se2 = va + vb
    if se2 == 0:
        return (0.0 if diff == 0 else float(np.copysign(np.inf, diff))), float(a.size + b.size - 2)
    df = se2**2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return float(diff / np.sqrt(se2)), float(df)


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


def pair_weight(t: float, df: float, levels: Sequence[tuple[float, float]] = DEFAULT_LEVELS) -> float:
    """Sum of the weights of the confidence levels at which |t| exceeds the two-sided critical value."""
    return float(sum(w for c, w in levels if exceeds(np.array([t]), np.array([df]), c)[0]))


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
    samples: list[list[np.ndarray]], levels: Sequence[tuple[float, float]] = DEFAULT_LEVELS
) -> tuple[float, int]:
    """WRS of Grouping.samples(): Welch tests of every pair of groups inside each block."""
    tests = []
    for block in samples:
        kept = [v for v in block if v.size >= 2]
        tests.extend(welch(a, b) for a, b in combinations(kept, 2))
    if not tests:
        return 0.0, 0
    t, df = np.array(tests).T
    hits = [(w, exceeds(t, df, c)) for c, w in levels]  # all pairs at once, summed pair by pair as pair_weight does
    score = 0.0
    for k in range(len(tests)):
        score += float(sum(w for w, hit in hits if hit[k]))
    return score, len(tests)


def wrs_plans(table: pd.DataFrame, groups: list[str]) -> list[Grouping]:
    """The grouping of each WRS: industries; companies within an industry; terciles."""
    plans = [Grouping.of(table[f"{name}_tercile"].to_numpy(), attribute=name) for name in groups]
    if "industry" in table:
        plans.append(Grouping.of(table["industry"].to_numpy(), attribute="industry"))
    if "company" in table:
        within = table["industry"].to_numpy() if "industry" in table else None
        plans.append(Grouping.of(table["company"].to_numpy(), within, attribute="company"))
    return plans


def wrs_scores(outcomes: dict[str, pd.DataFrame], plans: list[Grouping]) -> pd.DataFrame:
    """WRS per system and perturbation for every grouping (wrs_plans)."""
    rows = []
    for system, wide in outcomes.items():
        for perturbation in wide.columns:
            values = wide[perturbation].to_numpy()
            for plan in plans:
                score, pairs = grouped_wrs(plan.samples(values))
                rows.append(
                    {
                        "system": system,
                        "perturbation": perturbation,
                        "attribute": plan.attribute,
                        "wrs": score,
                        "pairs": pairs,
                    }
                )
    return pd.DataFrame(rows, columns=["system", "perturbation", "attribute", "wrs", "pairs"])
