"""Three headline ratings per system, kept apart (METHOD §6.5): robustness, bias, accuracy.

Each is the mean of the system's ratings on its family's scores — robustness (APE-type scores and
failure rate, every perturbation), bias (WRS and bias scores, perturbed inputs), accuracy (accuracy
scores on the clean input) — re-binned by the study's rule over the systems (equal means tie).
Undefined rows are left out; a system whose every row is insufficient is worst. `overall` is the
robustness headline: bias is no longer averaged into it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalrate.rate.absolute import ABSOLUTE_LEVELS
from causalrate.rate.binning import bin_ratings
from causalrate.rate.ratings import RatingSettings
from causalrate.rate.tiers import tier_ratings
from causalrate.score.scores import SCORES

HEADLINES = {
    "robustness": "robustness to perturbations, that is how much perturbed inputs change its error, and its failures",
    "bias": "bias, that is how much its errors differ between industries or companies",
    "accuracy": "accuracy on clean inputs",
}


def headline_rows(rated: pd.DataFrame, family: str, *, control: str) -> pd.DataFrame:
    """The rating rows a headline is built from (undefined rows left out)."""
    in_family = rated["score"].map(lambda s: SCORES.get(s).family) == family
    on_control = rated["perturbation"] == control
    where = on_control if family == "accuracy" else (~on_control if family == "bias" else True)
    return rated[in_family & where & rated["display"].ne("—")]


def robustness_rows(rated: pd.DataFrame, *, control: str) -> pd.DataFrame:
    return headline_rows(rated, "robustness", control=control)


def headline_ratings(
    rated: pd.DataFrame, *, settings: RatingSettings, control: str, stability: dict[str, float] | None = None
) -> dict[str, dict[str, dict]]:
    """{system: {family: H}}, H = rating, absolute_rating, meaning, stability, tied_with, scores (INTERFACES)."""
    systems = sorted(rated["system"].unique())
    out: dict[str, dict[str, dict]] = {s: {} for s in systems}
    for family, what in HEADLINES.items():
        rows = headline_rows(rated, family, control=control)
        if rows.empty:
            continue
        means = rows.groupby("system")["rating"].mean()
        hopeless = rows.groupby("system")["insufficient"].all()
        names = list(means.index)
        ratings, ties = headline_levels(means.to_numpy(), hopeless.to_numpy(), settings)
        absolute = rows.dropna(subset=["absolute_rating"]).groupby("system")["absolute_rating"].mean()
        for k, system in enumerate(names):
            rating = int(ratings[k])
            tied = [] if ties is None or hopeless[system] else sorted(names[j] for j in ties[k])
            abs_rating = _level(absolute.get(system), hopeless[system])
            out[system][family] = {
                "rating": abs_rating if settings.scale == "absolute" and abs_rating is not None else rating,
                "absolute_rating": abs_rating,
                "meaning": _meaning(what, rating, settings.levels, len(systems), tied, ratings, bool(hopeless[system])),
                "stability": (stability or {}).get(system) if family == "robustness" else None,
                "tied_with": tied,
                "scores": sorted(rows["score"].unique()),
            }
    return out


def headline_levels(
    means: np.ndarray, hopeless: np.ndarray, settings: RatingSettings
) -> tuple[np.ndarray, list[list[int]] | None]:
    """A headline's level per system from its mean rating (the study's rule; under tiers equal means tie) and,
    under tiers, who it is tied with; a system whose rows are all insufficient is worst."""
    if settings.rule == "paper":
        ratings, ties = bin_ratings(means, levels=settings.levels), None
    else:
        ratings, ties = tier_ratings(means, None, levels=settings.levels)
    return np.where(hopeless, settings.levels, ratings), ties


def _level(mean: float | None, hopeless: bool) -> int | None:
    """A mean absolute rating as a level (halves round towards worse)."""
    if hopeless:
        return ABSOLUTE_LEVELS
    return None if mean is None or not np.isfinite(mean) else int(np.floor(mean + 0.5))


def _meaning(what: str, rating: int, levels: int, n: int, tied: list[str], all_ratings, hopeless: bool) -> str:
    if hopeless:
        return f"{rating} of {levels} on {what}: too many of its forecasts failed to rate it (worst level)."
    occupied = sorted(set(int(r) for r in all_ratings))
    place = (
        "the best level reached"
        if rating == occupied[0]
        else "the worst level reached"
        if rating == occupied[-1]
        else "in between"
    )
    tie = f"; tied with {', '.join(tied)} (same mean rating)" if tied else ""
    return f"{rating} of {levels} (1 = best) on {what}: {place} among the {n} systems compared{tie}."
