"""The label: one page per system a stakeholder reads in 30 seconds (≈ 1000 × 1300 px, one A4 page).

Three headline ratings with their meaning and stability, what was tested, the top fragility rule,
the reference systems, warnings, and a link to the detailed report. Built from ratings.json
only; every section added by a newer ratings.json is optional.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from causalrate.config import REFERENCE_SYSTEMS
from causalrate.rate.absolute import ABSOLUTE_LEVELS
from causalrate.rate.headlines import described_as
from causalrate.report.estimators import label as score_label
from causalrate.report.faults import fault_lines
from causalrate.report.headlines import (
    TITLES,
    headline_words,
    headlines,
    in_short,
    kind_words,
    naive_error,
    one_series_note,
    question,
    top_fragility_rule,
)
from causalrate.report.headlines import warnings as label_warnings
from causalrate.report.templating import level_class
from causalrate.run import RatingsDocument

MAX_WARNINGS = 5  # more go to the detailed report: the label keeps a fixed height
# the window characteristics a fragility rule may split on (causalrate.data.characteristics), in a reader's words
COVARIATE_WORDS = {
    "level": "the input's mean level",
    "volatility": "the input's volatility (spread of its relative changes)",
    "trend_strength": "the input's trend strength (0 to 1)",
    "seasonality_strength": "the input's seasonality strength (0 to 1)",
    "adf_pvalue": "the stationarity test's p-value (ADF; low = stationary)",
}
# "; the same level as A, B" in a headline's meaning (rate.headlines), up to what follows the list
SAME_LEVEL = re.compile(r"; the same level as .*?(?= \(the mean of its accuracy levels\)|; no practical effect|\.$)")
MEAN_OF_LEVELS = " (the mean of its accuracy levels)."  # how rate.headlines ends a mean-type headline's meaning
NO_RULE = "No group of windows stands out: on held-out windows, no window property predicts where it is hurt more."
# a map that holds, but no group it finds is hurt by a practical amount (report.headlines.top_fragility_rule)
NO_HARM = "No group of windows is hurt noticeably: no group's rise reaches the practical margin, its interval above 0."


def listed(names: list[str], most: int = 6) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def data_source_name(doc: RatingsDocument) -> str:
    """Where the data came from, for a card: a file's name only (never the rater's folders), else the source."""
    data = doc.provenance.config.get("data", {})
    if data.get("source") in ("csv", "parquet") and data.get("path"):
        return PurePath(str(data["path"]).replace("\\", "/")).name
    if data.get("source") == "yfinance":
        return "Yahoo Finance (yfinance)"  # its source names the local cache folder
    return doc.provenance.data_source


def data_words(doc: RatingsDocument) -> str:
    """The rated data in the study's own words: its description, then where it came from."""
    described = doc.provenance.config.get("data", {}).get("description")
    return f"{described} — {data_source_name(doc)}" if described else data_source_name(doc)


def series_words(doc: RatingsDocument) -> str:
    """How many series, which, and each attribute of the data that tells series apart, with its values."""
    prov = doc.provenance
    series = prov.series or prov.config.get("data", {}).get("series") or []
    n_series = doc.counts.series if doc.counts else len(series)
    text = f"{n_series}" + (f": {listed(series)}" if series else "")
    attributes = [  # the values themselves where they are few (the label keeps its height); one value is no grouping
        f"{name} ({len(values)}: {', '.join(values)})" if len(values) <= 4 else f"{name} ({len(values)} values)"
        for name, values in prov.attributes.items()
        if len(values) >= 2
    ]
    return text + (f"; attributes: {', '.join(attributes)}" if attributes else "")


def groups_words(doc: RatingsDocument) -> str:
    """The data's attributes a bias score compares groups of, by name ("industry, company")."""
    rated = {r.score.removeprefix("wrs_") for r in doc.ratings if r.score.startswith("wrs_")}  # an older ratings.json
    names = list(doc.provenance.attributes) or sorted(rated)
    return ", ".join(names) if names else "no attribute declared"


def period_words(doc: RatingsDocument) -> str:
    """The rated span and its frequency (from the data; the study's data.start/end for an older ratings.json)."""
    prov = doc.provenance
    data = prov.config.get("data", {})
    first, last = prov.span or [data.get("start"), data.get("end")]
    span = f"{first} to {last}" if first and last else ""
    if prov.frequency:
        span += (", " if span else "") + f"{prov.frequency}" + (f" (season {prov.season})" if prov.season else "")
    return span


def tested(doc: RatingsDocument) -> list[tuple[str, str]]:
    """What was tested, as (what, value) lines: data, period, perturbations, placements, systems, scale."""
    config = doc.provenance.config  # the run's StudyConfig, as stored (plain JSON)
    window_settings = config.get("windows", {})
    n_windows = doc.counts.n_windows if doc.counts else "?"
    perturbations = [p for p in doc.perturbations if p.kind != "control"]
    placements = sorted({str(p.placement or "cyclic") for p in perturbations})
    scale = (config.get("rating") or {}).get("scale") or ("both" if _has_absolute(doc) else "relative")
    scale_text = {
        "relative": f"relative: 1 = best of the {len(doc.systems)} systems compared",
        "absolute": "absolute: published thresholds, the same in any comparison",
        "both": f"relative (1 = best of the {len(doc.systems)} compared) and absolute (published thresholds)",
    }.get(scale, scale)
    span = period_words(doc)
    lines = [
        ("Data", data_words(doc)),
        ("Series", series_words(doc) + (f" — {note[:1].lower()}{note[1:]}" if (note := one_series_note(doc)) else "")),
        (
            "Period",
            (f"{span}; " if span else "")
            + f"{n_windows} windows of {window_settings.get('input_length', '?')} inputs, each forecast "
            f"{steps_ahead(window_settings.get('horizon'), doc.provenance.frequency)} ahead",
        ),
        ("Perturbations", perturbation_words(perturbations)),
        ("Placement", ", ".join(placements) + " (which input points are changed)"),
        ("Systems compared", ", ".join(doc.system_names)),
        ("Scale", scale_text),
    ]
    return lines


# a step of the data's frequency in words (singular, plural): the horizon said in the data's own time
STEP_WORDS = {
    "minutely": ("minute", "minutes"),
    "5-minutely": ("5-minute step", "5-minute steps"),
    "quarter-hourly": ("quarter-hour", "quarter-hours"),
    "half-hourly": ("half-hour", "half-hours"),
    "hourly": ("hour", "hours"),
    "daily": ("day", "days"),
    "business-daily": ("business day", "business days"),
    "weekly": ("week", "weeks"),
    "monthly": ("month", "months"),
    "quarterly": ("quarter", "quarters"),
    "yearly": ("year", "years"),
}


def steps_ahead(horizon: int | None, frequency: str | None) -> str:
    """The horizon in the data's time ("24 hours", "13 weeks", "12 months"; in steps for another frequency, which
    the Period line names): the label read "60 windows of 72 inputs → 24 forecasts", as if 24 were made in all."""
    one, many = STEP_WORDS.get(frequency or "", ("step", "steps"))
    return f"{'?' if horizon is None else horizon} {one if horizon == 1 else many}"


def perturbation_words(perturbations: list) -> str:
    """The perturbations tested: each with its description where they are few (six or fewer), else their kinds
    (one per operator, in the study's order: "a stuck sensor (stuck), an outage (gap), …") with how many
    perturbations and severities, so the label keeps one page whatever the suite's size."""
    if len(perturbations) <= 6:
        return "; ".join(f"{p.id}: {p.description}" for p in perturbations)
    kinds: dict[str, str] = {}
    for p in perturbations:  # the operator's name after its kind in words, where it says something more
        kind = kind_words(p.description)
        kinds.setdefault(p.operator, kind if kind == p.operator else f"{kind} ({p.operator})")
    severities = sorted({int(k) for p in perturbations if (k := p.id.rpartition("@")[2]).isdigit() and "@" in p.id})
    graded = f"; each also at severity {severities[0]}–{severities[-1]}" if len(severities) >= 2 else ""
    return f"{len(perturbations)} perturbations of {len(kinds)} kinds: {', '.join(kinds.values())}{graded}"


def label_sentence(h: dict, descriptions: dict[str, str] | None = None) -> str:
    """The headline's sentence without what the box around it already says (level, scale, systems, the systems
    at the same level): its cause for a weakest-link headline, else the meaning after its level; led by the
    published scale's verdict where it is the worst or two levels from the big number (`verdict`); after a verdict,
    which says its row in full, the relative cause is named by its score and perturbation only (the report says
    it in full)."""
    verdict = h.get("verdict")
    if verdict:  # its perturbation by kind and severity: the description is the report's
        verdict = shortened(verdict, descriptions or {})
    lead = f"{verdict[:1].upper()}{verdict[1:]}. Relative to the others: " if verdict else ""
    cause = (h.get("cause") or {}).get("text")
    if cause and verdict and shortened(cause, descriptions or {}) in verdict:  # one row sets both: said once
        return f"{verdict[:1].upper()}{verdict[1:]}."
    found = h.get("cause") or {}
    if cause and verdict and found.get("score") and found.get("perturbation"):  # the verdict said it in full
        what = "failed forecasts" if found.get("insufficient") else in_sentence(score_label(found["score"]))
        return f"{lead}set by its weakest result, {what} on {in_words(found['perturbation'], descriptions or {})}."
    if cause:
        sentence = f"set by its weakest result: {cause}."
        return lead + (sentence if lead else sentence[:1].upper() + sentence[1:])
    meaning = SAME_LEVEL.sub("", h.get("meaning") or "")
    rest = meaning.partition(") on ")[2].partition(": ")[2]  # "N of L (1 = best, …) on WHAT: REST"
    if rest.endswith(MEAN_OF_LEVELS) and h.get("scores"):  # the box says the level: the sentence says of what
        names = [in_sentence(score_label(s)) for s in h["scores"]]
        listed_names = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0]
        return lead + f"The mean of its levels on {listed_names}, on clean input."
    return lead + ((rest[:1].upper() + rest[1:]) if rest else meaning)


def in_sentence(label: str) -> str:
    """A score's label inside a sentence: a word in lower case ("bias by month", "sign accuracy"), an acronym
    as it is ("APE", "SMAPE")."""
    return label[:1].lower() + label[1:] if label[1:2].islower() else label


def in_words(perturbation: str, descriptions: dict[str, str]) -> str:
    """A perturbation named in a label sentence: where its description is long, its kind and severity in words
    ("calibration drift, severity 4", not its id `drift-dose@4`, which says nothing to a reader; the report has
    the description in full); else its id (the sentence says its short description where it gives one)."""
    described = described_as(perturbation, descriptions)
    short = in_short(perturbation, described)
    return short if short and short != described else perturbation


def shortened(text: str, descriptions: dict[str, str]) -> str:
    """A sentence with a perturbation's long description ("on P — DESCRIPTION", or an older ratings.json's
    "on P (DESCRIPTION)") said by its kind and severity instead ("on calibration drift, severity 5"), for the
    label's fixed height."""
    for pid, described in descriptions.items():
        words = in_words(pid, descriptions)
        if words != pid:
            for full in (f"on {pid} — {described}", f"on {pid} ({described})"):
                text = text.replace(full, f"on {words}")
    return text


def same_level(doc: RatingsDocument, system: str, kind: str, rating: int | None) -> list[str]:
    """The other systems whose `kind` headline has this level, as the label's one list of them (for a mean-type
    headline this is wider than its tie group); a system never measured on it is left out, as the headline's own
    sentence leaves it out (rate.headlines)."""
    if rating is None:
        return []
    out = []
    for other in doc.system_names:
        h = headlines(doc, other)[kind]
        rows = [r for r in doc.rows_of(other) if r.score in h["scores"]]
        measured = not rows or not all(r.insufficient for r in rows)
        if other != system and h.get("rating") == rating and measured:
            out.append(other)
    return sorted(out)


def plain_rule(text: str) -> str:
    """A fragility rule with the window characteristics it compares named in words (`trend_strength ≤ 0.96` →
    "the input's trend strength (0 to 1) ≤ 0.96"); a data attribute ("month is April") is already words."""
    effect, when, conditions = text.partition(" when ")
    for name, words in COVARIATE_WORDS.items():
        conditions = re.sub(rf"(?<![\w=]){re.escape(name)}(?= [≤>])", words, conditions)
    return effect + when + conditions


def fragility(doc: RatingsDocument, system: str) -> dict[str, Any] | None:
    """The label's "Where it is most fragile": the top rule in words with its perturbation's description, or
    `none` (a sentence) where the fragility map ran but found no group of windows that holds; None: no map."""
    rule = top_fragility_rule(doc, system)
    if rule is None:
        maps = (doc.heterogeneity.get(system) or {}).values()
        if not maps:
            return None
        return {"none": NO_HARM if any(m.explained is None or m.explained > 0 for m in maps) else NO_RULE}
    descriptions = {p.id: p.description for p in doc.perturbations}
    named = in_words(rule["perturbation"], descriptions)  # a long description by its kind and severity
    described = descriptions.get(rule["perturbation"]) if named == rule["perturbation"] else None
    return {**rule, "text": plain_rule(rule["text"]), "named": named, "described": described}


def absolute_note(relative: int | None, absolute: int | None, levels: int, n: int) -> str | None:
    """Why the published-scale level may differ from the relative one, said where it matters."""
    if absolute is None or relative is None:
        return None
    worst_relative, worst_absolute = relative == levels, absolute == ABSOLUTE_LEVELS
    best_relative, best_absolute = relative == 1, absolute == 1
    if (worst_relative, best_relative) == (worst_absolute, best_absolute):
        return None
    return f"fixed thresholds, not a rank among the {n} compared"


def _has_absolute(doc: RatingsDocument) -> bool:
    return any(r.absolute_rating is not None for r in doc.ratings)


def label_context(doc: RatingsDocument, system: str, *, failures: int, report_href: str) -> dict[str, Any]:
    levels = doc.levels
    meta = doc.system(system)
    heads = []
    for kind, h in headlines(doc, system).items():
        words = headline_words(h, levels, len(doc.systems), kind)
        # "all N systems tied" says who: no list
        same = "" if words.startswith("all ") else listed(same_level(doc, system, kind, h.get("rating")), 5)
        meaning = label_sentence(h, {p.id: p.description for p in doc.perturbations})
        note = absolute_note(h.get("rating"), h.get("absolute_rating"), levels, len(doc.systems))
        stability = None if h.get("stability") is None else f"{100 * h['stability']:.0f} %"
        absolute = h.get("absolute_rating")
        shown = f"{absolute} of {ABSOLUTE_LEVELS} {note or ''}" if absolute is not None and not h.get("verdict") else ""
        heads.append(
            {
                "kind": kind,
                "title": TITLES[kind],
                "question": question(doc, kind),
                "rating": h.get("rating"),
                "css": level_class(h.get("rating"), levels),
                "words": words,
                "absolute": h.get("absolute_rating"),
                "absolute_levels": ABSOLUTE_LEVELS,
                "absolute_note": note,
                "meaning": meaning,
                # the box's share of the row: the length of its text, each fact's line counted as 25 characters
                # more and each system it names as 10 (a name does not break: a narrow box wraps before it), at
                # least a short sentence's, so that the boxes end at about the same height
                "width": max(90, len(meaning) + sum(25 + len(fact) for fact in (same, stability, shown) if fact))
                + 10 * (same.count(", ") + 1 if same else 0),
                "verdict": bool(h.get("verdict")),  # its sentence starts with the published level: said once
                "stability": stability,
                "unstable": h.get("stability") is not None and h["stability"] < 0.8,
                "same": same,
            }
        )
    references = [
        {"name": s.name, "ratings": {k: h.get("rating") for k, h in headlines(doc, s.name).items()}}
        for s in doc.systems
        if s.type in REFERENCE_SYSTEMS and s.name != system
    ]
    found = label_warnings(doc, system, failures=failures)
    return {
        "system": meta,
        "naive_error": naive_error(doc),
        "study": doc.study,
        "levels": levels,
        "n_systems": len(doc.systems),
        "headlines": heads,
        "fallback": not doc.headlines,  # an older ratings.json: the sentences are taken from its rating rows
        "tested": tested(doc),
        "rule": fragility(doc, system),
        "faults": fault_lines(doc, system),
        "references": references,
        "warnings": found[:MAX_WARNINGS],
        "more_warnings": max(0, len(found) - MAX_WARNINGS),
        "report_href": report_href,
        "outcome": doc.outcome,
    }
