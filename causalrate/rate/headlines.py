"""Three headline ratings per system, kept apart (METHOD §6.5): robustness, bias, accuracy.

- robustness — the weakest link: the worst of the system's robustness-family levels (ape, ape_last,
  recency, ape_worst, failure rate) on any perturbation. A model that collapses under one perturbation,
  or at the newest point, is rated by that collapse, not by its average;
- bias — the weakest link likewise over the bias-family rows (WRS and bias scores, perturbed inputs);
- accuracy — the mean of its clean-input accuracy levels, re-tiered (accuracy is not a worst case).

Rows on which every compared system has the same raw value carry no information and are left out
(undefined rows too). Each weakest-link headline names the row that set it (`cause`), in words and on
the absolute scale's basis. The absolute headline follows the same rule on absolute levels. `overall`
is the robustness headline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalrate.rate.absolute import ABSOLUTE_LEVELS, scale_of
from causalrate.rate.binning import bin_ratings
from causalrate.rate.ratings import RatingSettings
from causalrate.rate.tiers import tier_ratings
from causalrate.score.scores import HEADLINE_FAMILIES, SCORES

HEADLINES = {
    "robustness": "robustness to perturbations, that is how much perturbed inputs change its error, and its failures",
    "bias": "bias, that is how much its errors differ between industries or companies",
    "accuracy": "accuracy on clean inputs",
}
WEAKEST_LINK = ("robustness", "bias")  # the others are a mean of levels


def headline_rows(rated: pd.DataFrame, family: str, *, control: str) -> pd.DataFrame:
    """The rating rows a headline is built from: its family's, defined, and informative — a (score,
    perturbation) on which every compared system has the same raw value (and none is insufficient) tells
    them apart no better than leaving it out. With a single system every defined row is kept. Only the
    headline families have headline rows: a score of another family (a plugin's "diagnostic") joins none."""
    if family not in HEADLINE_FAMILIES:
        raise ValueError(f"no headline {family!r}; the headlines are {', '.join(HEADLINE_FAMILIES)}")
    in_family = rated["score"].map(lambda s: SCORES.get(s).family) == family
    on_control = rated["perturbation"] == control
    where = on_control if family == "accuracy" else (~on_control if family == "bias" else True)
    rows = rated[in_family & where & rated["display"].ne("—")]
    if rows["system"].nunique() < 2:
        return rows
    key = ["score", "perturbation"]
    spread = rows.groupby(key)["raw"].transform(lambda v: np.nanmax(v) - np.nanmin(v) if v.notna().any() else 0.0)
    failed = rows.groupby(key)["insufficient"].transform("any")
    return rows[(spread > 0) | failed | rows["raw"].isna()]


def robustness_rows(rated: pd.DataFrame, *, control: str) -> pd.DataFrame:
    return headline_rows(rated, "robustness", control=control)


@dataclass(frozen=True)
class Cause:
    """The row that set a weakest-link headline."""

    perturbation: str
    score: str
    raw: float
    quantity: float  # the raw value on the absolute scale's basis (NaN: no basis)
    insufficient: bool
    text: str

    def record(self) -> dict:
        def number(x: float) -> float | None:
            return float(f"{x:.10g}") if np.isfinite(x) else None

        return {
            "perturbation": self.perturbation,
            "score": self.score,
            "raw": number(self.raw),
            "quantity": number(self.quantity),
            "insufficient": self.insufficient,
            "text": self.text,
        }


def headline_ratings(
    rated: pd.DataFrame,
    *,
    settings: RatingSettings,
    control: str,
    descriptions: dict[str, str] | None = None,
    stability: Mapping[str, float] | None = None,
) -> dict[str, dict[str, dict]]:
    """{system: {family: H}}, H = rating, absolute_rating, meaning, stability, tied_with, scores, cause.

    rated: the rating rows (rate.ratings.COLUMNS); descriptions: perturbation id → what it does, in words.
    """
    systems = sorted(rated["system"].unique())
    out: dict[str, dict[str, dict]] = {s: {} for s in systems}
    for family, what in HEADLINES.items():
        rows = headline_rows(rated, family, control=control)
        if rows.empty:
            continue
        hopeless = rows.groupby("system")["insufficient"].all()
        names = list(hopeless.index)
        ties: list[list[int]] | None
        if family in WEAKEST_LINK:
            ratings = rows.groupby("system")["rating"].max().reindex(names).to_numpy()
            ties = [[j for j in range(len(names)) if j != i and ratings[j] == ratings[i]] for i in range(len(names))]
            absolute = rows.dropna(subset=["absolute_rating"]).groupby("system")["absolute_rating"].max()
        else:
            means = rows.groupby("system")["rating"].mean().reindex(names)
            ratings, ties = mean_levels(means.to_numpy(), hopeless.to_numpy(), settings)
            absolute = rows.dropna(subset=["absolute_rating"]).groupby("system")["absolute_rating"].mean()
        for k, system in enumerate(names):
            rating, lost = int(ratings[k]), bool(hopeless[system])
            # a system that was never measured is worst by rule, not tied with the worst measured one
            tied = [] if ties is None or lost else sorted(names[j] for j in ties[k] if not hopeless.iloc[j])
            abs_rating = _level(absolute.get(system), lost)
            cause = weakest(rows[rows["system"] == system], descriptions or {}) if family in WEAKEST_LINK else None
            # "the same level as": every measured system at this level (tied_with keeps the tie group)
            level = [n for j, n in enumerate(names) if j != k and ratings[j] == rating and not hopeless.iloc[j]]
            same = [] if lost else sorted(level)
            meaning = _meaning(what, rating, settings.levels, len(systems), same, lost, cause)
            published = settings.scale == "absolute" and abs_rating is not None
            if published:  # the number shown is the published scale's: the sentence starts with it
                meaning = f"{abs_rating} of {ABSOLUTE_LEVELS} on the published scale; relative to the others, {meaning}"
            out[system][family] = {
                "rating": abs_rating if published else rating,
                "absolute_rating": abs_rating,
                "meaning": meaning,
                "stability": (stability or {}).get(system) if family == "robustness" else None,
                "tied_with": tied,
                "scores": sorted(rows["score"].unique()),
                **({"cause": cause.record()} if cause else {}),
            }
    return out


def mean_levels(
    means: np.ndarray, hopeless: np.ndarray, settings: RatingSettings
) -> tuple[np.ndarray, list[list[int]] | None]:
    """A mean-type headline's level per system from its mean rating (the study's rule; under tiers equal means
    tie) and, under tiers, who it is tied with; a system whose rows are all insufficient is worst."""
    if settings.rule == "paper":
        ratings, ties = bin_ratings(means, levels=settings.levels), None
    else:
        ratings, ties = tier_ratings(means, None, levels=settings.levels)
    return np.where(hopeless, settings.levels, ratings), ties


def weakest(rows: pd.DataFrame, descriptions: dict[str, str]) -> Cause | None:
    """The system's row that sets its weakest-link headline: its worst level, and among rows at that level the
    largest on the absolute basis (insufficient ones first: a failure is never outranked)."""
    if rows.empty:
        return None
    quantity = rows["quantity"].to_numpy(dtype=float) if "quantity" in rows else np.full(len(rows), np.nan)
    order = np.lexsort(
        (-np.nan_to_num(rows["raw"].to_numpy(dtype=float), nan=np.inf), -np.nan_to_num(quantity, nan=-np.inf),
         -rows["insufficient"].to_numpy(dtype=int), -rows["rating"].to_numpy(dtype=int))
    )  # fmt: skip
    row, q = rows.iloc[order[0]], float(quantity[order[0]])
    return Cause(
        perturbation=row["perturbation"],
        score=row["score"],
        raw=float(row["raw"]),
        quantity=q,
        insufficient=bool(row["insufficient"]),
        text=cause_text(row["score"], row["perturbation"], float(row["raw"]), q, bool(row["insufficient"]),
                        descriptions.get(row["perturbation"], row["perturbation"])),
    )  # fmt: skip


def cause_text(score: str, perturbation: str, raw: float, quantity: float, insufficient: bool, described: str) -> str:
    """What a row says about the system, in words, on the absolute scale's basis where it has one."""
    label = SCORES.get(score).label or score
    where = f"{perturbation} ({described})" if described != perturbation else perturbation
    if insufficient:
        return f"too many of its forecasts failed to measure {label} on {where}; rated worst"
    basis = scale_of(score)
    if score == "failure_rate":
        return f"{100 * raw:.0f} % of its forecasts fail on {where}"
    if basis is not None and basis.basis == "naive_clean_error" and np.isfinite(quantity):
        context = {
            "ape_last": "when the newest input value is the corrupted one",
            "recency": "when a corrupted point is among the last input points",
            "ape_worst": "when the corrupted point is placed where it hurts it most",
        }.get(score, "")
        change = f"its error changes by {100 * quantity:.0f} % of the naive reference's clean error"
        return " ".join(part for part in (change, context, f"on {where}") if part)
    if basis is not None and basis.basis == "wrs_max" and np.isfinite(quantity):
        return f"{label} {raw:.3g} ({100 * quantity:.0f} % of its maximum) on {where}"
    if score.startswith("bias_"):
        return f"one group's mean error differs from its peers' by {100 * raw:.0f} % of the mean ({label}) on {where}"
    return f"{label} {raw:.3g} on {where}"


def _level(value: float | None, hopeless: bool) -> int | None:
    """An absolute headline level (a mean's halves round towards worse)."""
    if hopeless:
        return ABSOLUTE_LEVELS
    return None if value is None or not np.isfinite(value) else int(np.floor(value + 0.5))


def _meaning(what: str, rating: int, levels: int, n: int, tied: list[str], hopeless: bool, cause: Cause | None) -> str:
    if hopeless:
        return f"{rating} of {levels} on {what}: too many of its forecasts failed to rate it (worst level)."
    place = "the best level" if rating == 1 else "the worst level" if rating == levels else "a middle level"
    tie = f"; the same level as {', '.join(tied)}" if tied else ""
    head = f"{rating} of {levels} (1 = best, {levels} = worst of the {n} systems compared) on {what}: {place}"
    if cause is None:
        return f"{head}{tie} (the mean of its accuracy levels)." if "accuracy" in what else f"{head}{tie}."
    return f"{head}, set by its weakest result: {cause.text}{tie}."
