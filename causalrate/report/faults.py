"""Duration faults by severity (issue 44): ratings.json's `faults` section, the label's line per fault and the
detailed report's fault × severity table.

A row is one system under one duration fault at one level of the severity table (a `severity:` entry or a
member of a `grid: {severity: …}`): APE_true (the paired mean rise of the outcome) and that rise relative to
the system's clean outcome on the same windows ("its error rises by 40 %").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from causalrate.causal.effects import ape_true
from causalrate.perturb.faults import Fault
from causalrate.perturb.operators import OPERATORS
from causalrate.run import FaultEffect, RatingsDocument
from causalrate.score.scores import wide_column
from causalrate.score.wide import wide_tables

if TYPE_CHECKING:
    from causalrate.study import Result, Study

LABEL_LEVEL = 3  # the label's line per fault: its effect at this level (the sensors suite's)


def fault_name(operator: str) -> str:
    cls = OPERATORS.get(operator)
    return cls.fault if issubclass(cls, Fault) else operator


def fault_effects(study: Study, result: Result) -> list[FaultEffect]:
    """Per system, every graded duration fault of the suite: its APE_true and relative rise, in suite order."""
    graded = [p for p in study.suite if p.level is not None]
    if not graded:
        return []
    evidence = result.evidence
    ids = [p.id for p in graded]
    newest = {}
    if not evidence.newest.empty:  # the newest-point forecasts, under the id of the perturbation they place
        newest = wide_tables(
            evidence.newest,
            "outcome",
            perturbations=ids,
            n_windows=0 if evidence.table is None else len(evidence.table),
        )
    rows = []
    for system, wide in wide_column(evidence, "outcome").items():
        control = wide[evidence.control].to_numpy()
        for p in graded:
            if p.id not in wide.columns:
                continue
            effect, clean, rise = relative_rise(wide[p.id].to_numpy(), control)
            at_newest = newest[system][p.id].to_numpy() if system in newest else np.full(len(control), np.nan)
            effect_newest, _, rise_newest = relative_rise(at_newest, control)
            rows.append(
                FaultEffect.written(
                    system=system,
                    perturbation=p.id,
                    fault=p.operator_name,
                    name=fault_name(p.operator_name),
                    level=p.level,
                    ape_true=_clean(effect),
                    clean=_clean(clean),
                    rise=_clean(rise),
                    ape_newest=_clean(effect_newest),
                    rise_newest=_clean(rise_newest),
                )
            )
    return rows


def relative_rise(outcomes: np.ndarray, control: np.ndarray) -> tuple[float, float, float]:
    """(APE_true, the mean clean outcome on the same windows, their ratio); NaN where no window has both."""
    effect, n = ape_true(outcomes, control)
    if not n:
        return np.nan, np.nan, np.nan
    clean = float(control[np.isfinite(outcomes) & np.isfinite(control)].mean())
    return effect, clean, (effect / clean if clean != 0 else np.nan)


def _clean(x: float) -> float | None:
    return float(f"{x:.10g}") if np.isfinite(x) else None


def fault_lines(doc: RatingsDocument, system: str) -> list[str]:
    """One short line per fault family at level 3 (its severity-3 entry, else its grid's member), the label's
    heading saying the level and what the numbers are: "stuck reading: +5 % (at the newest point: +40 %)". Where
    too many of its forecasts failed to rate the fault's APE (or its newest-point APE) the line says so, never a
    rise from the windows that were left: a model whose forecasts all failed with the outage still on at the
    newest point read "gap in the data: no change"."""
    failed = failed_faults(doc, system)
    lines: dict[str, str] = {}
    for row in doc.faults:
        if row.system != system or row.level != LABEL_LEVEL or row.name in lines:
            continue
        line = f"{row.name}: {_rise_words(row.rise, ('ape', row.perturbation) in failed)}"
        newest_failed = ("ape_last", row.perturbation) in failed
        if row.rise_newest is not None or newest_failed:
            line += f" (at the newest point: {_rise_words(row.rise_newest, newest_failed)})"
        lines[row.name] = line
    return list(lines.values())


def failed_faults(doc: RatingsDocument, system: str) -> set[tuple[str, str]]:
    """(score, perturbation) of the system's APE rows rated insufficient: too many of its forecasts failed."""
    return {(r.score, r.perturbation) for r in doc.rows_of(system) if r.insufficient and r.score in ("ape", "ape_last")}


def _rise_words(rise: float | None, failed: bool = False) -> str:
    if failed:
        return "too many of its forecasts failed"
    if rise is None:
        return "not measured"
    if abs(rise) < 0.005:
        return "no change"
    return f"{'+' if rise > 0 else '−'}{max(1, int(abs(100 * rise) + 0.5)):,} %"  # whole percents, half up


def fault_table(doc: RatingsDocument, system: str) -> dict[str, Any] | None:
    """The fault × severity table of one system: per suite entry (a severity grid, or a fault at one level; a
    newest-point row beside the latter), the relative rise of its error and APE_true at each level, as text;
    None when the run graded no fault."""
    mine = [r for r in doc.faults if r.system == system]
    if not mine:
        return None
    failed = failed_faults(doc, system)
    rows: dict[str, dict[str, Any]] = {}
    for r in mine:
        record = doc.perturbation(r.perturbation)
        family = record.family if record is not None else r.perturbation  # a grid's id, or the entry's
        rows.setdefault(family, {"entry": family, "name": r.name, "cells": {}})["cells"][r.level] = _cell(
            r.rise, r.ape_true, ("ape", r.perturbation) in failed
        )
        newest_failed = ("ape_last", r.perturbation) in failed
        if r.rise_newest is not None or newest_failed:
            newest = rows.setdefault(
                f"{family}@last", {"entry": family, "name": f"{r.name}, still on at the newest point", "cells": {}}
            )
            newest["cells"][r.level] = _cell(r.rise_newest, r.ape_newest, newest_failed)
    return {"levels": sorted({r.level for r in mine}), "rows": list(rows.values())}


def _cell(rise: float | None, ape: float | None, failed: bool = False) -> str:
    if failed:
        return "failed"
    if rise is None:
        return "—"
    return f"{100 * rise:+.1f} % ({ape:.3g})"
