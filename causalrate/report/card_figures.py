"""The figures of one system's detailed report, from the typed run: ratings.json and the forecast store.

What each figure shows is decided here; how it is drawn is report.figures (plain dicts and arrays in).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from causalrate.config import REFERENCE_SYSTEMS
from causalrate.forecast.store import StoredWindow
from causalrate.perturb import load_suite
from causalrate.perturb.spec import PerturbationSpec
from causalrate.perturb.suite import perturbation_seeds, stored_first
from causalrate.report import figures
from causalrate.report.comparison import radar_labels
from causalrate.report.figures import Figure
from causalrate.run import Effect, PerturbationRecord, RatingsDocument, Run


def card_figures(run: Run, system: str, normalised: dict[str, list[float]]) -> list[Figure]:
    """Radar, the worst example window, dose curves, fragility, APE bars, balance, recency (when the run has them)."""
    doc = run.ratings
    colours = figures.system_colours(doc.system_names)
    references = [s.name for s in doc.systems if s.type in REFERENCE_SYSTEMS and s.name != system]
    shown = {system: normalised[system], **{r: normalised[r] for r in references}}
    out = [
        Figure(
            "radar",
            figures.radar(
                radar_labels(doc),
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
    curves = dose_curves(doc, [system, *references])
    if curves[system]:
        out.append(
            Figure(
                "dose",
                figures.dose_response(curves, outcome=doc.outcome, labels=severity_labels(doc), colours=colours),
                alt=f"Line chart: {system}'s absolute perturbation effect (APE) at each severity of each "
                f"severity grid, beside the reference systems ({', '.join(references) or 'none'}).",
            )
        )
    fragile = fragility_figure(doc, system)
    if fragile:
        out.append(fragile)
    effects = [e for e in doc.effects if e.system == system]
    if effects:
        perturbations = [p.id for p in doc.perturbations[1:]]
        schemes = list(dict.fromkeys(e.scheme for e in effects))
        out.append(
            Figure(
                "ape",
                figures.ape_bars(
                    [e.model_dump() for e in effects],
                    perturbations=perturbations,
                    schemes=schemes,
                    outcome=doc.outcome,
                ),
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


def optional_figures(doc: RatingsDocument, system: str) -> list[Figure]:
    """The recency profile and the fragility rules, when ratings.json carries them."""
    out = []
    recency = [r.model_dump() for r in doc.recency_profile if r.system == system and r.ape is not None]
    if recency:
        out.append(
            Figure(
                "recency",
                figures.recency_profile(recency, outcome=doc.outcome),
                alt=f"Line chart: {system}'s APE by how recent the perturbed input point was, per perturbation, "
                "with 95 % intervals.",
            )
        )
    per = doc.heterogeneity.get(system) or {}
    rules = [{"perturbation": p, **r.model_dump()} for p, found in sorted(per.items()) for r in found.rules]
    rules = sorted((r for r in rules if r["cate"] is not None), key=lambda r: -abs(r["cate"]))[:8]
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


def fragility_figure(doc: RatingsDocument, system: str) -> Figure | None:
    """The main driver's chart for the perturbation whose effect is most uneven (largest spread)."""
    per = {p: h for p, h in (doc.heterogeneity.get(system) or {}).items() if h.profile}
    if not per:
        return None
    p = max(sorted(per), key=lambda k: per[k].spread or 0.0)
    profile = per[p].profile or {}
    return Figure(
        "driver",
        figures.fragility(profile, title=f"{system}, {p}: where it is fragile", outcome=doc.outcome),
        alt=f"Line chart: {system}'s mean individual effect of {p} along {profile['covariate']}, "
        "the covariate that separates its effects most, against the average effect.",
    )


def dose_curves(doc: RatingsDocument, systems: list[str]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per system and severity grid: (severity, APE_true) points."""
    graded = {p.id: (p.family, p.severity) for p in doc.perturbations if p.severity is not None}
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {s: {} for s in systems}
    seen = set()
    for e in doc.effects:
        key = (e.system, e.perturbation)
        if e.system in curves and e.perturbation in graded and key not in seen and e.ape_true is not None:
            seen.add(key)
            family, severity = graded[e.perturbation]
            curves[e.system].setdefault(family, []).append((severity, e.ape_true))
    return curves


def severity_labels(doc: RatingsDocument) -> dict[str, str]:
    return {p.family: p.severity_label for p in doc.perturbations if p.severity is not None}


@lru_cache(maxsize=8)
def balance_svg(table: tuple[tuple[str, tuple[float, float]], ...]) -> str:
    """Matching balances the windows, not the systems: systems without failures share one figure, drawn once."""
    return figures.balance(dict(table), title="Covariate balance, mean over perturbations and schemes")


def balance_table(effects: list[Effect]) -> dict[str, tuple[float, float]]:
    sums: dict[str, list[list[float]]] = {}
    for e in effects:
        for name, (before, after) in e.balance.items():
            if before is not None and after is not None:
                sums.setdefault(name, []).append([before, after])
    return {n: tuple(np.mean(v, axis=0).tolist()) for n, v in sorted(sums.items())}


def replay_perturbation(run: Run, record: PerturbationRecord, offsets: str | None, window: StoredWindow) -> np.ndarray:
    """The perturbed input a forecast row saw: its stored offsets (runs before v3: the series rule)."""
    spec = PerturbationSpec(
        id=record.id,
        operator=record.operator,
        period=record.period,
        phase=record.phase,
        params={} if record.combine else record.params,
        combine=record.combine,
    )
    control = PerturbationSpec(id="control", operator="none")
    (_, perturbation) = load_suite([control, spec], base_dir=run.path, input_length=window.input.size)
    first = stored_first(perturbation, offsets, window.start)
    seeds = perturbation_seeds(run.ratings.provenance.seed, record.id, [(window.series, window.start)])
    calibration = record.calibration
    return perturbation.apply(
        window.input[None, :],
        np.array([first]),
        seeds=seeds,
        calibration=None if calibration is None else np.array([calibration[window.series]]),
    )[0]


def example_figure(run: Run, system: str) -> Figure | None:
    """The (perturbation, window) where the perturbation raised this system's error most."""
    doc = run.ratings
    with run.store() as store:
        rated = [p.id for p in doc.perturbations if p.id != doc.control]  # not the newest-point companions
        top = store.largest_harm(system=system, control=doc.control, metric=doc.outcome, among=rated)
        if top is None:
            return None  # no perturbation raised the error: nothing to show
        forecasts = store.forecast_values(
            system=system, window=int(top.window), perturbations=[top.perturbation, doc.control]
        )
        window = store.window(int(top.window))
    record = doc.perturbation(top.perturbation)
    if record is None:
        return None  # a perturbation the run no longer declares: nothing to replay
    perturbed = replay_perturbation(run, record, getattr(top, "offsets", None), window)
    effect = f"its error rose by {top.harm:.3g} ({doc.outcome})"
    title = f"{system}, {top.perturbation} on {window.series}, forecasting from {window.first_forecast_date}:\n{effect}"
    fig = figures.example_window(
        clean=window.input,
        perturbed=perturbed,
        truth=window.truth,
        forecast_clean=forecasts[doc.control],
        forecast_perturbed=forecasts[top.perturbation],
        title=title,
    )
    alt = (
        f"Line chart of the window where {top.perturbation} hurt {system} most: {window.series}, forecasts from "
        f"{window.first_forecast_date}. Clean and perturbed inputs, the true continuation, and the system's "
        f"forecasts from each; {effect}."
    )
    return Figure("example", fig, alt)
