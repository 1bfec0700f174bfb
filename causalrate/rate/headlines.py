"""Three headline ratings per system, kept apart (METHOD §6.5): robustness, bias, accuracy.

- robustness — the weakest link: the worst of the system's levels on the robustness scores (ape, ape_last,
  recency, ape_worst, failure rate) on any perturbation, over the rows where its effect is practically
  relevant (≥ the score's margin δ). A model that collapses under one perturbation, or at the newest
  point, is rated by that collapse, not by its average; one with no relevant row is 1, "no practical
  effect on any perturbation tested (largest: …)";
- bias — the weakest link likewise over the bias rows (WRS and bias scores, perturbed inputs);
- accuracy — the mean of its clean-input accuracy levels, re-tiered (accuracy is not a worst case); WQL
  and coverage error join only for a system whose forecasts are distributions.

Rows on which every compared system has the same raw value carry no information and are left out
(undefined rows too). Each weakest-link headline names the row that set it (`cause`: among the rows at
its level, the largest effect on the absolute scale's basis). The absolute headline follows the same
rule on absolute levels. When every compared system has the same level the sentence says "all N systems
tied", never "best"; where the published scale's level is the worst, or two or more from the relative
one, the sentence starts with the published verdict (`verdict`). `overall` is the robustness headline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalrate.parameters import RatingSettings
from causalrate.rate.absolute import ABSOLUTE_LEVELS, scale_of
from causalrate.rate.binning import bin_ratings
from causalrate.rate.ratings import WEAKEST_LINK
from causalrate.rate.tiers import tier_ratings
from causalrate.score.scores import HEADLINE_NAMES, SCORES, Headline, bias_attributes, differ_by, joins_headline

HEADLINES: dict[Headline, str] = {
    "robustness": "robustness to perturbations, that is how much perturbed inputs change its error, and its failures",
    "bias": "bias, that is how much its errors differ between industries or companies",
    "accuracy": "accuracy on clean inputs",
}


def all_tied(headline: str, rating: int | None, n_tied: int, n_systems: int) -> bool:
    """Whether a headline is one group for all (METHOD §6.5: "all N systems tied", never "best"): every other
    system shares its level, and, for a weakest link, that level is the best: systems that each sit at a worse
    level are each that bad on some row, which is no tie."""
    shared = n_systems >= 2 and rating is not None and n_tied == n_systems - 1
    return shared and (headline not in WEAKEST_LINK or rating == 1)


def headline_rows(
    rated: pd.DataFrame, headline: Headline, *, control: str, point_systems: frozenset[str] = frozenset()
) -> pd.DataFrame:
    """The rating rows a headline is built from: those that join it (score.scores.joins_headline: the scores
    that declare it, on the rows their `rows` fact names), defined, and informative — a (score, perturbation) on
    which every compared system has the same raw value (and none is insufficient) tells them apart no better
    than leaving it out. With a single system every defined row is kept. A score that declares no headline (a
    plugin's default) joins none. A point forecast's rows of a score that is only for distributions
    (`point_forecasts`) are left out."""
    if headline not in HEADLINE_NAMES:
        raise ValueError(f"no headline {headline!r}; the headlines are {', '.join(HEADLINE_NAMES)}")
    rows = rated[joins_headline(rated, headline, control=control) & rated["display"].ne("—")]
    if rows["system"].nunique() >= 2:
        key = ["score", "perturbation"]
        spread = rows.groupby(key)["raw"].transform(lambda v: np.nanmax(v) - np.nanmin(v) if v.notna().any() else 0.0)
        failed = rows.groupby(key)["insufficient"].transform("any")
        rows = rows[(spread > 0) | failed | rows["raw"].isna()]
    for_points = np.array([SCORES.get(s).point_forecasts == "rated" for s in rows["score"]], dtype=bool)
    return rows[for_points | ~rows["system"].isin(point_systems).to_numpy(dtype=bool)]


def robustness_rows(rated: pd.DataFrame, *, control: str) -> pd.DataFrame:
    """The robustness headline's weakest-link rows: its headline rows where the effect is practically relevant."""
    rows = headline_rows(rated, "robustness", control=control)
    return rows[relevant(rows)]


def relevant(rows: pd.DataFrame) -> pd.Series:
    """Rows where the system's effect is practically relevant (≥ δ; insufficient rows always are)."""
    return rows["relevant"].astype(bool) if "relevant" in rows else pd.Series(True, index=rows.index)


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
    point_systems: frozenset[str] = frozenset(),
    recency_k: int | None = None,
) -> dict[str, dict[str, dict]]:
    """{system: {headline: H}}, H = rating, absolute_rating, meaning, stability, tied_with, scores, and for a
    weakest-link headline its cause (or, with no practically relevant row, the largest effect) and the
    published verdict where it must lead the sentence.

    rated: the rating rows (rate.ratings.COLUMNS); descriptions: perturbation id → what it does, in words;
    point_systems: the systems whose forecasts are points (WQL and coverage error stay out of their accuracy);
    recency_k: the study's causal.recency_k, so that a `recency` cause says how recent ("among the last 5 input
    points").
    """
    systems = sorted(rated["system"].unique())
    described = descriptions or {}
    out: dict[str, dict[str, dict]] = {s: {} for s in systems}
    for headline, what in HEADLINES.items():
        rows = headline_rows(rated, headline, control=control, point_systems=point_systems)
        if rows.empty:
            continue
        by = differ_by(bias_attributes(rows["score"])) if headline == "bias" else ""
        what = f"bias, that is how much its errors differ {by}" if by else what
        hopeless = rows.groupby("system")["insufficient"].all()
        names = list(hopeless.index)
        ties: list[list[int]] | None
        if headline in WEAKEST_LINK:
            counted = rows[relevant(rows)]
            # no practically relevant row: no practical effect, level 1 on both scales (where it has one)
            ratings = counted.groupby("system")["rating"].max().reindex(names).fillna(1).to_numpy(dtype=int)
            ties = [[j for j in range(len(names)) if j != i and ratings[j] == ratings[i]] for i in range(len(names))]
            scaled = rows.dropna(subset=["absolute_rating"])
            absolute = (
                scaled[relevant(scaled)].groupby("system")["absolute_rating"].max()
                .reindex(scaled["system"].unique()).fillna(1)
            )  # fmt: skip
        else:
            counted = rows
            means = rows.groupby("system")["rating"].mean().reindex(names)
            ratings, ties = mean_levels(means.to_numpy(), hopeless.to_numpy(), settings)
            absolute = rows.dropna(subset=["absolute_rating"]).groupby("system")["absolute_rating"].mean()
        measured = [s for s in names if not hopeless[s]]
        for k, system in enumerate(names):
            rating, lost = int(ratings[k]), bool(hopeless[system])
            # a system that was never measured is worst by rule, not tied with the worst measured one
            tied = [] if ties is None or lost else sorted(names[j] for j in ties[k] if not hopeless.iloc[j])
            abs_rating = _level(absolute.get(system), lost)
            mine, all_mine = counted[counted["system"] == system], rows[rows["system"] == system]
            cause = largest = None
            if headline in WEAKEST_LINK:
                cause = weakest(mine, described, by="rating", recency_k=recency_k)
                largest = None if cause else weakest(all_mine, described, by="quantity", recency_k=recency_k)
            everyone = not lost and all_tied(headline, rating, len(tied), len(measured))
            verdict = None
            if (
                headline in WEAKEST_LINK
                and abs_rating is not None
                and not lost
                and (abs_rating == ABSOLUTE_LEVELS or abs(abs_rating - rating) >= 2)
            ):
                found = weakest(
                    mine.dropna(subset=["absolute_rating"]), described, by="absolute_rating", recency_k=recency_k
                )
                verdict = published_verdict(abs_rating, found)
            # "the same level as": every measured system at this level (tied_with keeps the tie group)
            level = [n for j, n in enumerate(names) if j != k and ratings[j] == rating and not hopeless.iloc[j]]
            same = [] if lost else sorted(level)
            meaning = _meaning(what, rating, settings.levels, len(systems), same, lost, cause, largest, everyone)
            if verdict and cause and verdict.endswith(cause.text):  # one row sets both: named once
                meaning = meaning.replace(f"set by its weakest result: {cause.text}", "set by the same result")
            published = settings.scale == "absolute" and abs_rating is not None
            if published:  # the number shown is the published scale's: the sentence starts with it
                meaning = f"{abs_rating} of {ABSOLUTE_LEVELS} on the published scale; relative to the others, {meaning}"
            elif verdict:
                meaning = f"{verdict[:1].upper()}{verdict[1:]}; relative to the others, {meaning}"
            out[system][headline] = {
                "rating": abs_rating if published else rating,
                "absolute_rating": abs_rating,
                "meaning": meaning,
                "stability": (stability or {}).get(system) if headline == "robustness" else None,
                "tied_with": tied,
                "scores": sorted(all_mine["score"].unique()),
                **({"cause": cause.record()} if cause else {}),
                **({"largest": largest.record()} if largest else {}),
                **({"verdict": verdict} if verdict and not published else {}),
            }
    return out


def published_verdict(level: int, cause: Cause | None) -> str:
    """The published scale's verdict in words, with the row that set it: "on the published scale the worst
    level (3 of 3): its error rises …"."""
    place = "the best level" if level == 1 else "the worst level" if level == ABSOLUTE_LEVELS else "a middle level"
    text = f"on the published scale {place} ({level} of {ABSOLUTE_LEVELS})"
    return f"{text}: {cause.text}" if cause else text


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


def weakest(
    rows: pd.DataFrame, descriptions: dict[str, str], *, by: str = "rating", recency_k: int | None = None
) -> Cause | None:
    """The system's row that sets its weakest-link headline: its worst level (`by`: the relative "rating" or the
    "absolute_rating"; "quantity": no level, the largest effect), and among rows at that level the largest on
    the absolute basis (insufficient ones first: a failure is never outranked)."""
    if rows.empty:
        return None
    quantity = rows["quantity"].to_numpy(dtype=float) if "quantity" in rows else np.full(len(rows), np.nan)
    level = np.zeros(len(rows)) if by == "quantity" else rows[by].to_numpy(dtype=float)
    order = np.lexsort(
        (-np.nan_to_num(rows["raw"].to_numpy(dtype=float), nan=np.inf), -np.nan_to_num(quantity, nan=-np.inf),
         -rows["insufficient"].to_numpy(dtype=int), -level)
    )  # fmt: skip
    row, q = rows.iloc[order[0]], float(quantity[order[0]])
    return Cause(
        perturbation=row["perturbation"],
        score=row["score"],
        raw=float(row["raw"]),
        quantity=q,
        insufficient=bool(row["insufficient"]),
        text=cause_text(row["score"], row["perturbation"], float(row["raw"]), q, bool(row["insufficient"]),
                        described_as(row["perturbation"], descriptions), recency_k=recency_k),
    )  # fmt: skip


def described_as(perturbation: str, descriptions: Mapping[str, str]) -> str:
    """A perturbation in words: its description; a dose-response grid's row ("clip-dose", the area over its
    severities `clip-dose@1…5`) as the average over those severities of what the family does."""
    if perturbation in descriptions:
        return descriptions[perturbation]
    levels = sorted(int(k) for k in (p.rpartition("@")[2] for p in descriptions if p.rpartition("@")[0] == perturbation)
                    if k.isdigit())  # fmt: skip
    if not levels:
        return perturbation
    family = re.search(r"\(([^()]*)\)$", descriptions[f"{perturbation}@{levels[-1]}"])
    return f"averaged over severity {levels[0]}–{levels[-1]}" + (f" of {family.group(1)}" if family else "")


def plural(word: str) -> str:
    """An attribute's name as a plural noun (month → months, industry → industries)."""
    return word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"


def cause_text(
    score: str,
    perturbation: str,
    raw: float,
    quantity: float,
    insufficient: bool,
    described: str,
    *,
    recency_k: int | None = None,
) -> str:
    """What a row says about the system, in words, on the absolute scale's basis where it has one; a `recency`
    row says how recent (`recency_k`, the study's: "among the last 5 input points", not "the last input points")."""
    label = SCORES.get(score).label or score
    where = f"{perturbation} — {described}" if described != perturbation else perturbation
    if insufficient:
        return f"too many of its forecasts failed to measure {label} on {where}; rated worst"
    basis = scale_of(score)
    if score == "failure_rate":
        return f"{100 * raw:.0f} % of its forecasts fail on {where}"
    if basis is not None and basis.basis == "naive_clean_error" and np.isfinite(quantity):
        context = {
            "ape_last": "when the newest input value is the corrupted one",
            "recency": f"when a corrupted point is among the last {f'{recency_k} ' if recency_k else ''}input points",
            "ape_worst": "when the corrupted point is placed where it hurts it most",
        }.get(score, "")
        change = f"its error rises by {percent(quantity)} of the naive reference's clean error"
        return " ".join(part for part in (change, context, f"on {where}") if part)
    attribute = getattr(SCORES.get(score), "attribute", None)
    if basis is not None and basis.basis == "wrs_max" and np.isfinite(quantity) and attribute:
        wrs = f"WRS, a weighted count of group pairs that differ: {raw:.3g}, {100 * quantity:.0f} % of its maximum"
        return f"its errors differ between {plural(attribute)} ({wrs}) on {where}"
    if score.startswith("bias_") and attribute:
        return f"one {attribute}'s mean error differs from the others' by {100 * raw:.0f} % of the mean on {where}"
    return f"{label} {raw:.3g} on {where}"


def percent(share: float) -> str:
    """A share as a percentage a reader can tell from 0: whole percents, grouped by thousands (a collapse read
    "rises by 2073903 %"), or two significant digits below 1 %."""
    return f"{100 * share:,.0f} %" if abs(share) >= 0.01 or share == 0 else f"{100 * share:.2g} %"


def _level(value: float | None, hopeless: bool) -> int | None:
    """An absolute headline level (a mean's halves round towards worse)."""
    if hopeless:
        return ABSOLUTE_LEVELS
    return None if value is None or not np.isfinite(value) else int(np.floor(value + 0.5))


def _meaning(
    what: str,
    rating: int,
    levels: int,
    n: int,
    same: list[str],
    hopeless: bool,
    cause: Cause | None,
    largest: Cause | None,
    everyone: bool,
) -> str:
    if hopeless:
        return f"{rating} of {levels} on {what}: too many of its forecasts failed to rate it (worst level)."
    place = "the best level" if rating == 1 else "the worst level" if rating == levels else "a middle level"
    if everyone:  # one group for all: a tie, not a verdict
        place, same = f"all {len(same) + 1} systems tied", []
    tie = f"; the same level as {', '.join(same)}" if same else ""
    head = f"{rating} of {levels} (1 = best, {levels} = worst of the {n} systems compared) on {what}: {place}"
    if largest is not None:
        return f"{head}{tie}; no practical effect on any perturbation tested (largest: {largest.text})."
    if cause is None:
        return f"{head}{tie} (the mean of its accuracy levels)." if "accuracy" in what else f"{head}{tie}."
    return f"{head}, set by its weakest result: {cause.text}{tie}."
