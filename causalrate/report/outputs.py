"""Stage 7 — report: ratings.json (the contract), scores.csv and report.md.

ratings.json holds no timestamps or timings, sorts its keys and rounds floats to
10 significant digits, so the same config and seed give a byte-identical file.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from causalrate.perturb.operators import OPERATORS
from causalrate.score.scores import SCORES

if TYPE_CHECKING:
    from causalrate.study import Result, Study

RATINGS_SCHEMA = "causalrate/ratings-v3"
PACKAGES = ("causalrate", "numpy", "pandas", "scipy", "statsmodels", "scikit-learn", "dowhy", "pydantic")


def pins_relaxed(system: Any) -> list[str]:
    """The package pins a system's managed environment does not honour (e.g. "torch<2.5 → 2.13.0"); [] if none."""
    from causalrate.forecast.envsystem import EnvironmentSystem

    return system.recipe_facts().get("pins_relaxed", []) if isinstance(system, EnvironmentSystem) else []


def clean_float(x: Any) -> float | None:
    """JSON-safe, platform-stable float: None for NaN/inf, else 10 significant digits."""
    if x is None:
        return None
    x = float(x)
    return float(f"{x:.10g}") if math.isfinite(x) else None


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def ratings_document(study: Study, result: Result) -> dict[str, Any]:
    cfg = study.config
    effects = result.evidence.effects
    effect_rows = [
        {
            "system": r.system,
            "perturbation": r.perturbation,
            "scheme": r.scheme,
            "windows": int(r.windows),
            "draws": int(r.draws),
            "ape_true": clean_float(r.ape_true),
            **{
                f"{col}{suffix}": clean_float(getattr(r, f"{col}{suffix}"))
                for col in ("ape_obs", "ape_adj", "pie")
                for suffix in ("", "_lo", "_hi")
            },
            "smd_before": clean_float(r.smd_before),
            "smd_after": clean_float(r.smd_after),
            "unmatched": clean_float(r.unmatched),
            "balance": {k: [clean_float(b), clean_float(a)] for k, (b, a) in sorted(r.balance.items())},
        }
        for r in effects.itertuples()
    ]
    forecasts = result.evidence.forecasts
    return {
        "schema": RATINGS_SCHEMA,
        "study": cfg.name,
        "levels": cfg.rating.levels,
        "direction": "1 = best",
        "meaning": (
            f"Ratings run from 1 (best: most robust or most accurate) to {cfg.rating.levels} (worst), "
            f"relative to the {len(study.systems)} systems compared (`rating`, rule {cfg.rating.rule!r}); "
            "`absolute_rating` runs from 1 to 3 on the published scale (ratings/scales.yaml), the same in any "
            "study on the same data."
        ),
        "outcome": cfg.outcome,
        "not_assessed": [{"name": name, "reason": why} for name, why in sorted(study.not_assessed.items())],
        "systems": [
            {
                "name": spec.name,
                "type": spec.type,
                "family": spec.family or study.systems[spec.name].family,
                "modality": study.systems[spec.name].modality,
                "architecture": spec.architecture or study.systems[spec.name].architecture,
                "parameters": spec.parameters,
                "imputation": None if study.systems[spec.name].accepts_nan else cfg.forecast.imputation,
                "pins_relaxed": pins_relaxed(study.systems[spec.name]),
            }
            for spec in cfg.systems
        ],
        "perturbations": [
            {
                "id": p.id,
                "operator": p.operator_name,
                "kind": p.operator.kind,
                "period": p.period,
                "phase": p.phase,
                "params": p.params,
                "description": p.description,
                "family": p.family,
                "severity": clean_float(p.severity),
                "severity_label": p.severity_label,
                **placement_record(p, study),
            }
            for p in study.suite
        ],
        "ratings": [
            {
                "perturbation": r.perturbation,
                "score": r.score,
                "system": r.system,
                "raw": clean_float(r.raw),
                "rating": int(r.rating),
                "rule": r.rule,
                "absolute_rating": None if pd.isna(r.absolute_rating) else int(r.absolute_rating),
                "tied_with": list(r.tied_with),
                "insufficient": bool(r.insufficient),
                "note": r.note if isinstance(r.note, str) else None,
                **({"display": r.display} if isinstance(r.display, str) else {}),
                **_extras(result, (r.perturbation, r.score, r.system)),
            }
            for r in result.ratings.itertuples()
        ],
        "rule": cfg.rating.rule,
        "scale": cfg.rating.scale,
        "min_coverage": cfg.rating.min_coverage,
        "headlines": {
            system: {family: {**h, "stability": clean_float(h["stability"])} for family, h in sorted(families.items())}
            for system, families in sorted(result.headlines.items())
        },
        "checks": [
            {
                k: clean_float(v) if isinstance(v, float) else [clean_float(x) for x in v] if k == "interval" else v
                for k, v in c.items()
            }
            for c in result.checks
        ],
        "overall_stability": {
            k: clean_float(v) for k, v in (result.rigor.overall_stability if result.rigor else {}).items()
        },
        "wrs_tests": result.rigor.wrs_tests if result.rigor else [],
        "refutations": [
            {k: clean_float(v) if isinstance(v, float) else v for k, v in r.items()}
            for r in (result.rigor.refutations if result.rigor else [])
        ],
        "overall": result.overall,
        "not_rated": result.unavailable,
        "recency_profile": [
            {**row, "ape": clean_float(row["ape"]), "interval": [clean_float(v) for v in row["interval"]]}
            for row in result.recency_profile
        ],
        "effects": effect_rows,
        "heterogeneity": _clean(result.heterogeneity),
        "identification": {
            scheme: {"adjustment_set": list(ident.adjustment_set), "estimand": ident.estimand}
            for scheme, ident in result.identification.items()
        },
        "counts": {
            "series": len(study.dataset.series),
            "windows": len(study.windows),
            "forecasts": len(forecasts),
            "failures": int(forecasts["failed"].sum()),
        },
        "provenance": {
            "config": cfg.model_dump(mode="json"),
            "data_source": study.dataset.source,
            "data_hash": study.dataset.content_hash(),
            "seed": cfg.seed,
            "versions": package_versions(),
            "method_note": METHOD_NOTE,
        },
    }


def placement_record(p, study: Study) -> dict[str, Any]:
    """Where the perturbation falls, its parts if combined, its imputation, and per-series calibration."""
    record: dict[str, Any] = {
        "placement": p.placement.name,
        "offset": p.placement.offset,
        "candidates": p.placement.candidates,
        "impute": p.impute,
        "positional": p.positional,
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


def _extras(result: Result, key: tuple[str, str, str]) -> dict[str, Any]:
    """Interval, stability and (for APE) power of one rating row, JSON-clean."""
    extra = result.rigor.rows.get(key, {}) if result.rigor else {}
    out: dict[str, Any] = {}
    for name, value in extra.items():
        if isinstance(value, list):
            out[name] = [clean_float(v) for v in value]
        elif isinstance(value, bool | str):
            out[name] = value
        else:
            out[name] = clean_float(value)
    if "stability" in out:
        out["stable"] = out["stability"] is not None and out["stability"] >= 0.8
    return out


METHOD_NOTE = (
    "WRS uses Welch's t-test at the stated two-sided levels (95%, 70%, 60%); the predecessor's code "
    "halved alpha twice and used a pooled-df statistic. Matching breaks propensity ties at random "
    "(seeded) and estimates the ATE by matching both ways; dowhy's built-in PSM does not handle ties."
)


def write_outputs(*, study: Study, result: Result, out: Path) -> None:
    doc = ratings_document(study, result)
    (out / "ratings.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    result.ratings.assign(raw=result.ratings["raw"].map(clean_float)).to_csv(out / "scores.csv", index=False)
    (out / "report.md").write_text(render_report(doc, result), encoding="utf-8")


def _cell(row: dict[str, Any]) -> str:
    """'rating (raw)', with '≥ k' when inconclusive and ⚠ when the rating is unstable.

    `row` comes from a DataFrame of all rating rows, so a row without `display` holds NaN there (truthy),
    and its rating may be a float: only a string is a display text.
    """
    display, rating = row.get("display"), row["rating"]
    shown = display if isinstance(display, str) else "—" if pd.isna(rating) else str(int(rating))
    text = f"{shown} ({_fmt(row['raw'])})" + (" insufficient" if row.get("insufficient") is True else "")
    return text + (" ⚠" if row.get("stable") is False else "")


def _fmt_headline(h: dict | None) -> str:
    if not h:
        return "—"
    absolute = f" ({h['absolute_rating']})" if h.get("absolute_rating") is not None else ""
    return f"{h['rating']}{absolute}"


def _fmt(x: float | None) -> str:
    return "—" if x is None or pd.isna(x) else f"{x:.4g}"


def render_report(doc: dict[str, Any], result: Result) -> str:
    """A readable Markdown summary: overall ratings, per-score tables, and the APE table."""
    levels = doc["levels"]
    systems = [s["name"] for s in doc["systems"]]
    lines = [
        f"# causalrate report — {doc['study']}",
        "",
        f"{doc['meaning']} Outcome per forecast: `{doc['outcome']}`. "
        f"{doc['counts']['windows']} windows × {len(doc['perturbations'])} perturbations × {len(systems)} systems "
        f"= {doc['counts']['forecasts']} forecasts, {doc['counts']['failures']} failed.",
        "",
        "## Overall robustness rating",
        "",
        "| system | overall rating (1 = most robust) |",
        "|---|---|",
        *[f"| {s} | {doc['overall'].get(s, '—')} of {levels} |" for s in systems],
        "",
    ]
    if doc.get("headlines"):
        lines += ["## Headline ratings", "", "| system | robustness | bias | accuracy |", "|---|---|---|---|"]
        for s in systems:
            h = doc["headlines"].get(s, {})
            cells = [_fmt_headline(h.get(f)) for f in ("robustness", "bias", "accuracy")]
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines += ["", "Relative rating (absolute rating on the published 3-level scale); `overall` = robustness.", ""]
    failed = [c for c in doc.get("checks", []) if not c["passed"]]
    if doc.get("checks"):
        lines += ["## Self-check (METHOD §5.4)", ""]
        lines += [f"{len(doc['checks']) - len(failed)} of {len(doc['checks'])} confounded distributions pass.", ""]
        lines += [
            f"- FAILED {c['system']} / {c['perturbation']} / {c['scheme']}: {c['reason']} (APE_true "
            f"{_fmt(c['ape_true'])}, APE_obs {_fmt(c['ape_obs'])}, APE_adj {_fmt(c['ape_adj'])})"
            for c in failed
        ] + [""]
    notes = [r for r in doc["ratings"] if r.get("note")]
    if notes:
        lines += ["## Insufficient and undefined scores", ""]
        lines += [f"- {r['system']} / {r['perturbation']} / {r['score']}: {r['note']}" for r in notes] + [""]
    if doc["not_assessed"]:
        lines += ["## Not assessed", "", "These systems were in the study but could not run here:", ""]
        lines += [f"- **{s['name']}**: {s['reason']}" for s in doc["not_assessed"]] + [""]
    frame = pd.DataFrame(doc["ratings"])
    for perturbation, part in frame.groupby("perturbation", sort=False):
        desc = next(
            (p["description"] for p in doc["perturbations"] if p["id"] == perturbation),
            "severity grid, rated across its severities",
        )
        lines += [
            f"## {perturbation}: {desc}",
            "",
            "| score | " + " | ".join(systems) + " |",
            "|---|" + "---|" * len(systems),
        ]
        for score, rows in part.groupby("score", sort=False):
            by_system = {r["system"]: r for r in rows.to_dict("records")}
            cells = [_cell(by_system[s]) if s in by_system else "—" for s in systems]
            lines.append(f"| {score} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "Cells: rating (raw score). Lower raw is better except sign_accuracy. ⚠: the rating is kept in under 80 % "
        "of bootstrap replicates (unstable). ≥ k: no effect detected but too little power to rule one out.",
        "",
        "## Scores",
        "",
    ]
    lines += [f"- **{name}**: {SCORES.get(name).description}" for name in dict.fromkeys(frame["score"])]
    for name, why in doc["not_rated"].items():
        lines.append(f"- **{name}**: not rated — {why}")
    lines += [
        "",
        "## Perturbation effects: true, observed and deconfounded APE",
        "",
        "APE_true is the randomized effect from the full factorial; APE_obs the naive difference on an "
        "observational draw; APE_adj the same draw after tie-safe propensity matching. Means over the draws, "
        "[2.5%, 97.5%] across draws. SMD = largest |standardised mean difference| of the confounders.",
        "",
        "| system | perturbation | scheme | APE_true | APE_obs | APE_adj | PIE% | SMD before → after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in doc["effects"]:
        lines.append(
            f"| {e['system']} | {e['perturbation']} | {e['scheme']} | {_fmt(e['ape_true'])} | "
            f"{_fmt(e['ape_obs'])} [{_fmt(e['ape_obs_lo'])}, {_fmt(e['ape_obs_hi'])}] | "
            f"{_fmt(e['ape_adj'])} [{_fmt(e['ape_adj_lo'])}, {_fmt(e['ape_adj_hi'])}] | {_fmt(e['pie'])} | "
            f"{_fmt(e['smd_before'])} → {_fmt(e['smd_after'])} |"
        )
    lines += [
        "",
        "## Method notes",
        "",
        doc["provenance"]["method_note"],
        "",
        f"Data hash `{doc['provenance']['data_hash']}`, seed {doc['provenance']['seed']}.",
        "",
    ]
    return "\n".join(lines)
