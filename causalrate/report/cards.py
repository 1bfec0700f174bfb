"""Rating cards from a finished run directory: two layers for people, two for machines.

Reads RUN_DIR/ratings.json and RUN_DIR/forecasts.sqlite only through the typed run (causalrate.run).
Writes RUN_DIR/cards/, per system:
<slug>.html (the label: one screen, one printed page) with <slug>.png and <slug>.pdf,
<slug>.report.html (the detailed report) with <slug>.md (+ <slug>.<figure>.svg figures),
<slug>.model-card.json (Model Card Toolkit fields), <slug>.model-index.yaml and <slug>.eval_results.yaml
(Hugging Face's model-index block and .eval_results entries);
for the run, comparison.html (+ .png) and index.html. Pages are self-contained (inline CSS,
SVG figures as data URIs, no JavaScript); every user-supplied string is escaped by jinja2.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from causalrate import __version__
from causalrate.errors import UserError
from causalrate.report.card_figures import card_figures
from causalrate.report.comparison import cell, comparison_context, normalised_scores, radar_scores
from causalrate.report.estimators import EFFECT_COLUMNS, estimator, facts, label
from causalrate.report.faults import fault_table
from causalrate.report.headlines import headlines, naive_error, warnings
from causalrate.report.label import data_source_name, groups_words, label_context, plain_rule
from causalrate.report.machine import eval_results, model_card, model_index
from causalrate.report.render import Renderer, picture_renderer
from causalrate.report.templating import environment, fmt
from causalrate.run import RatingsDocument, Run

log = logging.getLogger(__name__)
FORMATS = ("html", "png", "pdf", "md", "json", "yaml")


def slugify(name: str, taken: set[str]) -> str:
    """A safe, unique file stem: letters, digits, '-' and '_' only (no '..', no '/')."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_")[:60] or "system"
    unique, k = slug, 2
    while unique.lower() in taken:
        unique, k = f"{slug}-{k}", k + 1
    taken.add(unique.lower())
    return unique


def figure_file(slug: str, figure: str) -> str:
    """A Markdown card's figure file: '.' never occurs in a slug, so `naive.ape.svg` (a figure of `naive`)
    cannot collide with `naive-ape.svg` (the card of a system named `naive-ape`)."""
    return f"{slug}.{figure}.svg"


def generated_at() -> datetime:
    """When the cards are rendered: the one thing allowed to differ between two renderings of the same run
    (SOURCE_DATE_EPOCH fixes it)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)


def generated_line() -> str:
    return f"Generated {generated_at().strftime('%Y-%m-%d %H:%M UTC')} by causalrate {__version__}"


def generated_date() -> str:
    return generated_at().strftime("%Y-%m-%d")


# the detailed report's tables (estimators.Facts.table): one per headline, the schemes' scores and the scores in no
# headline, in this order (a table with no rated score is left out)
TABLE_TITLES = {
    "robustness": "Robustness ratings",
    "bias": "Bias ratings",
    "confounding": "Confounding: deconfounded effects and PIE%",
    "accuracy": "Accuracy ratings",
    "other": "Other scores (rated, in no headline)",
}


def report_context(
    run: Run, system: str, slug: str, failures: dict[str, Any], normalised: dict[str, list[float]]
) -> dict[str, Any]:
    """The detailed report: every rating with its estimator, interval and stability, and the figures."""
    doc = run.ratings
    levels = doc.levels
    perturbations = doc.perturbations
    mine = {(r.score, r.perturbation): r for r in doc.rows_of(system)}
    draws = max((e.draws or 0 for e in doc.effects if e.system == system), default=0) or None
    tables: dict[str, list[dict[str, Any]]] = {table: [] for table in TABLE_TITLES}
    for score_name in dict.fromkeys([*radar_scores(doc), *(k[0] for k in mine)]):
        cells = {p.id: cell(mine.get((score_name, p.id)), levels) for p in perturbations}
        if not any(cells.values()):
            continue  # not rated, or rated per severity grid: see `grids`
        tables[facts(score_name).table].append(  # each score in its headline's table (METHOD §6)
            {
                "score": score_name,
                "label": label(score_name),
                "estimator": estimator(score_name, draws),
                "meaning": facts(score_name).description,
                "cells": cells,
                "on_control": cells.get(doc.control) is not None,  # rated on the clean input too
            }
        )
    ids = {p.id for p in perturbations}
    grids = [
        {
            "family": r.perturbation,
            "label": label(r.score),
            "estimator": estimator(r.score),
            "cell": cell(r, levels),
            "meaning": facts(r.score).description,
        }
        for (_, perturbation), r in mine.items()
        if perturbation not in ids
    ]
    heads = headlines(doc, system)
    return {
        "system": doc.system(system),
        "naive_error": naive_error(doc),
        "slug": slug,
        "levels": levels,
        "headlines": heads,
        "n_systems": len(doc.systems),
        "others": [s for s in doc.system_names if s != system],
        "perturbations": perturbations,
        "tables": tables,
        "table_titles": TABLE_TITLES,
        "adjusted_scores": [row["score"] for row in tables["confounding"] if row["score"].startswith("ape_")],
        "groups": groups_words(doc),
        "wrs_rated": any(r.score.startswith("wrs_") for r in doc.ratings),
        "grids": grids,
        "fault_table": fault_table(doc, system),
        "figures": card_figures(run, system, normalised),
        "failures": failures,
        "draws": draws,
        "effect_columns": {k: v.format(draws=draws or "the") for k, v in EFFECT_COLUMNS.items()},
        "effects": [e for e in doc.effects if e.system == system],
        "checks": [c for c in doc.checks if c.system == system],
        "refutations": [r for r in doc.refutations if r.system == system],
        "warnings": warnings(doc, system, failures=failures["total"]),
        "fragility": fragility_rules(doc, system),
        "study": doc.study,
        "outcome": doc.outcome,
        "method_note": doc.provenance.method_note,
        "not_rated": doc.not_rated,
        "provenance": provenance(doc),
        "generated": generated_line(),
    }


def provenance(doc: RatingsDocument) -> dict[str, Any]:
    prov = doc.provenance
    config_hash = hashlib.sha256(json.dumps(prov.config, sort_keys=True).encode()).hexdigest()
    return {
        "config_hash": config_hash[:16],
        "data_hash": prov.data_hash[:16],
        "seed": prov.seed,
        "versions": ", ".join(f"{k} {v}" for k, v in sorted(prov.versions.items())),
        "data_source": data_source_name(doc),
        "frequency": prov.frequency,
        "season": prov.season,
    }


def fragility_rules(doc: RatingsDocument, system: str) -> list[dict[str, Any]]:
    """Per perturbation: the fragility map's rules in words, window characteristics named as the label names them
    ("the input's trend strength (0 to 1) ≤ 0.92", not "trend_strength ≤ 0.92"); empty when the map is off or
    absent."""
    per = doc.heterogeneity.get(system) or {}
    return [
        {"perturbation": p, "spread": fmt(h.spread), "rules": [plain_rule(r.text) for r in h.rules]}
        for p, h in per.items()
        if h.rules
    ]


def failure_summary(run: Run, system: str) -> dict[str, Any]:
    with run.store() as store:
        per, examples = store.failures(system)
    return {
        "per_perturbation": per.to_dict("records"),
        "examples": examples.to_dict("records"),
        "total": int(per["failed"].sum()) if len(per) else 0,
    }


def render_cards(
    run_dir: Path,
    *,
    systems: list[str] | None = None,
    formats: tuple[str, ...] = FORMATS,
    png_required: bool = False,
    renderer: Renderer | None = None,
) -> list[Path]:
    """Write the labels, reports, machine-readable cards, comparison and index pages; return the files.

    PNG and PDF need playwright and Chromium; when either is missing they are skipped with a
    warning, unless png_required. Every PNG and PDF of the call is rendered in one browser session:
    `renderer`'s, when the caller started it already (render.picture_renderer, before it imported this
    module), else one started here. Either way it is finished (or closed, on an error) here.
    """
    try:
        run = Run.open(run_dir)
        names = run.ratings.system_names
        unknown = [f for f in formats if f not in FORMATS]
        if unknown:
            raise UserError(f"--format: unknown {unknown}; expected a comma-separated subset of {list(FORMATS)}")
        chosen = systems or names
        missing = [s for s in chosen if s not in names]
        if missing:
            raise UserError(f"--system: {missing} not in this run; systems: {names}")
        if renderer is None:
            renderer = picture_renderer(formats, png_required=png_required)  # Chromium starts while pages are written
        out = run_dir / "cards"
        out.mkdir(exist_ok=True)
        taken: set[str] = {"comparison", "index"}
        slugs = {s: slugify(s, taken) for s in names}
        written = write_pages(run, chosen, slugs, formats, renderer, whole_run=systems is None)
    except BaseException:
        if renderer:
            renderer.close()
        raise
    pictures_written = renderer.finish() if renderer else []
    if renderer and renderer.blocked:
        log.warning(f"the pages asked for {renderer.blocked[:3]}; blocked (pages must be self-contained)")
    return sorted({*written, *pictures_written})


def write_pages(
    run: Run,
    chosen: list[str],
    slugs: dict[str, str],
    formats: tuple[str, ...],
    renderer: Renderer | None,
    *,
    whole_run: bool,
) -> list[Path]:
    """Labels first (the renderer starts on them at once), then the reports and the run's pages."""
    out, env, written, doc = run.path / "cards", environment(), [], run.ratings
    html = "html" in formats or renderer is not None
    failures = {system: failure_summary(run, system) for system in chosen}
    normalised = normalised_scores(doc)  # the radar / small-multiple values, computed once
    if html:
        for system in chosen:
            slug = slugs[system]
            context = label_context(doc, system, failures=failures[system]["total"], report_href=f"{slug}.report.html")
            page = write(
                out / f"{slug}.html", env.get_template("label.html.j2").render(**context, generated=generated_line())
            )
            written.append(page)
            if renderer:
                renderer.submit(page, pdf=True)
    for system in chosen:
        slug = slugs[system]
        if html or "md" in formats:
            context = report_context(run, system, slug, failures[system], normalised)
        if html:
            written.append(write(out / f"{slug}.report.html", env.get_template("report.html.j2").render(**context)))
        if "md" in formats:
            for fig in context["figures"]:
                write(out / figure_file(slug, fig.name), fig.svg)
                written.append(out / figure_file(slug, fig.name))
            written.append(write(out / f"{slug}.md", env.get_template("card.md.j2").render(**context)))
        if "json" in formats:
            card = model_card(doc, system, failures=failures[system]["total"], report=f"{slug}.report.html")
            written.append(
                write(out / f"{slug}.model-card.json", json.dumps(card, indent=2, ensure_ascii=False) + "\n")
            )
        if "yaml" in formats:
            written.append(write(out / f"{slug}.model-index.yaml", model_index(doc, system)))
            results = eval_results(doc, system, date=generated_date())
            written.append(write(out / f"{slug}.eval_results.yaml", results))
    if whole_run and html:
        context = {
            **comparison_context(doc, slugs, normalised=normalised),
            "provenance": provenance(doc),
            "generated": generated_line(),
        }
        page = write(out / "comparison.html", env.get_template("comparison.html.j2").render(**context))
        written += [page, write(out / "index.html", env.get_template("index.html.j2").render(**context))]
        if renderer:
            renderer.submit(page)
    return written


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
