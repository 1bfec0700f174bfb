"""Welch's two-sample t-test from sufficient statistics: the one kernel behind WRS, its replicates, the
Benjamini–Hochberg counts and the heterogeneity map's leaf merging.

Edge rule (METHOD §4, docs/method.md §4), the same at every caller:
- a group with fewer than two outcomes, or a non-finite mean or variance: no test (t, df and p are NaN;
  a WRS does not count the pair);
- no spread on either side: different means are a certain difference (t = ±∞, p = 0), equal means
  none (t = 0, p = 1), with df = n_a + n_b − 2 on the effective sizes;
- effective sizes below 2 (a large design effect): the df term of such a group is taken at n − 1 = 1.
"""

from __future__ import annotations

import numpy as np
from scipy import special

ArrayOrNumber = np.ndarray | float  # elementwise over arrays; a number is one test


def moments(x: np.ndarray) -> tuple[float, float, int]:
    """A sample's mean, variance (ddof 1) and size; NaN where too few values define them (no warning)."""
    n = x.size
    mean = float(x.mean()) if n else np.nan
    return mean, float(x.var(ddof=1)) if n > 1 else np.nan, n


def welch(
    mean_a: ArrayOrNumber,
    var_a: ArrayOrNumber,
    n_a: ArrayOrNumber,
    mean_b: ArrayOrNumber,
    var_b: ArrayOrNumber,
    n_b: ArrayOrNumber,
    deff_a: np.ndarray | float = 1.0,
    deff_b: np.ndarray | float = 1.0,
    size_a: np.ndarray | float | None = None,
    size_b: np.ndarray | float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Welch's t of a − b and its Welch–Satterthwaite df, elementwise, from each group's mean, variance
    (ddof 1) and count n of outcomes; deff: the group's design effect (its windows are dependent), so that
    it enters with its effective size n / deff in both; size: where given, the count the df term reads
    instead (the number of independent blocks the variance was estimated from). The edge rule is the
    module's."""
    with np.errstate(divide="ignore", invalid="ignore"):  # untested pairs (NaN below) may divide by 0
        na, nb = np.asarray(n_a, dtype=float) / deff_a, np.asarray(n_b, dtype=float) / deff_b
        ka = na if size_a is None else np.asarray(size_a, dtype=float)
        kb = nb if size_b is None else np.asarray(size_b, dtype=float)
        sa, sb = var_a / na, var_b / nb
        se2, diff = sa + sb, mean_a - mean_b
        t = np.where(se2 > 0, diff / np.sqrt(se2), np.where(diff == 0, 0.0, np.copysign(np.inf, diff)))
        df = se2**2 / (sa**2 / np.maximum(ka - 1, 1) + sb**2 / np.maximum(kb - 1, 1))
    df = np.where(se2 > 0, df, na + nb - 2)
    finite = np.isfinite(mean_a) & np.isfinite(mean_b) & np.isfinite(var_a) & np.isfinite(var_b)
    tested = (n_a >= 2) & (n_b >= 2) & finite
    return np.where(tested, t, np.nan), np.where(tested, df, np.nan)


def two_sided_p(t: ArrayOrNumber, df: ArrayOrNumber) -> np.ndarray:
    """P(|T_df| ≥ |t|): special.stdtr, which is what stats.t.sf computes (rating never imports scipy.stats)."""
    return 2 * special.stdtr(df, -np.abs(t))
