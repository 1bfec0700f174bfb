"""What a score reads and returns (METHOD §6): the Evidence of a run (forecast rows, WRS table, effect
summaries), the Resampler its replicates are drawn from, and Unavailable / RowReplicates."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from causalrate.causal.estimate import Estimate
from causalrate.causal.resampling import GroupedCounts, Resamples, folded, interval
from causalrate.causal.wrs import Dimension, Grouping, attribute_dimensions
from causalrate.data.characteristics import attribute_columns
from causalrate.score.wide import wide_tables


@dataclass(frozen=True)
class Evidence:
    forecasts: pd.DataFrame  # one row per forecast: system, perturbation, window, failed, outcome, metrics
    wrs: pd.DataFrame  # system, perturbation, attribute, wrs, pairs
    effects: pd.DataFrame  # summarise_effects(): system, perturbation, scheme, ape_true, ape_adj, pie, ...
    control: str
    severity: dict[str, tuple[str, float]]  # perturbation id → (its grid's id, severity), for severity grids only
    table: pd.DataFrame | None = None  # per window: series, attributes (Z), characteristics
    input_length: int = 0  # n, for distances from the forecast origin
    recency_k: int = 5  # k_r: `recency` is the APE when the perturbed point is among the last k_r
    recency_perturbations: tuple[str, ...] = ()  # positional, fixed placement: the recency views
    worst_perturbations: tuple[str, ...] = ()  # placement worst: rated by ape_worst, not ape
    heterogeneity: pd.DataFrame | None = None  # system, perturbation, raw: fragility spreads (None: switched off)
    # the forecast rows at the newest input point (ape_last), under the id of the perturbation they place
    newest: pd.DataFrame = field(default_factory=pd.DataFrame)
    perturbations: tuple[str, ...] = ()  # the suite's ids in its order (empty: those of the forecasts, sorted)
    dimensions: tuple[Dimension, ...] | None = None  # the data's bias dimensions (None: detected from the table)
    # tables derived from the fields above, by key (derived()): a cache of this Evidence, not one of its facts
    _derived: dict[tuple, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    def derived(self, key: tuple, compute: Callable[[], object]):
        """`compute()`, once per key: tables several scores and the rigor layer derive from the same rows
        (e.g. recency's paired effects) are built once. Callers must not modify what they get."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]


def dimensions_of(evidence: Evidence) -> tuple[Dimension, ...]:
    """The run's bias dimensions: the study's, else those its window table shows (nesting detected)."""
    if evidence.dimensions is not None:
        return evidence.dimensions
    if evidence.table is None:
        return ()
    return evidence.derived(
        ("dimensions",), lambda: attribute_dimensions(evidence.table, attribute_columns(evidence.table))
    )


def wide_column(evidence: Evidence, column: str) -> dict[str, pd.DataFrame]:
    """wide_tables() of a per-forecast column over every perturbation of the run, built once per evidence."""
    perturbations = list(evidence.perturbations) or sorted(evidence.forecasts["perturbation"].unique())
    n = 0 if evidence.table is None else len(evidence.table)
    return evidence.derived(
        ("wide", column), lambda: wide_tables(evidence.forecasts, column, perturbations=perturbations, n_windows=n)
    )


@dataclass(frozen=True)
class Unavailable:
    """What compute() returns when the run cannot provide the score, and why (listed with the outputs)."""

    reason: str


@dataclass(frozen=True)
class Resampler:
    """What a score's replicates are drawn from: the run's block resamples of the windows (shared by every
    score and system, so comparisons are paired), the WRS groupings with their resampled group counts and
    the dependence bandwidth of their tests, and the causal stage's Estimates (the observational draws)."""

    resamples: Resamples
    series_index: np.ndarray
    groupings: Mapping[str, Grouping] = field(default_factory=dict)  # attribute → its WRS grouping
    grouped: Mapping[str, GroupedCounts] = field(default_factory=dict)  # attribute → resampled group counts
    bandwidth: int = 0
    estimates: tuple[Estimate, ...] = ()


@dataclass(frozen=True)
class RowReplicates:
    """One rating row's replicates: the raw score in each (paired across systems: the tiers rule and
    stability test on them) and the 95 % interval of the raw score; either None where not defined."""

    values: np.ndarray | None
    interval: tuple[float, float] | None


def absolute_mean(signed: np.ndarray, bounds: tuple[float, float]) -> RowReplicates:
    """A |mean| score from its signed mean's replicates and that mean's interval (Resamples.intervals): the
    replicates' magnitudes and the interval folded at 0, so the rated |mean| lies inside it."""
    return RowReplicates(np.abs(signed), folded(*bounds))


def harm_of(signed: np.ndarray, bounds: tuple[float, float]) -> RowReplicates:
    """A harm score (max(mean, 0): an improvement counts as no effect) from its signed mean's replicates and that
    mean's interval (Resamples.intervals): their harms and the interval cut at 0 (METHOD §6.6, harm, not change)."""
    lo, hi = bounds
    return RowReplicates(np.maximum(signed, 0.0), (max(lo, 0.0), max(hi, 0.0)))


def percentile(values: np.ndarray) -> RowReplicates:
    """A score whose replicates are its own value resampled: them and their percentile interval."""
    return RowReplicates(values, interval(values))
