"""The published absolute scale (METHOD §6, `scale: absolute`): fixed thresholds per score.

The thresholds and their rationale live in ratings/scales.yaml (shipped as causalrate.scales).
Each raw score is first expressed against a basis that does not depend on the compared systems.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd
import yaml

from causalrate.causal.wrs import DEFAULT_LEVELS
from causalrate.forecast.metrics import METRICS
from causalrate.score.scores import SCORES, Basis, Margin, Scale, WrsScore
from causalrate.systems.reference import last_observed

ABSOLUTE_LEVELS = 3
BASES = get_args(Basis)


def scales_path() -> Path:
    """The checkout's ratings/scales.yaml or, installed, the copy shipped as causalrate.scales."""
    checkout = Path(__file__).resolve().parents[2] / "ratings" / "scales.yaml"
    if checkout.is_file():
        return checkout
    return Path(str(resources.files("causalrate.scales") / "scales.yaml"))


@cache
def load_scales() -> dict[str, Scale]:
    doc = yaml.safe_load(scales_path().read_text(encoding="utf-8"))
    out = {}
    for name, entry in doc["scores"].items():
        if entry["basis"] not in BASES:
            raise ValueError(f"scales.yaml: {name}: unknown basis {entry['basis']!r}; expected one of {BASES}")
        out[name] = Scale(
            basis=entry["basis"],
            thresholds=tuple(entry["thresholds"]),
            higher_is_better=bool(entry.get("higher_is_better", False)),
            rationale=entry["rationale"],
        )
    return out


@cache
def published_margins() -> dict[str, Margin | None]:
    """score → the margin δ ratings/scales.yaml publishes for it (beside its thresholds, or under `margins:`);
    None where it publishes `margin: null`. Each must equal the score's own `margin` fact (tested)."""
    doc = yaml.safe_load(scales_path().read_text(encoding="utf-8"))
    entries = {name: entry.get("margin") for name, entry in doc["scores"].items()} | (doc.get("margins") or {})
    out: dict[str, Margin | None] = {}
    for name, entry in entries.items():
        if entry is not None and entry["basis"] not in BASES:
            raise ValueError(f"scales.yaml: {name}: margin: unknown basis {entry['basis']!r}; expected one of {BASES}")
        out[name] = None if entry is None else Margin(basis=entry["basis"], value=float(entry["value"]))
    return out


def scale_of(score: str) -> Scale | None:
    """The score's published scale: its own `absolute_scale`, else its entry in ratings/scales.yaml; a score
    generated for a data attribute (wrs_region) takes its built-in kin's (wrs_industry)."""
    cls = SCORES.get(score) if score in SCORES else None
    own = cls.absolute_scale if cls else None
    attribute = getattr(cls, "generated_for", None)
    kin = f"{score.removesuffix(attribute)}industry" if attribute and score.endswith(attribute) else score
    return own or load_scales().get(score) or load_scales().get(kin)


def naive_clean_error(inputs: np.ndarray, truth: np.ndarray, outcome, *, season: int) -> float:
    """Mean of a metric (`outcome`: the study's outcome for the APE basis, or an accuracy score's metric for
    its skill ratio) of the naive reference (last observed value repeated) on the clean windows, at the
    study's season (Dataset.season: MASE's scale is the same as in every forecast's metrics, so the naive
    reference's MASE skill ratio against itself is 1)."""
    forecast = np.repeat(last_observed(inputs)[:, None], truth.shape[1], axis=1)
    with np.errstate(all="ignore"):
        return float(np.nanmean(outcome(truth, forecast, inputs, season=season)))


def naive_scores(inputs: np.ndarray, truth: np.ndarray, *, season: int) -> dict[str, float]:
    """What the skill ratios divide by: per score on the `naive_ratio` basis (its published scale's or its
    margin's) with a registered metric, the naive reference's mean of that metric on the clean windows."""
    skill = [name for name in SCORES.names() if "naive_ratio" in (_scale_basis(name), _margin_basis(name))]
    metrics = {name: SCORES.get(name).metric for name in skill}
    return {
        name: naive_clean_error(inputs, truth, METRICS.get(metric), season=season)
        for name, metric in metrics.items()
        if metric is not None and metric in METRICS
    }


def wrs_maximum(pairs: int) -> float:
    """The largest WRS a grouping with this many pairs can reach."""
    return pairs * sum(w for _, w in DEFAULT_LEVELS)


def absolute_level(value: float, scale: Scale) -> int | None:
    """1..3 on the published thresholds; None when the value is undefined."""
    if not np.isfinite(value):
        return None
    first, second = scale.thresholds
    if scale.higher_is_better:
        return 1 if value >= first else 2 if value >= second else 3
    return 1 if value <= first else 2 if value <= second else 3


def basis_unit(basis: Basis, *, score: str, pairs: int, naive_error: float, naive_scores: Mapping[str, float]) -> float:
    """One unit of `basis` in the raw score's units, for one row (NaN: undefined here).

    naive_error: the naive reference's mean clean outcome; naive_scores: score → the naive reference's value of
    that score on the same clean windows (the `naive_ratio` basis: a skill ratio, as fev and GIFT-Eval report);
    pairs: the row's WRS pairs (the `wrs_max` basis).
    """
    if basis == "naive_clean_error":
        return naive_error if naive_error > 0 else np.nan
    if basis == "naive_ratio":
        reference = naive_scores.get(score, np.nan)
        return reference if reference > 0 else np.nan
    if basis == "wrs_max":
        maximum = wrs_maximum(pairs)
        return maximum if maximum > 0 else np.nan
    return 0.01 if basis == "percent" else 1.0


def absolute_quantities(
    raw: pd.DataFrame, wrs: pd.DataFrame, naive_error: float, naive_scores: dict[str, float]
) -> pd.Series:
    """Each raw row expressed on its scale's basis (NaN where the score has no published scale).

    raw: perturbation, score, system, raw; wrs: the WRS table (system, perturbation, attribute, pairs).
    """
    units = _units(raw, wrs, naive_error, naive_scores, _scale_basis)
    return pd.Series(
        [r / u if scale_of(name) else np.nan for name, r, u in zip(raw["score"], raw["raw"], units, strict=True)],
        index=raw.index,
        dtype=float,
    )


def absolute_margins(
    raw: pd.DataFrame, wrs: pd.DataFrame, naive_error: float, naive_scores: dict[str, float]
) -> pd.Series:
    """Each row's practical-equivalence margin δ (METHOD §6.2) in the raw score's units: its score's `margin`
    on the margin's basis; 0 where the score declares none or its basis is undefined here (naive error 0)."""
    units = _units(raw, wrs, naive_error, naive_scores, _margin_basis)
    values = [
        (m.value * u if (m := SCORES.get(name).margin) is not None and np.isfinite(u) else 0.0)
        for name, u in zip(raw["score"], units, strict=True)
    ]
    return pd.Series(values, index=raw.index, dtype=float)


def _scale_basis(score: str) -> Basis | None:
    scale = scale_of(score)
    return None if scale is None else scale.basis


def _margin_basis(score: str) -> Basis | None:
    margin = SCORES.get(score).margin
    return None if margin is None else margin.basis


def _units(
    raw: pd.DataFrame,
    wrs: pd.DataFrame,
    naive_error: float,
    naive_scores: Mapping[str, float],
    basis_of: Callable[[str], Basis | None],
) -> list[float]:
    """basis_unit of every raw row on the basis `basis_of(score)` picks (NaN where it picks none)."""
    pairs = wrs.set_index(["system", "perturbation", "attribute"])["pairs"] if len(wrs) else pd.Series(dtype=int)
    out = []
    for r in raw.itertuples():
        basis = basis_of(r.score)
        if not basis:
            out.append(np.nan)
            continue
        n = 0
        if basis == "wrs_max":
            score = SCORES.get(r.score)
            assert issubclass(score, WrsScore), f"{r.score}: the wrs_max basis is a WRS score's"
            n = int(pairs.get((r.system, r.perturbation, score.attribute), 0))
        out.append(basis_unit(basis, score=r.score, pairs=n, naive_error=naive_error, naive_scores=naive_scores))
    return out
