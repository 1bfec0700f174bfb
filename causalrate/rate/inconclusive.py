"""Rating adjustments that use the rigor layer: an inconclusive APE is not awarded the best level."""

from __future__ import annotations

import pandas as pd

from causalrate.causal.rigor import Rigor


def withhold_inconclusive(rated: pd.DataFrame, rigor: Rigor) -> pd.DataFrame:
    """An APE with no effect detected and too little power is not awarded the best level (shown as '≥ k')."""
    rated = rated.copy()
    for i, row in rated.iterrows():
        extra = rigor.rows.get((row["perturbation"], row["score"], row["system"]), {})
        if extra.get("inconclusive"):
            extra["display"] = f"≥ {row['rating']}"
            rated.loc[i, "rating"] = max(int(row["rating"]), 2)
    return rated
