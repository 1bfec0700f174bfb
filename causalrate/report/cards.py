"""Rating cards from a finished run directory: two layers for people, two for machines.

Reads only RUN_DIR/ratings.json and RUN_DIR/forecasts.sqlite. Writes RUN_DIR/cards/, per system:
<slug>.html (the label: one screen, one printed page) with <slug>.png and <slug>.pdf,
<slug>.report.html (the detailed report) with <slug>.md (+ <slug>.<figure>.svg figures),
<slug>.model-card.json (Model Card Toolkit fields) and <slug>.model-index.yaml (Hugging Face);
for the run, comparison.html (+ .png) and index.html. Pages are self-contained (inline CSS,
SVG figures as data URIs, no JavaScript); every user-supplied string is escaped by jinja2.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, select_autoescape

from causalrate import __version__
from causalrate.config import REFERENCE_SYSTEMS, PerturbationSpec
from causalrate.errors import UserError
from causalrate.perturb import load_suite
from causalrate.perturb.suite import perturbation_seeds, stored_first
from causalrate.report import figures
from causalrate.report.comparison import (
    cell,
    comparison_context,
    fmt,
    normalised_scores,
    radar_labels,
    radar_scores,
)
from causalrate.report.estimators import EFFECT_COLUMNS, estimator, facts, label
from causalrate.report.figures import Figure
from causalrate.report.headlines import headlines, warnings
from causalrate.report.label import label_context
from causalrate.report.machine import model_card, model_index
from causalrate.report.outputs import RATINGS_SCHEMA
from causalrate.report.render import Renderer, browser_problem, find_chromium

FORMATS = ("html", "png", "pdf", "md", "json", "yaml")


@dataclass(frozen=True)
class Run:
    """A finished run: its ratings document and its forecast store."""

    path: Path
    doc: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> Run:
        ratings = path / "ratings.json"
        if not ratings.is_file() or not (path / "forecasts.sqlite").is_file():
            raise UserError(f"{path}: not a causalrate run directory (needs ratings.json and forecasts.sqlite)")
        try:
            doc = json.loads(ratings.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{ratings}: not valid JSON ({exc})") from None
        if doc.get("schema") != RATINGS_SCHEMA:
            raise UserError(
                f"{ratings}: schema {doc.get('schema')!r}; this causalrate reads {RATINGS_SCHEMA!r}. "
                f"Re-rate the run to upgrade it: causalrate rate {path}"
            )
        return cls(path=path, doc=doc)

    @property
    def ratings(self) -> pd.DataFrame:
        return pd.DataFrame(self.doc["ratings"])

    @cached_property
    def normalised(self) -> dict[str, list[float]]:
        """The radar / small-multiple values, computed once per rendering."""
        return normalised_scores(self.doc)

    @property
    def systems(self) -> list[str]:
        return [s["name"] for s in self.doc["systems"]]

    @property
    def control(self) -> str:
        return self.doc["perturbations"][0]["id"]

    def query(self, sql: str, params: tuple = ()) -> pd.DataFrame:
        with closing(sqlite3.connect(f"file:{self.path / 'forecasts.sqlite'}?mode=ro", uri=True)) as conn:
            return pd.read_sql_query(sql, conn, params=params)


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


def generated_line() -> str:
    """The one line allowed to differ between two renderings of the same run (SOURCE_DATE_EPOCH fixes it)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return f"Generated {when.strftime('%Y-%m-%d %H:%M UTC')} by causalrate {__version__}"


def report_context(run: Run, system: str, slug: str, failures: dict[str, Any]) -> dict[str, Any]:
    """The detailed report: every rating with its estimator, interval and stability, and the figures."""
    doc = run.doc
    levels = doc["levels"]
    perturbations = doc["perturbations"]
    mine = {(r["score"], r["perturbation"]): r for r in doc["ratings"] if r["system"] == system}
    draws = max((e.get("draws") or 0 for e in doc.get("effects", []) if e["system"] == system), default=0) or None
    tables: dict[str, list[dict[str, Any]]] = {"robustness": [], "accuracy": []}
    for score_name in dict.fromkeys([*radar_scores(), *(k[0] for k in mine)]):
        cells = {p["id"]: cell(mine.get((score_name, p["id"])), levels) for p in perturbations}
        if not any(cells.values()):
            continue  # not rated, or rated per severity grid: see `grids`
        kind = "accuracy" if cells.get(run.control) else "robustness"  # rated on the clean input too
        tables[kind].append(
            {
                "score": score_name,
                "label": label(score_name),
                "estimator": estimator(score_name, draws),
                "meaning": facts(score_name).description,
                "cells": cells,
            }
        )
    ids = {p["id"] for p in perturbations}
    grids = [
        {
            "family": r["perturbation"],
            "label": label(r["score"]),
            "estimator": estimator(r["score"]),
            "cell": cell(r, levels),
            "meaning": facts(r["score"]).description,
        }
        for (_, perturbation), r in mine.items()
        if perturbation not in ids
    ]
    heads = headlines(doc, system)
    return {
        "system": doc["systems"][run.systems.index(system)],
        "slug": slug,
        "levels": levels,
        "headlines": heads,
        "n_systems": len(run.systems),
        "others": [s for s in run.systems if s != system],
        "perturbations": perturbations,
        "tables": tables,
        "grids": grids,
        "figures": card_figures(run, system),
        "failures": failures,
        "draws": draws,
        "effect_columns": {k: v.format(draws=draws or "the") for k, v in EFFECT_COLUMNS.items()},
        "effects": [e for e in doc.get("effects", []) if e["system"] == system],
        "checks": [c for c in doc.get("checks") or [] if c.get("system") == system],
        "refutations": [r for r in doc.get("refutations", []) if r["system"] == system],
        "warnings": warnings(doc, system, failures=failures["total"]),
        "fragility": fragility_rules(doc, system),
        "study": doc["study"],
        "outcome": doc["outcome"],
        "method_note": doc["provenance"]["method_note"],
        "not_rated": doc.get("not_rated", {}),
        "provenance": provenance(run),
        "generated": generated_line(),
    }


def provenance(run: Run) -> dict[str, Any]:
    prov = run.doc["provenance"]
    config_hash = hashlib.sha256(json.dumps(prov["config"], sort_keys=True).encode()).hexdigest()
    return {
        "config_hash": config_hash[:16],
        "data_hash": prov["data_hash"][:16],
        "seed": prov["seed"],
        "versions": ", ".join(f"{k} {v}" for k, v in sorted(prov["versions"].items())),
        "data_source": prov["data_source"],
    }


def card_figures(run: Run, system: str) -> list[Figure]:
    doc = run.doc
    colours = figures.system_colours(run.systems)
    references = [s["name"] for s in doc["systems"] if s["type"] in REFERENCE_SYSTEMS and s["name"] != system]
    scores = run.normalised
    shown = {system: scores[system], **{r: scores[r] for r in references}}
    out = [
        Figure(
            "radar",
            figures.radar(
                radar_labels(),
                shown,
                title="Scores, normalised: outer edge = best of the systems compared",
                colours=colours,
            ),
            alt=f"Radar chart of {system}'s scores against the reference systems "
            f"({', '.join(references) or 'none'}); each axis is scaled so the outer edge is the best value "
            "among the compared systems and the centre the worst.",
        )
    ]
    example = example_figure(run, system)
    if example:
        out.append(example)
    curves = dose_curves(run, [system, *references])
    if curves[system]:
        out.append(
            Figure(
                "dose",
                figures.dose_response(curves, outcome=doc["outcome"], labels=severity_labels(run), colours=colours),
                alt=f"Line chart: {system}'s absolute perturbation effect (APE) at each severity of each "
                f"severity grid, beside the reference systems ({', '.join(references) or 'none'}).",
            )
        )
    fragile = fragility_figure(doc, system)
    if fragile:
        out.append(fragile)
    effects = [e for e in doc["effects"] if e["system"] == system]
    if effects:
        perts = [p["id"] for p in doc["perturbations"][1:]]
        schemes = list(dict.fromkeys(e["scheme"] for e in effects))
        out.append(
            Figure(
                "ape",
                figures.ape_bars(effects, perturbations=perts, schemes=schemes, outcome=doc["outcome"]),
                alt=f"Bar chart: for each perturbation and assignment scheme, {system}'s true (randomized), "
                "observed and deconfounded APE, with 2.5–97.5 % ranges over the observational draws.",
            )
        )
        table = balance_table(effects)
        if table:
            out.append(
                Figure(
                    "balance",
                    balance_svg(tuple(table.items())),
                    alt="Horizontal bars: absolute standardised mean difference of each confounder "
                    "between perturbed and clean windows, before and after matching.",
                )
            )
    return out + optional_figures(doc, system)


def optional_figures(doc: dict[str, Any], system: str) -> list[Figure]:
    """The recency profile and the fragility rules, when ratings.json carries them."""
    out = []
    recency = [r for r in doc.get("recency_profile") or [] if r.get("system") == system and r.get("ape") is not None]
    if recency:
        out.append(
            Figure(
                "recency",
                figures.recency_profile(recency, outcome=doc["outcome"]),
                alt=f"Line chart: {system}'s APE by how recent the perturbed input point was, per perturbation, "
                "with 95 % intervals.",
            )
        )
    per = (doc.get("heterogeneity") or {}).get(system) or {}
    rules = [{"perturbation": p, **r} for p, found in sorted(per.items()) for r in (found or {}).get("rules") or []]
    rules = sorted((r for r in rules if r.get("cate") is not None), key=lambda r: -abs(r["cate"]))[:8]
    if rules:
        out.append(
            Figure(
                "fragility",
                figures.fragility_rules(rules),
                alt=f"Dot plot: the subgroups where the perturbation changes {system}'s error most (conditional "
                "effect with 95 % interval), largest first.",
            )
        )
    return out


def fragility_rules(doc: dict[str, Any], system: str) -> list[dict[str, Any]]:
    """Per perturbation: the fragility map's rules in words (empty when the map is off or absent)."""
    per = doc.get("heterogeneity", {}).get(system, {})
    return [
        {"perturbation": p, "spread": fmt(h.get("spread")), "rules": [r["text"] for r in h.get("rules", [])]}
        for p, h in per.items()
        if h.get("rules")
    ]


def fragility_figure(doc: dict[str, Any], system: str) -> Figure | None:
    """The main driver's chart for the perturbation whose effect is most uneven (largest spread)."""
    per = {p: h for p, h in doc.get("heterogeneity", {}).get(system, {}).items() if h.get("profile")}
    if not per:
        return None
    p = max(sorted(per), key=lambda k: per[k].get("spread") or 0.0)
    profile = per[p]["profile"]
    return Figure(
        "driver",
        figures.fragility(profile, title=f"{system}, {p}: where it is fragile", outcome=doc["outcome"]),
        alt=f"Line chart: {system}'s mean individual effect of {p} along {profile['covariate']}, "
        "the covariate that separates its effects most, against the average effect.",
    )


def dose_curves(run: Run, systems: list[str]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per system and severity grid: (severity, APE_true) points."""
    graded = {p["id"]: (p["family"], p["severity"]) for p in run.doc["perturbations"] if p.get("severity") is not None}
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {s: {} for s in systems}
    seen = set()
    for e in run.doc["effects"]:
        key = (e["system"], e["perturbation"])
        if e["system"] in curves and e["perturbation"] in graded and key not in seen and e["ape_true"] is not None:
            seen.add(key)
            family, severity = graded[e["perturbation"]]
            curves[e["system"]].setdefault(family, []).append((severity, e["ape_true"]))
    return curves


def severity_labels(run: Run) -> dict[str, str]:
    return {p["family"]: p.get("severity_label", "") for p in run.doc["perturbations"] if p.get("severity") is not None}


@lru_cache(maxsize=8)
def balance_svg(table: tuple[tuple[str, tuple[float, float]], ...]) -> str:
    """Matching balances the windows, not the systems: systems without failures share one figure, drawn once."""
    return figures.balance(dict(table), title="Covariate balance, mean over perturbations and schemes")


def balance_table(effects: list[dict]) -> dict[str, tuple[float, float]]:
    sums: dict[str, list[list[float]]] = {}
    for e in effects:
        for name, (before, after) in e.get("balance", {}).items():
            if before is not None and after is not None:
                sums.setdefault(name, []).append([before, after])
    return {n: tuple(np.mean(v, axis=0).tolist()) for n, v in sorted(sums.items())}


def replay_perturbation(run: Run, record: dict, row, window, clean: np.ndarray) -> np.ndarray:
    """The perturbed input a forecast row saw: its stored offsets (runs before v3: the series rule)."""
    spec = PerturbationSpec(
        id=record["id"],
        operator=record["operator"],
        period=record["period"],
        phase=record["phase"],
        params={} if record.get("combine") else record.get("params", {}),
        combine=record.get("combine"),
    )
    control = PerturbationSpec(id="control", operator="none")
    (_, perturbation) = load_suite([control, spec], base_dir=run.path, input_length=clean.size)
    first = stored_first(perturbation, getattr(row, "offsets", None), int(window.start))
    seeds = perturbation_seeds(run.doc["provenance"]["seed"], record["id"], [(window.series, int(window.start))])
    calibration = record.get("calibration")
    return perturbation.apply(
        clean[None, :],
        np.array([first]),
        seeds=seeds,
        calibration=None if calibration is None else np.array([calibration[window.series]]),
    )[0]


def example_figure(run: Run, system: str) -> Figure | None:
    """The (perturbation, window) where the perturbation raised this system's error most."""
    outcome = f"m_{run.doc['outcome']}"
    offsets = ", p.offsets" if "offsets" in set(run.query("PRAGMA table_info(forecasts)")["name"]) else ""
    rows = run.query(  # the ranking first, without the forecast texts: sorting them would copy every one
        f'SELECT p.window, p.perturbation, p."{outcome}" - c."{outcome}" AS harm{offsets} '
        "FROM forecasts p JOIN forecasts c ON c.system = p.system AND c.window = p.window AND c.perturbation = ? "
        "WHERE p.system = ? AND p.perturbation != ? AND p.error IS NULL AND c.error IS NULL "
        "ORDER BY harm DESC, p.perturbation, p.window LIMIT 1",
        (run.control, system, run.control),
    )
    if rows.empty or not rows.iloc[0].harm > 0:
        return None  # no perturbation raised the error: nothing to show
    top = rows.iloc[0]
    texts = run.query(
        "SELECT perturbation, forecast FROM forecasts WHERE system = ? AND window = ? AND perturbation IN (?, ?)",
        (system, int(top.window), top.perturbation, run.control),
    ).set_index("perturbation")["forecast"]
    forecast_perturbed, forecast_clean = texts[top.perturbation], texts[run.control]
    window = run.query(
        "SELECT series, start, first_forecast_date, input, truth FROM windows WHERE window = ?", (int(top.window),)
    ).iloc[0]
    clean = np.array(json.loads(window.input), dtype=float)
    record = next(p for p in run.doc["perturbations"] if p["id"] == top.perturbation)
    perturbed = replay_perturbation(run, record, top, window, clean)
    effect = f"its error rose by {top.harm:.3g} ({run.doc['outcome']})"
    title = f"{system}, {top.perturbation} on {window.series}, forecasting from {window.first_forecast_date}:\n{effect}"
    fig = figures.example_window(
        clean=clean,
        perturbed=perturbed,
        truth=np.array(json.loads(window.truth)),
        forecast_clean=np.array(json.loads(forecast_clean)),
        forecast_perturbed=np.array(json.loads(forecast_perturbed)),
        title=title,
    )
    alt = (
        f"Line chart of the window where {top.perturbation} hurt {system} most: {window.series}, forecasts from "
        f"{window.first_forecast_date}. Clean and perturbed inputs, the true continuation, and the system's "
        f"forecasts from each; {effect}."
    )
    return Figure("example", fig, alt)


def failure_summary(run: Run, system: str) -> dict[str, Any]:
    per = run.query(
        "SELECT perturbation, count(*) AS total, sum(error IS NOT NULL) AS failed FROM forecasts "
        "WHERE system = ? GROUP BY perturbation ORDER BY perturbation",
        (system,),
    )
    examples = run.query(
        "SELECT error, count(*) AS n FROM forecasts WHERE system = ? AND error IS NOT NULL "
        "GROUP BY error ORDER BY n DESC, error LIMIT 5",
        (system,),
    )
    return {
        "per_perturbation": per.to_dict("records"),
        "examples": examples.to_dict("records"),
        "total": int(per["failed"].sum()) if len(per) else 0,
    }


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("causalrate.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = fmt  # None / NaN → "—": a refuter or estimator may have no value
    return env


def render_cards(
    run_dir: Path, *, systems: list[str] | None = None, formats: tuple[str, ...] = FORMATS, png_required: bool = False
) -> list[Path]:
    """Write the labels, reports, machine-readable cards, comparison and index pages; return the files.

    PNG and PDF need playwright and Chromium; when either is missing they are skipped with a
    warning, unless png_required. Every PNG and PDF of the call is rendered in one browser session.
    """
    run = Run.load(run_dir)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UserError(f"--format: unknown {unknown}; expected a comma-separated subset of {list(FORMATS)}")
    chosen = systems or run.systems
    missing = [s for s in chosen if s not in run.systems]
    if missing:
        raise UserError(f"--system: {missing} not in this run; systems: {run.systems}")
    pictures = [f for f in ("png", "pdf") if f in formats]
    problem = browser_problem() if pictures else None
    if problem:
        if png_required:
            raise UserError(problem)
        print(f"causalrate: warning: {problem}; wrote the other formats", file=sys.stderr)
        pictures = []
    out = run_dir / "cards"
    out.mkdir(exist_ok=True)
    taken: set[str] = {"comparison", "index"}
    slugs = {s: slugify(s, taken) for s in run.systems}
    renderer = Renderer(find_chromium(), png="png" in pictures, pdf="pdf" in pictures) if pictures else None
    if renderer:
        renderer.start()  # Chromium starts while the pages are written
    try:
        written = write_pages(run, chosen, slugs, formats, renderer, whole_run=systems is None)
    finally:
        pictures_written = renderer.finish() if renderer else []
    if renderer and renderer.blocked:
        print(
            f"causalrate: warning: the pages asked for {renderer.blocked[:3]}; blocked (pages must be self-contained)"
        )
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
    out, env, written = run.path / "cards", _env(), []
    html = "html" in formats or renderer is not None
    failures = {system: failure_summary(run, system) for system in chosen}
    if html:
        for system in chosen:
            slug = slugs[system]
            context = label_context(
                run.doc, system, failures=failures[system]["total"], report_href=f"{slug}.report.html"
            )
            page = write(
                out / f"{slug}.html", env.get_template("label.html.j2").render(**context, generated=generated_line())
            )
            written.append(page)
            if renderer:
                renderer.submit(page, pdf=True)
    for system in chosen:
        slug = slugs[system]
        if html or "md" in formats:
            context = report_context(run, system, slug, failures[system])
        if html:
            written.append(write(out / f"{slug}.report.html", env.get_template("report.html.j2").render(**context)))
        if "md" in formats:
            for fig in context["figures"]:
                write(out / figure_file(slug, fig.name), fig.svg)
                written.append(out / figure_file(slug, fig.name))
            written.append(write(out / f"{slug}.md", env.get_template("report.md.j2").render(**context)))
        if "json" in formats:
            card = model_card(run.doc, system, failures=failures[system]["total"], report=f"{slug}.report.html")
            written.append(
                write(out / f"{slug}.model-card.json", json.dumps(card, indent=2, ensure_ascii=False) + "\n")
            )
        if "yaml" in formats:
            written.append(write(out / f"{slug}.model-index.yaml", model_index(run.doc, system)))
    if whole_run and html:
        context = {
            **comparison_context(run.doc, slugs, normalised=run.normalised),
            "provenance": provenance(run),
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
