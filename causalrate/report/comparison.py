"""The comparison page and the run's index page, from ratings.json.

Robustness vs accuracy with the Pareto front and intervals, one small panel per system (never
overlaid polygons), every rating with its uncertainty markers, and groupings only where the
study declares two or more groups. Each system keeps one colour (figures.system_colours).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from causalrate.rate.absolute import scale_of
from causalrate.report import comparison_charts, figures
from causalrate.report.estimators import estimator, facts, label
from causalrate.report.figures import Figure
from causalrate.report.headlines import headlines
from causalrate.report.templating import fmt, level_class
from causalrate.run import RatingRow, RatingsDocument
from causalrate.score.scores import SCORES, joins_headline

ACCURACY_AXIS = "mase"  # the comparison's accuracy axis: this score's skill ratio against the naive reference


def radar_scores(doc: RatingsDocument) -> list[str]:
    """The radar's and the small multiples' axes (and the cards' table rows, in this order): the registered scores
    with radar set that this run rated on a perturbed input. Not every registered one: an electricity run's panels
    showed "WRS by industry", "APE, domain-confounded" … as empty axes, another study's dimensions."""
    rated = {r.score for r in doc.ratings if r.perturbation != doc.control}
    return [name for name, cls in SCORES.items() if cls.radar and name in rated]


def ratings_frame(doc: RatingsDocument) -> pd.DataFrame:
    """The rating rows as a table: perturbation, score, system, raw, rating."""
    columns = ["perturbation", "score", "system", "raw", "rating"]
    return pd.DataFrame([[getattr(r, c) for c in columns] for r in doc.ratings], columns=columns)


def normalised_scores(doc: RatingsDocument) -> dict[str, list[float]]:
    """Per system, each score in [0, 1] (1 = best of the compared systems), averaged over perturbations."""
    frame = ratings_frame(doc)
    frame = frame[frame["perturbation"] != doc.control]
    systems = doc.system_names
    out: dict[str, list[float]] = {s: [] for s in systems}
    for score in radar_scores(doc):
        per_system: dict[str, list[float]] = {s: [] for s in systems}
        for _, group in frame[frame["score"] == score].groupby("perturbation"):
            raw = group.set_index("system")["raw"].astype(float)
            lo, hi = raw.min(), raw.max()
            for system, value in raw.items():
                if not np.isfinite(value):
                    goodness = 0.0
                elif hi == lo:
                    goodness = 1.0
                else:
                    goodness = (value - lo) / (hi - lo)
                    goodness = goodness if facts(score).higher_is_better else 1 - goodness
                per_system[system].append(goodness)
        for system in systems:
            out[system].append(float(np.mean(per_system[system])) if per_system[system] else np.nan)
    return out


def radar_labels(doc: RatingsDocument) -> list[str]:
    return [label(s) for s in radar_scores(doc)]


def cell(row: RatingRow | None, levels: int) -> dict[str, Any] | None:
    """One rating with every uncertainty marker: '≥ k', ⚠ unstable, interval, ties, insufficient."""
    if row is None:
        return None
    interval, stability = row.interval, row.stability
    return {
        "rating": row.rating,
        "css": level_class(row.rating, levels),
        "shown": row.display or str(row.rating),
        "raw": fmt(row.raw),
        "interval": f"[{fmt(interval[0], 3)}, {fmt(interval[1], 3)}]" if interval and None not in interval else "",
        "stability": f"kept {100 * stability:.0f} %" if stability is not None else "",
        "unstable": stability is not None and stability < 0.8,
        "inconclusive": row.inconclusive is True,
        "insufficient": row.insufficient,
        "tied_with": list(row.tied_with),
        "absolute": row.absolute_rating,
        "note": row.note or "",
    }


def on_basis(row: RatingRow | None, quantity: float | None) -> dict[str, float] | None:
    """A rating row's value on its absolute basis (`quantity`) with its 95 % bounds scaled the same way."""
    if row is None or quantity is None or row.raw is None or not np.isfinite(quantity):
        return None
    per_raw = quantity / row.raw if row.raw else 1.0  # the basis is raw divided by a fixed reference
    bounds = [row.raw if b is None else b for b in (row.interval or [None, None])]
    return {"value": quantity, "lo": bounds[0] * per_raw, "hi": bounds[1] * per_raw}


def on_clean_error(score: str) -> bool:
    """A robustness score (one that joins that headline) published as a share of the naive reference's clean
    error."""
    scale = scale_of(score)
    return facts(score).headline == "robustness" and scale is not None and scale.basis == "naive_clean_error"


def robustness_point(doc: RatingsDocument, system: str) -> tuple[dict[str, float] | None, str]:
    """The robustness headline's own quantity: the effect of the row that set it (its cause, ape_last included)
    as a share of the naive reference's clean error; None with the reason when it has none on that basis."""
    h = doc.headlines.get(system, {}).get("robustness")
    cause = h.cause if h else None
    if cause is None:  # no row set it (no practical effect anywhere): its largest effect on the basis
        rows = [r for r in doc.rows_of(system) if r.perturbation != doc.control and on_clean_error(r.score)]
        largest = max((r for r in rows if r.quantity is not None), key=lambda r: r.quantity or 0.0, default=None)
        point = on_basis(largest, largest.quantity if largest else None)
        return point, "" if point else "it has no robustness effect on the naive reference's basis"
    if cause.insufficient or not on_clean_error(cause.score):
        return None, f"its robustness headline is set by its weakest result: {cause.text}"
    row = next((r for r in doc.rows_of(system) if (r.score, r.perturbation) == (cause.score, cause.perturbation)), None)
    point = on_basis(row, cause.quantity)
    return point, "" if point else "its weakest result has no value on the naive reference's basis"


def accuracy_point(doc: RatingsDocument, system: str) -> tuple[dict[str, float] | None, str]:
    """The accuracy skill ratio: its clean-input MASE over the naive reference's on the same windows."""
    row = next((r for r in doc.rows_of(system) if r.score == ACCURACY_AXIS and r.perturbation == doc.control), None)
    point = on_basis(row, row.quantity if row else None)
    return point, "" if point else f"no {ACCURACY_AXIS} skill ratio on clean input"


def scatter_points(doc: RatingsDocument) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Per system, the headlines' own quantities: the accuracy skill ratio (x) and the effect that set the
    robustness headline on its absolute basis (y), with 95 % bounds; and the systems left out, with why."""
    out, left_out = {}, {}
    for system in doc.system_names:
        (x, x_why), (y, y_why) = accuracy_point(doc, system), robustness_point(doc, system)
        if x is None or y is None:
            left_out[system] = x_why or y_why
            continue
        out[system] = {
            "x": x["value"],
            "x_lo": x["lo"],
            "x_hi": x["hi"],
            "y": y["value"],
            "y_lo": y["lo"],
            "y_hi": y["hi"],
        }
    return out, left_out


def comparison_figures(doc: RatingsDocument, normalised: dict[str, list[float]]) -> list[Figure]:
    colours, markers = figures.system_colours(doc.system_names), figures.system_markers(doc.system_names)
    out = []
    points, left_out = scatter_points(doc)
    if len(points) >= 2:
        missing = "; ".join(f"{name} is not placed: {why}" for name, why in left_out.items())
        out.append(
            Figure(
                "scatter",
                comparison_charts.robustness_accuracy(
                    points,
                    colours=colours,
                    markers=markers,
                    x_label="accuracy: MASE ÷ the naive reference's MASE, clean input",
                    y_label="robustness: weakest-link effect ÷ naive error",
                ),
                alt="Scatter of each system's accuracy skill ratio (clean-input MASE over the naive reference's) "
                "against the effect of the result that sets its robustness headline (its weakest link, as a share "
                "of the naive reference's clean error), with 95 % ranges and the Pareto front of systems no other "
                "system beats on both." + (f" {missing}." if missing else ""),
            )
        )
    out.append(
        Figure(
            "multiples",
            comparison_charts.small_multiples(radar_labels(doc), normalised, colours=colours),
            alt="One bar panel per system: each score averaged over the perturbations and scaled so that 1 is "
            "the best value among the compared systems and 0 the worst.",
        )
    )
    params = parameter_points(doc)
    if len(params) >= 2:
        out.append(
            Figure(
                "parameters",
                comparison_charts.scatter_parameters(params, levels=doc.levels, colours=colours, markers=markers),
                alt="Scatter plot of parameter count against mean robustness rating per system.",
            )
        )
    return out


def parameter_points(doc: RatingsDocument) -> dict[str, tuple[float, float]]:
    mean_robust = _mean_robustness(doc)
    return {s.name: (s.parameters, float(mean_robust.get(s.name, np.nan))) for s in doc.systems if s.parameters}


def _mean_robustness(doc: RatingsDocument) -> pd.Series:
    """Per system, the mean of its ratings on the rows that join the robustness headline (joins_headline: the
    robustness scores, the clean input's failure rate included) — not bias, confounding or other scores."""
    frame = ratings_frame(doc)
    return frame[joins_headline(frame, "robustness", control=doc.control)].groupby("system")["rating"].mean()


def groups(doc: RatingsDocument) -> list[dict[str, Any]]:
    """Mean ratings by modality, family and architecture — only where there are at least two groups."""
    mean_robust = _mean_robustness(doc)
    out = []
    for key, title in (("modality", "Modality"), ("family", "Family"), ("architecture", "Architecture")):
        by: dict[str, list[str]] = {}
        for s in doc.systems:
            by.setdefault(str(getattr(s, key) or "not declared"), []).append(s.name)
        if len(by) < 2:
            continue
        rows = [
            {
                "group": g,
                "systems": names,
                "mean_robustness": fmt(np.mean([mean_robust.get(n, np.nan) for n in names])),
                "mean_overall": fmt(np.mean([_or_nan(doc.overall.get(n)) for n in names])),
            }
            for g, names in sorted(by.items())
        ]
        out.append({"title": title, "rows": rows})
    return out


def _or_nan(x: float | None) -> float:
    return np.nan if x is None else x


def comparison_context(
    doc: RatingsDocument, slugs: dict[str, str], *, normalised: dict[str, list[float]] | None = None
) -> dict[str, Any]:
    systems = doc.system_names
    levels = doc.levels
    by_key = {(r.perturbation, r.score, r.system): r for r in doc.ratings}
    scores = list(dict.fromkeys([*radar_scores(doc), *(r.score for r in doc.ratings)]))
    perturbations = list(dict.fromkeys([*(p.id for p in doc.perturbations), *(k[0] for k in by_key)]))
    table = []
    for perturbation in perturbations:
        for score in scores:
            cells = [cell(by_key.get((perturbation, score, s)), levels) for s in systems]
            if any(cells):
                table.append(
                    {"perturbation": perturbation, "score": label(score), "estimator": estimator(score), "cells": cells}
                )
    heads = {s: {k: cell_of_headline(h, levels) for k, h in headlines(doc, s).items()} for s in systems}
    return {
        "doc": doc,
        "systems": doc.systems,
        "colours": figures.system_colours(systems),
        "slugs": slugs,
        "heads": heads,
        "table": table,
        "groups": groups(doc),
        "figures": comparison_figures(doc, normalised or normalised_scores(doc)),
        "scatter_left_out": scatter_points(doc)[1],
        "has_params": len(parameter_points(doc)) >= 2,
        "n_systems": len(systems),
        "levels": levels,
    }


def cell_of_headline(h: dict[str, Any], levels: int) -> dict[str, Any]:
    stability = h.get("stability")
    return {
        "rating": h.get("rating"),
        "css": level_class(h.get("rating"), levels),
        "stability": f"kept {100 * stability:.0f} %" if isinstance(stability, float) else "",
        "unstable": isinstance(stability, float) and stability < 0.8,
        "tied_with": list(h.get("tied_with") or []),
        "absolute": h.get("absolute_rating"),
    }
