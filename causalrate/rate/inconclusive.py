"""Rating adjustments that use the rigor layer: an inconclusive APE is not awarded the best level."""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalrate.causal.rigor import Rigor


def inconclusive_level(rating):
    """The level an inconclusive APE is reported at (int or array): its rating, but never the best (1)."""
    return np.maximum(rating, 2)


def withhold_inconclusive(rated: pd.DataFrame, rigor: Rigor) -> pd.DataFrame:
    """An APE with no effect detected and too little power is not awarded the best level; it is shown as
    '≥ k', k the level it is reported at (the true effect may be larger, so its level may be worse)."""
    rated = rated.copy()
    for i, row in rated.iterrows():
        extra = rigor.rows.get((row["perturbation"], row["score"], row["system"]), {})
        if extra.get("inconclusive"):
            level = int(inconclusive_level(int(row["rating"])))
            extra["display"] = f"≥ {level}"
            rated.loc[i, "rating"] = level
    return rated
