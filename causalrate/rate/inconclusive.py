"""Rating adjustments that use the rigor layer (METHOD §6.6, harm, not change): an APE whose interval lies
wholly below 0 improves the system; an APE that may still hide a harm of at least δ, tested with too little
power, is not awarded the best level."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from causalrate.uncertainty.rigor import Rigor


def inconclusive_level(rating):
    """The level an inconclusive APE is reported at (int or array): its rating, but never the best (1)."""
    return np.maximum(rating, 2)


def withhold_inconclusive(rated: pd.DataFrame, rigor: Rigor, *, naive_error: float) -> tuple[pd.DataFrame, Rigor]:
    """Harm, not change, on every APE row the rigor layer tested (signed interval and power):

    - its interval wholly below 0 and reaching a fall of at least δ: the perturbation significantly lowers the
      error, it `improves` the system: level 1, no practical effect (an improvement is never worse than no
      effect); a significant fall too small to reach δ is only "no practical effect" (level 1 by the margin);
    - no harm detected, power under 80 % and the interval reaching a harm ≥ δ (the row's margin): inconclusive,
      shown as '≥ k' (k its level, never the best) with `cannot_rule_out` the harm the interval leaves open
      (the interval's upper end, raw units; `cannot_rule_out_share`: as a share of naive_error, the naive
      reference's clean error, the APE's absolute basis); it stays in the weakest link. A row whose interval stays below
      δ is conclusive however low the power: no practical harm is left to find.

    Run before stability, which floors inconclusive rows in every replicate. Returns the rows and the rigor
    results with those levels, displays and inconclusive flags; neither input is changed.
    """
    rated, rows = rated.copy(), dict(rigor.rows)
    rated["cannot_rule_out"] = np.nan
    names = ("rating", "relevant", "improves", "cannot_rule_out")
    at = {name: rated.columns.get_loc(name) for name in names}
    for i, key in enumerate(zip(rated["perturbation"], rated["score"], rated["system"], strict=True)):
        row = rigor.row(key)
        if row.power is None or row.ape_true_interval is None or bool(rated["insufficient"].iat[i]):
            continue
        lo, hi = (float(v) for v in row.ape_true_interval)
        if hi < 0 and lo <= -float(rated["margin"].iat[i]):
            rated.iloc[i, at["improves"]] = True
            rated.iloc[i, at["relevant"]] = False
            rated.iloc[i, at["rating"]] = 1
        reaches = bool(np.isfinite(hi) and hi >= float(rated["margin"].iat[i]))
        inconclusive = row.power.inconclusive and reaches
        if inconclusive != row.power.inconclusive:
            row = replace(row, power=replace(row.power, inconclusive=inconclusive))
        if inconclusive:
            level = int(inconclusive_level(int(rated["rating"].iat[i])))
            row = replace(row, display=f"≥ {level}")
            rated.iloc[i, at["rating"]] = level
            rated.iloc[i, at["cannot_rule_out"]] = hi
            rated.iloc[i, at["relevant"]] = True  # a practical harm is not ruled out: it stays a weakest link
        rows[key] = row
    share = rated["cannot_rule_out"] / naive_error if naive_error > 0 else np.nan
    return rated.assign(cannot_rule_out_share=share), replace(rigor, rows=rows)
