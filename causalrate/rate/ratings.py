"""Rate every (perturbation, score) across systems, and the overall robustness rating (METHOD §6)."""

from __future__ import annotations

import pandas as pd

from causalrate.rate.binning import bin_ratings
from causalrate.score.scores import SCORES


def rate_scores(raw: pd.DataFrame, *, levels: int) -> pd.DataFrame:
    """raw: columns perturbation, score, system, raw → adds `rating` (1 = best within its group)."""
    parts = []
    for (_, score), group in raw.groupby(["perturbation", "score"], sort=True):
        higher = SCORES.get(score).higher_is_better
        rated = group.sort_values("system").assign(
            rating=lambda g, h=higher: bin_ratings(g["raw"].to_numpy(), levels=levels, higher_is_better=h)
        )
        parts.append(rated)
    return pd.concat(parts, ignore_index=True)[["perturbation", "score", "system", "raw", "rating"]]


def robustness_rows(rated: pd.DataFrame, *, control: str) -> pd.DataFrame:
    """The rating rows the overall robustness rating is built from: robustness scores, perturbations only."""
    return rated[(rated["perturbation"] != control) & rated["score"].map(lambda s: SCORES.get(s).robustness)]


def overall_ratings(rated: pd.DataFrame, *, levels: int, control: str) -> dict[str, int]:
    """Mean of each system's robustness ratings over the perturbations, re-binned the same way."""
    means = robustness_rows(rated, control=control).groupby("system", sort=True)["rating"].mean()
    if means.empty:
        return {}
    ratings = bin_ratings(means.to_numpy(), levels=levels)
    return {system: int(r) for system, r in zip(means.index, ratings, strict=True)}
