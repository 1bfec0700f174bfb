"""Machine-readable cards: a Model Card Toolkit JSON and a Hugging Face `model-index` YAML block.

`<name>.model-card.json` uses the field names of Google's Model Card Toolkit (schema 0.0.2):
model_details, model_parameters, quantitative_analysis.performance_metrics (type, value, slice,
confidence_interval {lower_bound, upper_bound}) and considerations. It is validated against
schemas/model-card.schema.json before it is written. `<name>.model-index.yaml` is the
`model-index` block a model's README front matter takes (results → task, dataset, metrics).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import yaml

from causalrate import __version__
from causalrate.report.estimators import estimator, label
from causalrate.report.headlines import headlines, naive_error, warnings
from causalrate.report.label import data_words, groups_words, period_words, series_words
from causalrate.report.templating import missing_values_text
from causalrate.run import RatingsDocument

PAPER = (
    "Lakkaraju et al., On Creating a Causally Grounded Usable Rating Method for Assessing the Robustness "
    "of Foundation Models Supporting Time Series, arXiv:2502.12226"
)


@cache
def schema() -> dict[str, Any]:
    return json.loads(resources.files("causalrate.report").joinpath("schemas/model-card.schema.json").read_text())


@cache
def validator() -> jsonschema.protocols.Validator:
    checker = jsonschema.validators.validator_for(schema())
    checker.check_schema(schema())
    return checker(schema())


def _num(x: Any) -> str:
    return f"{float(x):.10g}"


def _metric(kind: str, value: Any, slice_: str, interval: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "value": _num(value), "slice": slice_}
    if isinstance(interval, list | tuple) and len(interval) == 2 and None not in interval:
        out["confidence_interval"] = {"lower_bound": _num(interval[0]), "upper_bound": _num(interval[1])}
    return out


def dataset_name(doc: RatingsDocument) -> str:
    """The rated data as the label says it: description, source (a file's name only), series, span."""
    span = period_words(doc)
    return f"{data_words(doc)}; series {series_words(doc)}" + (f"; {span}" if span else "")


def model_card(doc: RatingsDocument, system: str, *, failures: int, report: str) -> dict[str, Any]:
    """The Model Card Toolkit document of one system; raises jsonschema.ValidationError if malformed."""
    meta = doc.system(system)
    n, levels = len(doc.systems), doc.levels
    metrics = []
    for kind, h in headlines(doc, system).items():
        if h.get("rating") is not None:
            metrics.append(_metric(f"{kind}_rating", h["rating"], "headline"))
        if h.get("absolute_rating") is not None:
            metrics.append(_metric(f"{kind}_absolute_rating", h["absolute_rating"], "headline"))
    for r in doc.rows_of(system):
        where = f"perturbation={r.perturbation}"
        if r.rating is not None:  # undefined rows have no level
            metrics.append(_metric(f"{r.score}_rating", r.rating, where))
        if r.raw is not None:
            metrics.append(_metric(r.score, r.raw, where, r.interval))
    for e in doc.effects:
        if e.system != system:
            continue
        where = f"perturbation={e.perturbation},scheme={e.scheme}"
        if e.ape_adj is not None:
            metrics.append(_metric("ape_adj", e.ape_adj, where, [e.ape_adj_lo, e.ape_adj_hi]))
    limits = [
        f"Ratings are relative: 1 = best, {levels} = worst of the {n} systems compared "
        f"({', '.join(doc.system_names)}); another set of systems can change them.",
        f"Measured on {dataset_name(doc)} only; other data, horizons or perturbations may differ.",
        f"Missing values: {missing_values_text(meta, naive_error(doc))}." if meta.nan_policy else "",
        *warnings(doc, system, failures=failures),
        *(
            [f"Declared trained on {', '.join(meta.trained_on_study_data)}, this study's data: leakage possible."]
            if meta.trained_on_study_data
            else []
        ),
    ]
    card = {
        "schema_version": "0.0.2",
        "model_details": {
            "name": system,
            "overview": f"causalrate robustness, bias and accuracy ratings of {system} (type {meta.type}) "
            f"in study {doc.study}. Detailed report: {report}.",
            "version": {"name": f"rated by causalrate {__version__}"},
            "references": [{"reference": "arXiv:2502.12226"}],
            "citations": [{"style": "text", "citation": PAPER}],
        },
        "model_parameters": {
            "model_architecture": str(meta.architecture or meta.type),
            "data": [{"name": dataset_name(doc), "description": f"data hash {doc.provenance.data_hash}"}],
        },
        "quantitative_analysis": {"performance_metrics": metrics},
        "considerations": {
            "users": [{"description": "People choosing a forecasting model who need its robustness in one reading."}],
            "use_cases": [{"description": "Compare forecasting systems under perturbed inputs, on the same data."}],
            "limitations": [{"description": text} for text in limits if text],
            "ethical_considerations": [
                {
                    "name": f"Errors that differ between groups of the data ({groups_words(doc)}): the bias rating.",
                    "mitigation_strategy": "Check the bias headline and the WRS rows before use on a group.",
                }
            ],
        },
    }
    validator().validate(card)
    return card


def model_index(doc: RatingsDocument, system: str) -> str:
    """A Hugging Face `model-index` YAML block carrying every rating (and raw score) of the system."""
    n, levels = len(doc.systems), doc.levels
    source = doc.provenance.config.get("data", {}).get("source") or "data"  # an id: embedded, csv, …
    scale = f"1 = best, {levels} = worst of {n} systems compared"
    metrics = []
    for kind, h in headlines(doc, system).items():
        if h.get("rating") is not None:
            metrics.append({"type": f"causalrate/{kind}-rating", "value": h["rating"], "name": f"{kind} ({scale})"})
    for r in doc.rows_of(system):
        name = f"{label(r.score)} under {r.perturbation}"
        if r.rating is not None:  # undefined rows have no level
            metrics.append({"type": f"causalrate/{r.score}-rating", "value": r.rating, "name": f"{name}: rating"})
        if r.raw is not None:
            metrics.append({"type": f"causalrate/{r.score}", "value": r.raw, "name": f"{name}: {estimator(r.score)}"})
    block = {
        "model-index": [
            {
                "name": system,
                "results": [
                    {
                        "task": {"type": "time-series-forecasting", "name": "Time series forecasting"},
                        "dataset": {
                            "type": f"causalrate/{source}",
                            "name": dataset_name(doc),
                        },
                        "metrics": metrics,
                        "source": {"name": f"causalrate {__version__}, study {doc.study}"},
                    }
                ],
            }
        ]
    }
    return _dump(block)


def eval_results(doc: RatingsDocument, system: str, *, date: str) -> str:
    """Hugging Face's `.eval_results/*.yaml` entries (dataset id and revision, value, date, source), one per
    headline rating and per raw score, validated against schemas/eval-results.schema.json."""
    source = doc.provenance.config.get("data", {}).get("source") or "data"
    dataset = {"id": f"causalrate/{source}", "revision": doc.provenance.data_hash[:16]}
    origin = {"name": f"causalrate {__version__}, study {doc.study}"}
    meta = doc.system(system)
    trained = f"trained on: {', '.join(meta.trained_on)}" if meta.trained_on else "trained on: unknown"
    entries = []
    for kind, h in headlines(doc, system).items():
        if h.get("rating") is not None:
            note = f"{kind} rating, 1 = best of {len(doc.systems)} systems; {trained}"
            entries.append(
                {"dataset": {**dataset, "task_id": f"{doc.study}/{kind}"}, "value": h["rating"], "notes": note}
            )
    for r in doc.rows_of(system):
        if r.raw is not None:
            task = f"{doc.study}/{r.score}/{r.perturbation}"
            note = f"{label(r.score)} under {r.perturbation}: {estimator(r.score)}; {trained}"
            entries.append({"dataset": {**dataset, "task_id": task}, "value": float(r.raw), "notes": note})
    entries = [{**e, "date": date, "source": origin} for e in entries]
    jsonschema.Draft202012Validator(eval_results_schema()).validate(entries)
    return _dump(entries)


def eval_results_schema() -> dict[str, Any]:
    return json.loads((resources.files("causalrate.report.schemas") / "eval-results.schema.json").read_text())


def _dump(data: object) -> str:
    """YAML as yaml.safe_dump writes it, through libyaml's emitter where PyYAML has it (ten times faster)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=120)
