"""Stage 7 — report: ratings.json (the contract, modelled in causalrate.run), scores.csv and report.md.

ratings.json holds no timestamps or timings, sorts its keys and rounds floats to
10 significant digits, so the same config and seed give a byte-identical file.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from causalrate.perturb.operators import OPERATORS
from causalrate.rate.ratings import NOT_APPLICABLE
from causalrate.report.estimators import facts
from causalrate.report.faults import fault_effects
from causalrate.report.headlines import one_series_note
from causalrate.report.missing_values import missing_values
from causalrate.report.templating import environment, rating_cell
from causalrate.run import (
    RATINGS_SCHEMA,
    Check,
    Counts,
    Effect,
    Headline,
    Identification,
    MissingValues,
    NotAssessed,
    PerturbationRecord,
    Provenance,
    RatingRow,
    RatingsDocument,
    RecencyPoint,
    Refutation,
    ResolvedParameters,
    SystemRecord,
    WrsTest,
)
from causalrate.systems.base import nan_handling
from causalrate.uncertainty.rigor import NOT_ASSESSED, RowUncertainty
from causalrate.versions import installed

if TYPE_CHECKING:
    from causalrate.study import Result, Study

PACKAGES = ("causalrate", "numpy", "pandas", "scipy", "statsmodels", "scikit-learn", "dowhy", "pydantic")


def pins_relaxed(system: Any) -> list[str]:
    """The package pins a system's managed environment does not honour (e.g. "torch<2.5 → 2.13.0"); [] if none."""
    from causalrate.systems.envsystem import EnvironmentSystem

    return system.recipe_facts().get("pins_relaxed", []) if isinstance(system, EnvironmentSystem) else []


def clean_float(x: Any) -> float | None:
    """JSON-safe, platform-stable float: None for NaN/inf, else 10 significant digits."""
    if x is None:
        return None
    x = float(x)
    return float(f"{x:.10g}") if math.isfinite(x) else None


def package_versions() -> dict[str, str]:
    return {"python": platform.python_version(), **installed(PACKAGES, missing="not installed")}


def ratings_document(study: Study, result: Result) -> RatingsDocument:
    """ratings.json, section by section from its models (`Section.written`: a key they do not declare fails)."""
    cfg, rating = study.config, study.parameters.rating
    rigor = result.rigor
    # every stored forecast: the rated suite's and the newest-point companions (ape_last)
    stored = [f for f in (result.evidence.forecasts, result.evidence.newest) if len(f)]
    return RatingsDocument.written(
        schema=RATINGS_SCHEMA,
        study=cfg.name,
        levels=rating.levels,
        direction="1 = best",
        meaning=(
            f"Ratings run from 1 (best: most robust or most accurate) to {rating.levels} (worst), "
            f"relative to the {len(study.systems)} systems compared (`rating`, rule {rating.rule!r}); "
            "`absolute_rating` runs from 1 to 3 on the published scale (ratings/scales.yaml), the same in any "
            "study on the same data."
        ),
        outcome=cfg.outcome,
        not_assessed=[NotAssessed.written(name=name, reason=why) for name, why in sorted(study.not_assessed.items())],
        systems=system_records(study, result),
        perturbations=[
            PerturbationRecord.written(
                id=p.id,
                operator=p.operator_name,
                kind=p.operator.kind,
                period=p.period,
                phase=p.phase,
                params=p.params,
                description=p.description,
                family=p.family,
                severity=clean_float(p.severity),
                severity_label=p.severity_label,
                **({"level": p.level} if p.level is not None else {}),  # set only for graded duration faults
                **placement_record(p, study),
            )
            for p in study.suite
        ],
        ratings=[
            rating_row(r, rigor.row((r.perturbation, r.score, r.system)) if rigor else NOT_ASSESSED)
            for r in result.ratings.itertuples()
        ],
        rule=rating.rule,
        scale=rating.scale,
        min_coverage=rating.min_coverage,
        headlines={
            system: {
                family: Headline.written(**{**h, "stability": clean_float(h["stability"])})
                for family, h in sorted(families.items())
            }
            for system, families in sorted(result.headlines.items())
        },
        checks=[
            Check.written(
                **{
                    k: clean_float(v) if isinstance(v, float) else [clean_float(x) for x in v] if k == "interval" else v
                    for k, v in c.items()
                }
            )
            for c in result.checks
        ],
        overall_stability={k: clean_float(v) for k, v in (rigor.overall_stability if rigor else {}).items()},
        wrs_tests=[WrsTest.written(**t) for t in (rigor.wrs_tests if rigor else ())],
        refutations=[
            Refutation.written(**{k: clean_float(v) if isinstance(v, float) else v for k, v in r.items()})
            for r in (rigor.refutations if rigor else ())
        ],
        overall=result.overall,
        not_rated=result.unavailable,
        recency_profile=[
            RecencyPoint.written(
                **{**row, "ape": clean_float(row["ape"]), "interval": [clean_float(v) for v in row["interval"]]}
            )
            for row in result.recency_profile
        ],
        effects=[effect_record(r) for r in result.evidence.effects.itertuples()],
        **({"faults": faults} if (faults := fault_effects(study, result)) else {}),
        heterogeneity=_clean(result.heterogeneity),
        identification={
            scheme: Identification.written(adjustment_set=list(ident.adjustment_set), estimand=ident.estimand)
            for scheme, ident in result.identification.items()
        },
        counts=Counts.written(
            series=len(study.dataset.series),
            windows=len(study.windows),
            forecasts=sum(len(f) for f in stored),
            failures=sum(int(f["failed"].sum()) for f in stored),
        ),
        provenance=Provenance.written(
            config=cfg.model_dump(mode="json"),
            data_source=study.dataset.source,
            data_hash=study.dataset.content_hash(),
            frequency=study.dataset.frequency,
            season=study.parameters.season,
            **data_facts(study),
            parameters=ResolvedParameters.written(**_clean(study.parameters.record())),
            seed=cfg.seed,
            versions=package_versions(),
            method_note=method_note(set(result.ratings["score"]), matched=not result.evidence.effects.empty),
        ),
    )


def data_facts(study: Study) -> dict[str, Any]:
    """What the cards say the rated data are: the series' ids, their span and each attribute's values."""
    series = study.dataset.series
    first = min(s.dates[0] for s in series)
    last = max(s.dates[-1] for s in series)
    names = study.dataset.attribute_names
    return {
        "series": [s.id for s in series],
        "span": [date_text(first), date_text(last)],
        "attributes": {a: sorted({s.attributes[a] for s in series if a in s.attributes}) for a in names},
    }


def date_text(value: np.datetime64) -> str:
    """A date as ISO text: the day alone at midnight, else to the minute (sub-daily data)."""
    stamp = pd.Timestamp(value)
    return stamp.strftime("%Y-%m-%d") if stamp == stamp.normalize() else stamp.strftime("%Y-%m-%d %H:%M")


def system_records(study: Study, result: Result) -> list[SystemRecord]:
    """Each system's record, with its own missing-value handling compared against imputation."""
    cfg = study.config
    accepts = {name: bool(system.accepts_nan) for name, system in study.systems.items()}
    replicates = result.rigor.replicate_values if result.rigor else {}
    compared = missing_values(study.suite, accepts, result.ratings, replicates)
    records = []
    for spec in cfg.systems:
        system, record = study.systems[spec.name], compared[spec.name]
        records.append(
            SystemRecord.written(
                name=spec.name,
                type=spec.type,
                family=spec.family or system.family,
                modality=system.modality,
                architecture=spec.architecture or system.architecture,
                parameters=spec.parameters,
                imputation=None if system.accepts_nan else cfg.forecast.imputation,
                pins_relaxed=pins_relaxed(system),
                nan_policy=nan_handling(system),
                licence=system.licence,
                missing_values=record and MissingValues.written(**_clean(record)),
                settings=spec.settings.model_dump(mode="json"),
                trained_on=spec.trained_on,
                trained_on_study_data=study.trained_on_study_data.get(spec.name, []),
            )
        )
    return records


def rating_row(r: Any, uncertainty: RowUncertainty) -> RatingRow:
    """One rated row (a tuple of the rating frame) with what the rigor layer computed for it, JSON-clean."""
    fields: dict[str, Any] = {
        "perturbation": r.perturbation,
        "score": r.score,
        "system": r.system,
        "raw": clean_float(r.raw),
        "rating": None if pd.isna(r.rating) else int(r.rating),
        "rule": r.rule,
        "absolute_rating": None if pd.isna(r.absolute_rating) else int(r.absolute_rating),
        "quantity": clean_float(r.quantity),
        "tied_with": list(r.tied_with),
        "insufficient": bool(r.insufficient),
        "note": r.note if isinstance(r.note, str) else None,
    }
    for name in ("interval", "ape_true_interval"):
        if (bounds := getattr(uncertainty, name)) is not None:
            fields[name] = [clean_float(v) for v in bounds]
    if (power := uncertainty.power) is not None:
        fields |= {name: clean_float(getattr(power, name)) for name in ("p_value", "power", "n_min", "min_effect")}
        fields["inconclusive"] = bool(power.inconclusive)
    if (margin := getattr(r, "margin", None)) is not None and math.isfinite(margin) and margin > 0:
        fields["margin"] = clean_float(margin)
    if bool(getattr(r, "improves", False)):
        fields["improves"] = True
    for name in ("cannot_rule_out", "cannot_rule_out_share"):
        value = getattr(r, name, None)
        if value is not None and math.isfinite(value):
            fields[name] = clean_float(value)
    if uncertainty.stability is not None:
        fields["stability"] = clean_float(uncertainty.stability)
        fields["stable"] = fields["stability"] is not None and fields["stability"] >= 0.8
    display = uncertainty.display or (r.display if isinstance(r.display, str) else None)
    if display is not None:
        fields["display"] = display
    return RatingRow.written(**fields)


def effect_record(r: Any) -> Effect:
    """APE_true, observed and deconfounded APE and PIE% of one row of the effects table, JSON-clean."""
    return Effect.written(
        system=r.system,
        perturbation=r.perturbation,
        scheme=r.scheme,
        windows=int(r.windows),
        draws=int(r.draws),
        ape_true=clean_float(r.ape_true),
        **{
            f"{col}{suffix}": clean_float(getattr(r, f"{col}{suffix}"))
            for col in ("ape_obs", "ape_adj", "pie")
            for suffix in ("", "_lo", "_hi")
        },
        pie_note=note if isinstance(note := getattr(r, "pie_note", None), str) else None,
        smd_before=clean_float(r.smd_before),
        smd_after=clean_float(r.smd_after),
        unmatched=clean_float(r.unmatched),
        balance={k: [clean_float(b), clean_float(a)] for k, (b, a) in sorted(r.balance.items())},
    )


def placement_record(p, study: Study) -> dict[str, Any]:
    """Where the perturbation falls, its parts if combined, its imputation, and per-series calibration."""
    record: dict[str, Any] = {
        "placement": p.placement.name,
        "offset": p.placement.offset,
        "candidates": p.placement.candidates,
        "impute": p.impute,
        "positional": p.positional,
        **({"for_systems": p.for_systems} if p.for_systems != "all" else {}),
    }
    if p.parts:
        record["combine"] = [
            {"operator": OPERATORS.name_of(type(part.operator)), "period": part.period, "params": part.params}
            for part in p.parts
        ]
    if any(part.operator.calibrated for part in p.components):
        series = study.dataset.series
        values = p.calibrations([s.values for s in series])
        record["calibration"] = {s.id: clean_float(v) for s, v in zip(series, values, strict=True)}
    return record


def _clean(value: Any) -> Any:
    """Nested dicts / lists with every float made JSON-clean."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return clean_float(value) if isinstance(value, float) else value


WRS_NOTE = (
    "WRS uses Welch's t-test at the stated two-sided levels (95%, 70%, 60%); the predecessor's code "
    "halved alpha twice and used a pooled-df statistic."
)
MATCHING_NOTE = (
    "Matching breaks propensity ties at random (seeded) and estimates the ATE by matching both ways; "
    "dowhy's built-in PSM does not handle ties."
)


def method_note(scores: Iterable[str], *, matched: bool) -> str:
    """The method notes on what this run computed: WRS's test where a WRS score (wrs_<attribute>) was rated,
    matching where effects were estimated; a study without them is not told how they work."""
    notes = [WRS_NOTE] if any(s.startswith("wrs_") for s in scores) else []
    return " ".join([*notes, *([MATCHING_NOTE] if matched else [])])


def write_outputs(*, study: Study, result: Result, out: Path) -> None:
    """ratings.json through its model (the schema is defined once, in causalrate.run), scores.csv, report.md."""
    doc = ratings_document(study, result)
    (out / "ratings.json").write_text(doc.to_json(), encoding="utf-8")
    result.ratings.assign(raw=result.ratings["raw"].map(clean_float)).to_csv(out / "scores.csv", index=False)
    (out / "report.md").write_text(render_report(doc), encoding="utf-8")


def render_report(doc: RatingsDocument) -> str:
    """A readable Markdown summary: overall ratings, per-score tables, and the APE table."""
    systems = doc.system_names
    by_perturbation: dict[str, dict[str, dict[str, RatingRow]]] = {}
    for r in doc.ratings:
        by_perturbation.setdefault(r.perturbation, {}).setdefault(r.score, {})[r.system] = r
    tables = [
        {
            "perturbation": pid,
            "description": p.description
            if (p := doc.perturbation(pid))
            else "severity grid, rated across its severities",
            # a score not applicable to any system here (all point forecasts) is said once, in the notes
            "rows": [
                (score, [rating_cell(rows[s]) if s in rows else "—" for s in systems])
                for score, rows in scores.items()
                if any(r.note != NOT_APPLICABLE for r in rows.values())
            ],
        }
        for pid, scores in by_perturbation.items()
    ]
    names = dict.fromkeys(r.score for r in doc.ratings)
    return (
        environment()
        .get_template("report.md.j2")
        .render(
            doc=doc,
            systems=systems,
            tables=tables,
            scores=[(name, facts(name).description) for name in names],
            notes=grouped_notes(doc.ratings),
            one_series=one_series_note(doc),
        )
    )


def grouped_notes(rows: list[RatingRow]) -> list[tuple[str, str, str]]:
    """The rows' notes, one line per (note, where): (scores, note, where: "a, b on P1, P3" when the note holds for
    every pair of those systems and perturbations, else "a on P1; b on P3"), in the rows' order, so that one
    reason shared by many rows is said once ("coverage_error, wql for a, b on P0, P1: not applicable: …"). More
    than six perturbations that are all a score's are "all N perturbations" (a suite of 43 was listed by id)."""
    grouped: dict[tuple[str, str], dict[str, dict[str, None]]] = {}
    rated_on: dict[str, set[str]] = {}
    for r in rows:
        rated_on.setdefault(r.score, set()).add(r.perturbation)
        if r.note:
            grouped.setdefault((r.score, r.note), {}).setdefault(r.system, {})[r.perturbation] = None
    merged: dict[tuple[str, str], list[str]] = {}
    for (score, note), on in grouped.items():
        perturbations = list(dict.fromkeys(p for ps in on.values() for p in ps))
        every = len(perturbations) > 6 and set(perturbations) == rated_on[score]
        if all(list(ps) == perturbations for ps in on.values()):
            where = f"{', '.join(on)} on " + (
                f"all {len(perturbations)} perturbations" if every else ", ".join(perturbations)
            )
        else:
            where = "; ".join(f"{system} on {', '.join(ps)}" for system, ps in on.items())
        merged.setdefault((note, where), []).append(score)
    return [(", ".join(scores), note, where) for (note, where), scores in merged.items()]
