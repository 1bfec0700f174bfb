"""Rating cards (one per system) and the comparison page, from a finished run directory.

Reads only RUN_DIR/ratings.json and RUN_DIR/forecasts.sqlite. Writes RUN_DIR/cards/:
<slug>.html (self-contained: inline CSS, images as data URIs, no JavaScript), <slug>.png
(a headless-Chromium screenshot of that HTML), <slug>.md (+ <slug>.<figure>.png figures) and
comparison.html. Every user-supplied string is escaped by jinja2's autoescaping.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, select_autoescape

from causalrate import __version__
from causalrate.config import REFERENCE_SYSTEMS, PerturbationSpec
from causalrate.errors import UserError
from causalrate.perturb import load_suite
from causalrate.perturb.suite import perturbation_seeds
from causalrate.rate.ratings import robustness_rows
from causalrate.report import figures
from causalrate.report.outputs import RATINGS_SCHEMA
from causalrate.score.scores import SCORES

FORMATS = ("html", "png", "md")
RADAR_SCORES = [
    "wrs_industry",
    "wrs_company",
    "ape",
    "ape_industry",
    "ape_company",
    "pie_industry",
    "pie_company",
    "smape",
    "mase",
    "crps",
    "sign_accuracy",
    "failure_rate",
]


@dataclass(frozen=True)
class Figure:
    name: str
    png: bytes
    alt: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode()


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
    """A Markdown card's figure file: '.' never occurs in a slug, so `naive.ape.png` (a figure of `naive`)
    cannot collide with `naive-ape.png` (the card of a system named `naive-ape`)."""
    return f"{slug}.{figure}.png"


def generated_line() -> str:
    """The one line allowed to differ between two renderings of the same run (SOURCE_DATE_EPOCH fixes it)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return f"Generated {when.strftime('%Y-%m-%d %H:%M UTC')} by causalrate {__version__}"


def normalised_scores(run: Run) -> dict[str, list[float]]:
    """Per system, each radar axis in [0, 1] (1 = best of the compared systems), averaged over perturbations."""
    frame = run.ratings
    frame = frame[frame["perturbation"] != run.control]
    out = {s: [] for s in run.systems}
    for score in RADAR_SCORES:
        part = frame[frame["score"] == score]
        per_system = {s: [] for s in run.systems}
        for _, group in part.groupby("perturbation"):
            raw = group.set_index("system")["raw"].astype(float)
            lo, hi = raw.min(), raw.max()
            for system, value in raw.items():
                if not np.isfinite(value):
                    goodness = 0.0
                elif hi == lo:
                    goodness = 1.0
                else:
                    goodness = (value - lo) / (hi - lo)
                    goodness = goodness if SCORES.get(score).higher_is_better else 1 - goodness
                per_system[system].append(goodness)
        for system in run.systems:
            out[system].append(float(np.mean(per_system[system])) if per_system[system] else np.nan)
    return out


def radar_labels() -> list[str]:
    return [SCORES.get(s).label for s in RADAR_SCORES]


def card_context(run: Run, system: str, slug: str) -> dict[str, Any]:
    doc = run.doc
    meta = next(s for s in doc["systems"] if s["name"] == system)
    frame = run.ratings
    levels = doc["levels"]
    mine = frame[frame["system"] == system].set_index(["score", "perturbation"])
    perturbations = doc["perturbations"]
    tables = {"robustness": [], "accuracy": []}
    for score_name in dict.fromkeys([*RADAR_SCORES, *frame["score"]]):
        if score_name not in mine.index.get_level_values(0):
            continue
        score = SCORES.get(score_name)
        cells = {
            p["id"]: _cell(mine.loc[(score_name, p["id"])])
            for p in perturbations
            if (score_name, p["id"]) in mine.index
        }
        if not any(cells):
            continue  # rated per severity grid, not per perturbation: see `grids`
        kind = "robustness" if score.robustness else "accuracy"
        tables[kind].append({"score": score_name, "label": score.label, "meaning": score.description, "cells": cells})
    ids = {p["id"] for p in perturbations}
    grids = [
        {
            "family": r["perturbation"],
            "label": SCORES.get(r["score"]).label,
            "rating": int(r["rating"]),
            "raw": _fmt(r["raw"]),
            "meaning": SCORES.get(r["score"]).description,
        }
        for r in frame[(frame["system"] == system) & ~frame["perturbation"].isin(ids)].to_dict("records")
    ]
    others = [s for s in run.systems if s != system]
    figs = card_figures(run, system)
    failures = failure_summary(run, system)
    return {
        "system": meta,
        "slug": slug,
        "levels": levels,
        "overall": doc["overall"].get(system),
        "n_systems": len(run.systems),
        "others": others,
        "perturbations": perturbations,
        "tables": tables,
        "grids": grids,
        "figures": figs,
        "failures": failures,
        "overall_stability": doc.get("overall_stability", {}).get(system),
        "refutations": [r for r in doc.get("refutations", []) if r["system"] == system],
        "study": doc["study"],
        "outcome": doc["outcome"],
        "method_note": doc["provenance"]["method_note"],
        "not_rated": doc.get("not_rated", {}),
        "provenance": provenance(run),
        "generated": generated_line(),
    }


def _cell(row: pd.Series) -> dict[str, Any]:
    """One rating cell: rating (or '≥ k' when inconclusive), raw value, interval and stability."""
    interval = row.get("interval")
    stability = row.get("stability")
    return {
        "rating": int(row["rating"]),
        "shown": row.get("display") if isinstance(row.get("display"), str) else str(int(row["rating"])),
        "raw": _fmt(row["raw"]),
        "interval": f"[{_fmt(interval[0], 3)}, {_fmt(interval[1], 3)}]" if isinstance(interval, list) else "",
        "stability": f"kept {100 * stability:.0f} %" if isinstance(stability, float) else "",
        "unstable": isinstance(stability, float) and stability < 0.8,
        "inconclusive": bool(row.get("inconclusive") is True),
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
    references = [s["name"] for s in doc["systems"] if s["type"] in REFERENCE_SYSTEMS and s["name"] != system]
    scores = normalised_scores(run)
    shown = {system: scores[system], **{r: scores[r] for r in references}}
    out = [
        Figure(
            "radar",
            figures.png(
                figures.radar(
                    radar_labels(), shown, title="Scores, normalised: outer edge = best of the systems compared"
                )
            ),
            alt=f"Radar chart of {system}'s eleven scores against the reference systems "
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
                figures.png(figures.dose_response(curves, outcome=doc["outcome"], labels=severity_labels(run))),
                alt=f"Line chart: {system}'s absolute perturbation effect (APE) at each severity of each "
                f"severity grid, beside the reference systems ({', '.join(references) or 'none'}).",
            )
        )
    effects = [e for e in doc["effects"] if e["system"] == system]
    if effects:
        perts = [p["id"] for p in doc["perturbations"][1:]]
        schemes = list(dict.fromkeys(e["scheme"] for e in effects))
        out.append(
            Figure(
                "ape",
                figures.png(figures.ape_bars(effects, perturbations=perts, schemes=schemes, outcome=doc["outcome"])),
                alt=f"Bar chart: for each perturbation and assignment scheme, {system}'s true (randomized), "
                "observed and deconfounded APE, with 2.5–97.5 % ranges over the observational draws.",
            )
        )
        table = balance_table(effects)
        if table:
            out.append(
                Figure(
                    "balance",
                    figures.png(figures.balance(table, title="Covariate balance, mean over perturbations and schemes")),
                    alt="Horizontal bars: absolute standardised mean difference of each confounder "
                    "between perturbed and clean windows, before and after matching.",
                )
            )
    return out


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


def balance_table(effects: list[dict]) -> dict[str, tuple[float, float]]:
    sums: dict[str, list[list[float]]] = {}
    for e in effects:
        for name, (before, after) in e.get("balance", {}).items():
            if before is not None and after is not None:
                sums.setdefault(name, []).append([before, after])
    return {n: tuple(np.mean(v, axis=0).tolist()) for n, v in sorted(sums.items())}


def example_figure(run: Run, system: str) -> Figure | None:
    """The (perturbation, window) where the perturbation raised this system's error most."""
    outcome = f"m_{run.doc['outcome']}"
    rows = run.query(
        f'SELECT p.window, p.perturbation, p."{outcome}" - c."{outcome}" AS harm, p.forecast AS fp, c.forecast AS fc '
        "FROM forecasts p JOIN forecasts c ON c.system = p.system AND c.window = p.window AND c.perturbation = ? "
        "WHERE p.system = ? AND p.perturbation != ? AND p.error IS NULL AND c.error IS NULL "
        "ORDER BY harm DESC, p.perturbation, p.window LIMIT 1",
        (run.control, system, run.control),
    )
    if rows.empty:
        return None
    top = rows.iloc[0]
    window = run.query(
        "SELECT series, start, first_forecast_date, input, truth FROM windows WHERE window = ?", (int(top.window),)
    ).iloc[0]
    clean = np.array(json.loads(window.input), dtype=float)
    record = next(p for p in run.doc["perturbations"] if p["id"] == top.perturbation)
    spec = PerturbationSpec(
        id=record["id"],
        operator=record["operator"],
        period=record["period"],
        phase=record["phase"],
        params=record.get("params", {}),
    )
    control = PerturbationSpec(id="control", operator="none")
    (_, perturbation) = load_suite([control, spec], base_dir=run.path, input_length=clean.size)
    seeds = perturbation_seeds(run.doc["provenance"]["seed"], record["id"], [(window.series, int(window.start))])
    perturbed = perturbation.apply(clean[None, :], np.array([int(window.start)]), seeds=seeds)[0]
    effect = (
        f"its error rose by {top.harm:.3g} ({run.doc['outcome']})"
        if top.harm > 0
        else "no perturbation raised its error on any window"
    )
    title = f"{system}, {top.perturbation} on {window.series}, forecasting from {window.first_forecast_date}:\n{effect}"
    fig = figures.example_window(
        clean=clean,
        perturbed=perturbed,
        truth=np.array(json.loads(window.truth)),
        forecast_clean=np.array(json.loads(top.fc)),
        forecast_perturbed=np.array(json.loads(top.fp)),
        title=title,
    )
    alt = (
        f"Line chart of the window where {top.perturbation} hurt {system} most: {window.series}, forecasts from "
        f"{window.first_forecast_date}. Clean and perturbed inputs, the true continuation, and the system's "
        f"forecasts from each; {effect}."
    )
    return Figure("example", figures.png(fig), alt)


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


def comparison_context(run: Run, slugs: dict[str, str]) -> dict[str, Any]:
    doc = run.doc
    frame = run.ratings
    table = []
    for perturbation in dict.fromkeys([*(p["id"] for p in doc["perturbations"]), *frame["perturbation"]]):
        for score in dict.fromkeys([*RADAR_SCORES, *frame["score"]]):
            part = frame[(frame["perturbation"] == perturbation) & (frame["score"] == score)].set_index("system")
            if part.empty:
                continue
            table.append(
                {
                    "perturbation": perturbation,
                    "score": SCORES.get(score).label,
                    "cells": [
                        {"rating": int(part.loc[s, "rating"]), "raw": _fmt(part.loc[s, "raw"])}
                        if s in part.index
                        else None
                        for s in run.systems
                    ],
                }
            )
    robust = robustness_rows(frame, control=run.control)
    mean_robust = robust.groupby("system")["rating"].mean()
    groups = []
    for key, title in (("modality", "Modality"), ("family", "Family"), ("architecture", "Architecture")):
        by: dict[str, list[str]] = {}
        for s in doc["systems"]:
            by.setdefault(str(s.get(key) or "not declared"), []).append(s["name"])
        groups.append(
            {
                "title": title,
                "rows": [
                    {
                        "group": g,
                        "systems": names,
                        "mean_robustness": _fmt(np.mean([mean_robust.get(n, np.nan) for n in names])),
                        "mean_overall": _fmt(np.mean([doc["overall"].get(n, np.nan) for n in names])),
                    }
                    for g, names in sorted(by.items())
                ],
            }
        )
    params = {
        s["name"]: (s["parameters"], float(mean_robust.get(s["name"], np.nan)))
        for s in doc["systems"]
        if s.get("parameters")
    }
    figs = [
        Figure(
            "radar",
            figures.png(
                figures.radar(
                    radar_labels(),
                    normalised_scores(run),
                    title="All systems, normalised: outer edge = best of the systems compared",
                )
            ),
            alt="Radar chart overlaying every compared system's eleven normalised scores; the outer edge is "
            "the best value among the systems.",
        )
    ]
    if len(params) >= 2:
        figs.append(
            Figure(
                "parameters",
                figures.png(figures.scatter_parameters(params, levels=doc["levels"])),
                alt="Scatter plot of parameter count against mean robustness rating per system.",
            )
        )
    return {
        "doc": doc,
        "systems": doc["systems"],
        "slugs": slugs,
        "table": table,
        "groups": groups,
        "figures": figs,
        "params": params,
        "n_systems": len(run.systems),
        "levels": doc["levels"],
        "generated": generated_line(),
        "provenance": provenance(run),
    }


def _env() -> Environment:
    return Environment(
        loader=PackageLoader("causalrate.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_cards(
    run_dir: Path, *, systems: list[str] | None = None, formats: tuple[str, ...] = FORMATS, png_required: bool = False
) -> list[Path]:
    """Write the cards (and the comparison page) for a run; return the files written.

    PNG needs Chromium. When it is missing, PNG is skipped with a warning unless png_required.
    """
    run = Run.load(run_dir)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UserError(f"--format: unknown {unknown}; expected a comma-separated subset of {list(FORMATS)}")
    chosen = systems or run.systems
    missing = [s for s in chosen if s not in run.systems]
    if missing:
        raise UserError(f"--system: {missing} not in this run; systems: {run.systems}")
    browser = find_chromium() if "png" in formats else None
    if "png" in formats and browser is None:
        message = "PNG cards need Chromium (Debian: apt-get install chromium); set CAUSALRATE_CHROMIUM to its path"
        if png_required:
            raise UserError(message)
        print(f"causalrate: warning: {message}; wrote the other formats", file=sys.stderr)
    out = run_dir / "cards"
    out.mkdir(exist_ok=True)
    taken: set[str] = {"comparison"}
    slugs = {s: slugify(s, taken) for s in run.systems}
    env, written = _env(), []
    for system in chosen:
        context = card_context(run, system, slugs[system])
        slug = slugs[system]
        html_path = out / f"{slug}.html"
        if "html" in formats or "png" in formats:
            html_path.write_text(env.get_template("card.html.j2").render(**context), encoding="utf-8")
            written.append(html_path)
        if "png" in formats and browser:
            written.append(screenshot(browser, html_path, out / f"{slug}.png"))
            if "html" not in formats:
                html_path.unlink()
                written.remove(html_path)
        if "md" in formats:
            for fig in context["figures"]:
                (out / figure_file(slug, fig.name)).write_bytes(fig.png)
            md = env.get_template("card.md.j2").render(**context)
            (out / f"{slug}.md").write_text(md, encoding="utf-8")
            written.append(out / f"{slug}.md")
    if systems is None and "html" in formats:
        page = out / "comparison.html"
        page.write_text(
            env.get_template("comparison.html.j2").render(**comparison_context(run, slugs)), encoding="utf-8"
        )
        written.append(page)
    return written


def find_chromium() -> str | None:
    configured = os.environ.get("CAUSALRATE_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]


def chromium(browser: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            timeout=timeout,
            check=False,
        )


SCREEN_HEIGHTS = (8000, 16000, 32000)  # window heights tried in turn until the page ends inside the window


def screenshot(browser: str, html: Path, png_path: Path, *, width: int = 1000) -> Path:
    """Full-page PNG of a local HTML file: a tall window (taller while the content reaches its bottom edge),
    then the blank bottom cropped away."""
    from PIL import Image

    for height in SCREEN_HEIGHTS:
        window, uri = f"--window-size={width},{height}", html.resolve().as_uri()
        result = chromium(browser, window, f"--screenshot={png_path}", uri)
        if not png_path.is_file():
            raise UserError(f"Chromium could not screenshot {html}: {result.stderr.decode(errors='replace')[-500:]}")
        with Image.open(png_path) as image:
            rgb = np.asarray(image.convert("RGB"))
        content_rows = np.flatnonzero((rgb < 250).any(axis=(1, 2)))
        bottom = int(content_rows[-1]) + 24 if content_rows.size else rgb.shape[0]
        if bottom < rgb.shape[0]:  # a blank margin below the content: nothing was cut
            break
    card = Image.fromarray(rgb[: min(bottom, rgb.shape[0])]).quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    card.save(png_path, optimize=True)  # a 256-colour palette keeps text crisp at a quarter of the size
    return png_path


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "—"
    return f"{float(x):.{digits}g}"
