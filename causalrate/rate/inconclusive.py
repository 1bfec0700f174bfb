"""Rating adjustments that use the rigor layer: an inconclusive APE is not awarded the best level."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from causalrate.uncertainty.rigor import Rigor


def inconclusive_level(rating):
    """The level an inconclusive APE is reported at (int or array): its rating, but never the best (1)."""
    return np.maximum(rating, 2)


def withhold_inconclusive(rated: pd.DataFrame, rigor: Rigor) -> tuple[pd.DataFrame, Rigor]:
    """An APE with no effect detected and too little power is not awarded the best level; it is shown as
    '≥ k', k the level it is reported at (the true effect may be larger, so its level may be worse).
    Returns the rows and the rigor results with those levels and displays; neither input is changed."""
    rated, rows = rated.copy(), dict(rigor.rows)
    for i, key in enumerate(zip(rated["perturbation"], rated["score"], rated["system"], strict=True)):
        if rigor.row(key).inconclusive:
            level = int(inconclusive_level(int(rated["rating"].iat[i])))
            rows[key] = replace(rows[key], display=f"≥ {level}")
            rated.iloc[i, rated.columns.get_loc("rating")] = level
    return rated, replace(rigor, rows=rows)
