"""The three headline ratings (robustness, bias, accuracy), read defensively from ratings.json.

A ratings.json with a `headlines` section is shown as it is. An older one (ratings-v2) has only
`overall` and the per-score rows, so the headlines are taken from them, and say so:
robustness = `overall`; bias = the worst WRS rating over the perturbations; accuracy = MASE on
the clean input. Nothing here re-rates: every level shown is one ratings.json already holds.
"""

from __future__ import annotations

import re
from typing import Any

from causalrate.rate.headlines import all_tied, described_as, percent
from causalrate.report.estimators import label as score_label
from causalrate.report.templating import fmt
from causalrate.run import FragilityRule, RatingsDocument
from causalrate.score.scores import bias_attributes, differ_by

KINDS = ("robustness", "bias", "accuracy")
TITLES = {"robustness": "Robustness", "bias": "Bias", "accuracy": "Accuracy"}
QUESTIONS = {
    "robustness": "How much do perturbed inputs change its error?",
    "bias": "Do its errors differ between groups of the data?",
    "accuracy": "How close are its forecasts on clean input?",
}


def naive_error(doc: RatingsDocument) -> float | None:
    """The naive reference's mean clean outcome, the basis the cards say every rise on (None: an older run)."""
    return doc.provenance.parameters.naive_error if doc.provenance.parameters else None


def question(doc: RatingsDocument, kind: str) -> str:
    """The headline's question; bias names the data's attributes its scores compare ("by region or site")."""
    by = differ_by(bias_attributes({r.score for r in doc.ratings})) if kind == "bias" else ""
    return f"Do its errors differ {by}?" if by else QUESTIONS[kind]


def level_words(rating: int | None, levels: int) -> str:
    """The level's meaning in words (1 = best)."""
    if rating is None:
        return "not rated"
    if rating == 1:
        return "best level"
    if rating == levels:
        return "worst level"
    return f"middle level ({rating} of {levels})" if levels > 3 else "middle level"


def headline_words(h: dict[str, Any], levels: int, n_systems: int, kind: str) -> str:
    """The words beside a headline's big number: its level in words, or "all N systems tied" when every other
    compared system shares its level (one group for all is a tie, never "best"). A weakest link shared at a
    level below the best is no tie: each system is that bad somewhere (rate.headlines.all_tied)."""
    if all_tied(kind, h.get("rating"), len(h.get("tied_with") or []), n_systems):
        return f"all {n_systems} systems tied"
    return level_words(h.get("rating"), levels)


def headlines(doc: RatingsDocument, system: str) -> dict[str, dict[str, Any]]:
    """{kind: H} with H = rating, absolute_rating, meaning, stability, tied_with, scores, source."""
    given = doc.headlines.get(system) or {}
    out = {}
    for kind in KINDS:
        stored = given.get(kind)
        h = _fallback(doc, system, kind) if stored is None else {"source": "headlines", **stored.model_dump()}
        h.setdefault("tied_with", [])
        h.setdefault("absolute_rating", None)
        h.setdefault("stability", None)
        h.setdefault("scores", [])
        out[kind] = h
    return out


def _fallback(doc: RatingsDocument, system: str, kind: str) -> dict[str, Any]:
    levels, n = doc.levels, len(doc.systems)
    control = doc.control
    mine = doc.rows_of(system)
    if kind == "robustness":
        rating = doc.overall.get(system)
        return {
            "rating": rating,
            "stability": doc.overall_stability.get(system),
            "meaning": f"{level_words(rating, levels).capitalize()} for robustness among the {n} systems compared "
            "(mean of its robustness ratings over the perturbations, re-binned).",
            "scores": ["overall"],
            "source": "overall",
        }
    if kind == "bias":
        rows = [r for r in mine if r.score.startswith("wrs_") and r.perturbation != control and r.rating is not None]
        if not rows:
            return {"rating": None, "meaning": no_bias_reason(doc), "source": "none"}
        worst = max(rows, key=lambda r: (r.rating, r.score, r.perturbation))
        return {
            "rating": worst.rating,
            "stability": worst.stability,
            "meaning": f"{level_words(worst.rating, levels).capitalize()}: its worst WRS rating "
            f"({worst.score} under {worst.perturbation}) among the {n} systems compared.",
            "scores": sorted({r.score for r in rows}),
            "source": "worst WRS row",
        }
    row = next((r for r in mine if r.score == "mase" and r.perturbation == control), None)
    if row is None:
        return {"rating": None, "meaning": "No clean-input accuracy score in this run.", "source": "none"}
    return {
        "rating": row.rating,
        "stability": row.stability,
        "meaning": f"{level_words(row.rating, levels).capitalize()} for MASE on clean input "
        f"({fmt(row.raw, 3)}; below 1 beats a no-change forecast) among the {n} systems compared.",
        "scores": ["mase"],
        "source": f"mase on {control}",
    }


def no_bias_reason(doc: RatingsDocument) -> str:
    """Why a run has no bias score, in words: a bias score compares groups of series by an attribute's values."""
    n_series = doc.counts.series if doc.counts else len(doc.provenance.series or [])
    attributes = doc.provenance.attributes
    if n_series == 1:
        why = "one series, so no groups of the data to compare"
    elif not attributes:
        why = "the data declares no attribute (such as region or industry) to group its series by"
    elif all(len(values) < 2 for values in attributes.values()):
        why = "no attribute of the data has two or more values, so there are no groups to compare"
    else:
        return "No bias score in this run."
    return f"No bias score: {why}."


def one_series_note(doc: RatingsDocument) -> str | None:
    """What a study of one series can show, said once on the label and in report.md: with no second series every
    interval, tie and stability resamples blocks of that series' own windows (causal.resampling), few independent
    pieces of evidence, so a tie or "no effect" there means not shown, not equal. None with two or more series."""
    n_series = doc.counts.series if doc.counts else len(doc.provenance.series or [])
    if n_series != 1:
        return None
    windows = f" {doc.counts.n_windows}" if doc.counts else ""
    return (
        f"One series only: every interval and tie comes from resampling blocks of its own{windows} windows, so the "
        "tests have little power: a difference between systems may be real but not shown."
    )


def perturbation_words(doc: RatingsDocument, perturbation: str) -> str:
    """A perturbation as a reader names it: its description, or where that is long its kind in words (the
    description's closing parenthesis: "saturation"; else its words before a colon) with its severity."""
    record = doc.perturbation(perturbation)
    if record is not None and record.kind == "control":
        return "the clean input"
    described = described_as(perturbation, {p.id: p.description for p in doc.perturbations})
    return in_short(perturbation, described) or described


def in_short(perturbation: str, described: str) -> str | None:
    """A perturbation whose description is long (over 40 characters) as its kind in words with its severity
    ("calibration drift, severity 4": what a severity grid's id, `drift-dose@4`, does not say); None where the
    description is short enough to say in full."""
    if len(described) <= 40:
        return None
    severity = perturbation.rpartition("@")[2] if "@" in perturbation else ""
    return kind_words(described) + (f", severity {severity}" if severity.isdigit() else "")


def kind_words(described: str) -> str:
    """What kind of fault a description is, in its own words: its closing parenthesis ("(a stuck sensor, a frozen
    reading)": its first name), else its words before a colon."""
    kind = re.search(r"\(([^(),]*)[^()]*\)$", described)
    return kind.group(1) if kind else described.partition(":")[0]


def _words_and_id(doc: RatingsDocument, perturbation: str) -> str:
    """A perturbation in words, then its id where the words are its description ("a value is halved (P1)"); its
    kind and severity alone where the description is long ("saturation, severity 3", never "(clip-dose@3)")."""
    words = perturbation_words(doc, perturbation)
    described = described_as(perturbation, {p.id: p.description for p in doc.perturbations})
    return f"{words} ({perturbation})" if words == described else words


def row_words(doc: RatingsDocument, score: str, perturbation: str) -> str:
    """A rating row in words: "APE (newest point) on saturation, severity 4"."""
    return f"{score_label(score)} on {perturbation_words(doc, perturbation)}"


def _rise(row) -> str:
    """The harm an inconclusive APE's interval leaves open, in words: "a rise of 7 % of the naive reference's clean
    error" (or in the outcome's units where no share was recorded)."""
    if row.cannot_rule_out_share is not None:
        return f"a rise of {percent(row.cannot_rule_out_share)} of the naive reference's clean error"
    if row.cannot_rule_out is not None:
        return f"a rise of {fmt(row.cannot_rule_out, 3)} in its error"
    return "a practical effect"


def top_fragility_rule(doc: RatingsDocument, system: str) -> dict[str, Any] | None:
    """Where a perturbation hurts the system most (heterogeneity section), or None: the largest harm among

    - the rules of a map whose tree holds on windows it did not see (held-out `explained` > 0; a split that
      explains nothing there is noise), and
    - the average effect of a perturbation whose map does not hold: the same on every window as far as the map
      can tell ("on every window alike"). A model that collapses everywhere under P3 was shown a subgroup rule of
      P1 a hundred times smaller as where it is most fragile.

    Only a harm counts, one a reader could notice: an effect of at least the APE's margin δ (METHOD §6.2) whose
    95 % interval lies above 0. A subgroup where the error falls, or rises by less than δ, or by an amount its
    interval cannot tell from 0, is no fragility (a window-average model was shown "most fragile" at an effect
    of 0.0009, a 15th of δ, whose interval covered 0)."""
    per = doc.heterogeneity.get(system) or {}
    ape = {r.perturbation: r for r in doc.rows_of(system) if r.score == "ape"}
    best: dict[str, Any] | None = None
    for perturbation, found in sorted(per.items()):
        row = ape.get(perturbation)
        margin = (row.margin if row is not None else None) or 0.0
        candidates = found.rules
        if found.explained is not None and not found.explained > 0:
            if row is None or row.raw is None or not row.ape_true_interval:
                continue
            everywhere = "on every window alike (no window property predicts where it is hurt more)"
            candidates = [
                FragilityRule.written(
                    text=f"its error rises by {fmt(row.raw, 3)} {everywhere}",
                    cate=row.raw,
                    interval=list(row.ape_true_interval),
                    share=1.0,
                )
            ]
        for rule in candidates:
            cate, lower = rule.cate, rule.interval[0] if rule.interval else None
            if cate is None or lower is None or not (cate >= margin and cate > 0 and lower > 0):
                continue
            if best is None or cate > best["cate"]:
                best = {"perturbation": perturbation, **rule.model_dump()}
    return best


def warnings(doc: RatingsDocument, system: str, *, failures: int) -> list[str]:
    """Plain-language warnings for the label: failed self-checks, insufficient and inconclusive scores."""
    out = []
    for c in (c for c in doc.checks if c.system == system and not c.passed):
        out.append(
            f"Self-check failed for {c.perturbation} ({c.scheme}): the deconfounded estimate "
            f"{fmt(c.ape_adj, 3)} is not reliable here — {c.reason or 'see the report'}."
        )
    mine = doc.rows_of(system)
    insufficient = [r for r in mine if r.insufficient]
    if insufficient:
        names = sorted({row_words(doc, r.score, r.perturbation) for r in insufficient})
        out.append(f"Insufficient data, rated worst: {'; '.join(names[:4])}{' …' if len(names) > 4 else '.'}")
    improves = sorted((r for r in mine if r.improves), key=lambda r: (r.perturbation, r.score))
    if improves:  # the APE intervals are the report's: the label names the perturbations
        said = list(dict.fromkeys(_words_and_id(doc, r.perturbation) for r in improves))
        named = "; ".join(said[:2]) + (f"; and {len(said) - 2} more" if len(said) > 2 else "")
        # only APE rows improve (rate.inconclusive): its average over every window, the changed point anywhere in
        # the input, which the same perturbation at the newest point (ape_last) may still raise, as on arima
        out.append(
            "Improves, rated 1 there (an improvement is no harm): averaged over every window, the changed point "
            f"anywhere in the input, its error falls under {named}."
        )
    inconclusive = sorted((r for r in mine if r.inconclusive), key=lambda r: (r.perturbation, r.score))
    if inconclusive:
        shares = [r.cannot_rule_out_share for r in inconclusive]
        if all(share is not None for share in shares):  # one unit: said once
            said = [
                f"{percent(share)} ({row_words(doc, r.score, r.perturbation)})"
                for r, share in zip(inconclusive, shares, strict=True)
                if share is not None
            ]
            head = "cannot rule out a rise in its error, as a share of the naive reference's clean error, of "
            listed = head + ", ".join(said[:3])
        else:
            said = [f"{row_words(doc, r.score, r.perturbation)}: cannot rule out {_rise(r)}" for r in inconclusive]
            listed = "; ".join(said[:3])
        out.append(f"Inconclusive (too few windows; best level withheld): {listed}{' …' if len(said) > 3 else '.'}")
    unstable = [r for r in mine if r.stable is False]
    if unstable:  # the least stable named (the report lists them all)
        least = min(unstable, key=lambda r: (r.stability if r.stability is not None else 1.0, r.perturbation, r.score))
        kept = f", kept in {100 * least.stability:.0f} %" if least.stability is not None else ""
        named = row_words(doc, least.score, least.perturbation) + kept
        out.append(
            f"{len(unstable)} of {len(mine)} ratings are unstable (kept in under 80 % of resamples)"
            + (f"; the least: {named}." if len(unstable) > 1 else f": {named}.")
        )
    if failures:
        out.append(f"{failures} forecasts failed (see the report).")
    return out
