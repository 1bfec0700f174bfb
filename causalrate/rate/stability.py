"""Rating stability (METHOD §6): the share of replicates (bootstrap or draws) in which a rating is kept."""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalrate.causal.rigor import Rigor
from causalrate.causal.uncertainty import stability
from causalrate.rate.binning import bin_ratings
from causalrate.rate.headlines import robustness_rows
from causalrate.score.scores import SCORES


def add_stability(rigor: Rigor, rated: pd.DataFrame, *, levels: int, control: str) -> None:
    """Share of replicates in which each rating (and each overall rating) is kept, by rank-based binning."""
    for (score, p), per_system in rigor.replicates.items():
        _stability_from(rigor, rated, score, p, per_system, levels)
    bootstrap = {k: v for k, v in rigor.replicates.items() if k in rigor.bootstrap}
    rigor.overall_stability = _overall_stability(rated, bootstrap, levels, control)


def _stability_from(rigor: Rigor, rated: pd.DataFrame, score: str, p: str, per_system: dict, levels: int) -> None:
    observed = rated[(rated["score"] == score) & (rated["perturbation"] == p)].set_index("system")
    observed = observed[~observed["insufficient"] & observed["display"].ne("—")]
    systems = [s for s in observed.index if s in per_system]
    if not systems:
        return
    matrix = np.column_stack([per_system[s] for s in systems])
    higher = SCORES.get(score).higher_is_better
    ratings = np.vstack([bin_ratings(row, levels=levels, higher_is_better=higher) for row in matrix])
    shares = stability(ratings, observed.loc[systems, "rating"].to_numpy())
    for s, share in zip(systems, shares, strict=True):
        extra = rigor.rows.setdefault((p, score, s), {})
        extra["stability"] = float(share)


def _overall_stability(rated: pd.DataFrame, replicates: dict, levels: int, control: str) -> dict[str, float]:
    """Re-derive the overall rating in every bootstrap replicate (scores without replicates keep their rating)."""
    robust = robustness_rows(rated, control=control)
    systems = sorted(robust["system"].unique())
    if not systems:
        return {}
    b = next((len(v) for per in replicates.values() for v in per.values()), 0)
    if b == 0:
        return {}
    observed_means = robust.groupby("system")["rating"].mean().reindex(systems).to_numpy()
    observed = bin_ratings(observed_means, levels=levels)
    totals = np.zeros((b, len(systems)))
    for (score, p), group in robust.groupby(["score", "perturbation"]):
        per = replicates.get((score, p))
        ratings = group.set_index("system")["rating"].reindex(systems).to_numpy(dtype=float)
        if per is None or any(s not in per for s in systems):
            totals += ratings[None, :]
            continue
        matrix = np.column_stack([per[s] for s in systems])
        higher = SCORES.get(score).higher_is_better
        totals += np.vstack([bin_ratings(row, levels=levels, higher_is_better=higher) for row in matrix])
    counts = robust.groupby("system")["rating"].size().reindex(systems).to_numpy()
    replicate_overall = np.vstack([bin_ratings(row / counts, levels=levels) for row in totals])
    return {s: float(v) for s, v in zip(systems, stability(replicate_overall, observed), strict=True)}
