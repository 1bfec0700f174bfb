"""The rigor layer: how sure each rating is (issue 6).

- intervals and replicates: each score's own (Score.replicates), from a circular block bootstrap over
  windows within series (blocks as long as the run of windows that share a point) for the window
  scores, WRS and bias, or, for APE_adj and PIE%, the B observational draws they already have (the
  causal stage's Estimate objects, never redrawn);
- power: the one-sided test of "no effect" for every APE, its achieved power against the minimal
  effect of interest, n_min, and an inconclusive flag (no effect seen, too little power to say so);
- stability (rate.stability): the share of replicates in which a system keeps its rating;
- multiple testing: Benjamini–Hochberg over the pairwise tests behind each WRS;
- refutation: dowhy's placebo, random-common-cause and data-subset refuters on the first Estimate of
  every rated scheme.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import pandas as pd

from causalrate.causal.estimate import Estimate
from causalrate.causal.refute import Refutation, backdoor_estimand, refute
from causalrate.causal.resampling import (
    GroupedCounts,
    Power,
    Resamples,
    benjamini_hochberg,
    block_counts,
    power_analysis,
    small_sample_factor,
)
from causalrate.causal.schemes import SCHEMES
from causalrate.causal.welch import two_sided_p
from causalrate.causal.wrs import Grouping, pair_tests
from causalrate.config import StudyConfig
from causalrate.contracts import guarded
from causalrate.data.characteristics import attribute_columns
from causalrate.memo import OFF, Memo, RunCache
from causalrate.parameters import Parameters
from causalrate.score.scores import SCORES, Ape, Evidence, Resampler, perturbed_groups
from causalrate.seeding import rng

Key = tuple[str, str, str]  # (perturbation, score, system): one rating row


@dataclass(frozen=True)
class RowUncertainty:
    """How sure one rating row is. A field left None was not computed for the row (and is not written)."""

    interval: tuple[float, float] | None = None  # 95 % interval of the rated value
    ape_true_interval: tuple[float, float] | None = None  # APE rows: the signed mean effect's interval
    power: Power | None = None  # APE rows: the test of "no effect" and its power
    stability: float | None = None  # share of replicates keeping the reported level (rate.stability)
    display: str | None = None  # "≥ k": the level an inconclusive APE is reported at (rate.inconclusive)

    @property
    def inconclusive(self) -> bool:
        return self.power is not None and self.power.inconclusive


NOT_ASSESSED = RowUncertainty()


@dataclass(frozen=True)
class Rigor:
    """The rigor layer's results. Frozen: the rating stage returns updated copies (dataclasses.replace)."""

    rows: Mapping[Key, RowUncertainty] = field(default_factory=dict)
    # (score, perturbation) → system → paired replicates of the raw score: bootstrap over windows, or
    # the B observational draws for deconfounded APE and PIE% (what the tiers rule tests ties on)
    replicate_values: Mapping[tuple[str, str], Mapping[str, np.ndarray]] = field(default_factory=dict)
    bootstrap: frozenset[tuple[str, str]] = frozenset()  # the replicates that are window resamples
    overall_stability: Mapping[str, float] = field(default_factory=dict)
    wrs_tests: tuple[dict, ...] = ()
    refutations: tuple[dict, ...] = ()

    def row(self, key: Key) -> RowUncertainty:
        return self.rows.get(key, NOT_ASSESSED)


def wrs_pairs(
    values: np.ndarray,
    grouping: Grouping,
    design_effects: list[list[float]] | None = None,
    df_sizes: list[list[float]] | None = None,
) -> list[float]:
    """Two-sided Welch p-values of every pair a WRS counts (wrs.pair_tests), on the same effective sample sizes
    and df."""
    t, df = pair_tests(grouping.samples(values), design_effects, df_sizes)
    return two_sided_p(t, df).tolist()


def run_resamples(series_index: np.ndarray, *, block: int, bootstrap_size: int, seed: int) -> Resamples:
    """The run's block-bootstrap replicates, their small-sample widening (block: Parameters.block_length) and
    each window's series."""
    counts = block_counts(series_index, block=block, bootstrap_size=bootstrap_size, rng=rng(seed, "bootstrap"))
    return Resamples(counts=counts, widen=small_sample_factor(series_index, block=block), series=series_index)


def assess_rigor(
    *,
    config: StudyConfig,
    evidence: Evidence,
    resamples: Resamples,
    series_index: np.ndarray,
    estimates: list[Estimate],
    wrs_plans: list[Grouping],
    parameters: Parameters,
    memo: Memo = OFF,
) -> Rigor:
    """Intervals, power, replicates, BH counts and refutations; stability comes after rating (rate.stability).

    resamples: run_resamples(); parameters: the study's (the WRS bandwidth, the minimal effect).
    Every registered score gives its rows' replicates and intervals (Score.replicates); every interval
    contains the value it rates.
    """
    cfg = config.rigor
    resampler = Resampler(
        resamples,
        series_index=series_index,
        groupings={plan.attribute: plan for plan in wrs_plans},
        grouped={plan.attribute: GroupedCounts.of(resamples.counts, plan) for plan in wrs_plans},
        bandwidth=parameters.wrs_bandwidth,
        estimates=tuple(estimates),
    )
    values: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    intervals: dict[Key, tuple[float, float]] = {}
    bootstrap = set()
    with warnings.catch_warnings():  # a system whose forecasts all failed yields NaN intervals, by design
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, cls in SCORES.items():
            if cls.resampling == "none":
                continue
            with guarded("score", name, cls, "replicates(evidence, resampler)"):
                replicates = cls().replicates(evidence, resampler)
            for (system, p), row in replicates.items():
                if row.values is not None:
                    values.setdefault((name, p), {})[system] = row.values
                    if cls.resampling == "windows":
                        bootstrap.add((name, p))
                if row.interval is not None:
                    intervals[(p, name, system)] = row.interval
        ape = ape_power(evidence, resamples, min_effect=parameters.min_effect, alpha=cfg.alpha)
    return Rigor(
        rows={key: replace(ape.get(key, NOT_ASSESSED), interval=bounds) for key, bounds in intervals.items()},
        replicate_values=values,
        bootstrap=frozenset(bootstrap),
        wrs_tests=tuple(wrs_tests(evidence, resampler)),
        refutations=tuple(_refutations(config, evidence.table, estimates, evidence.effects, memo))
        if cfg.refute
        else (),
    )


def ape_power(
    evidence: Evidence, resamples: Resamples, *, min_effect: float, alpha: float
) -> dict[Key, RowUncertainty]:
    """Every APE row's signed mean effect interval (Resamples.intervals) and its test of "no effect" with its power."""
    out = {}
    for (system, p), diff in Ape().window_values(evidence).items():
        reps = resamples.means(diff)
        power = power_analysis(diff, standard_error=float(np.nanstd(reps, ddof=1)), min_effect=min_effect, alpha=alpha)
        bounds = resamples.intervals(diff, reps)[0]
        out[(p, "ape", system)] = RowUncertainty(ape_true_interval=bounds, power=power)
    return out


def wrs_tests(evidence: Evidence, resampler: Resampler) -> list[dict]:
    """Per (system, perturbed input, grouping): how many of the pairs a WRS counts differ at 5 %, before and
    after Benjamini–Hochberg."""
    rows: dict[tuple[str, str], list[tuple[np.ndarray, Grouping]]] = {}  # per (system, perturbation), each grouping
    for attribute in resampler.groupings:
        for key, values, plan in perturbed_groups(evidence, resampler, attribute):
            rows.setdefault(key, []).append((values, plan))
    out = []
    for (system, p), found in rows.items():
        for values, plan in found:
            deff = plan.design_effects(values, resampler.series_index, bandwidth=resampler.bandwidth)
            sizes = plan.df_sizes(values, resampler.series_index, bandwidth=resampler.bandwidth)
            pvalues = wrs_pairs(values, plan, deff, sizes)
            adjusted = benjamini_hochberg(pvalues) if pvalues else np.array([])
            out.append(
                {
                    "system": system,
                    "perturbation": p,
                    "attribute": plan.attribute,
                    "pairs": len(pvalues),
                    "rejections_raw_5pct": int(np.sum(np.array(pvalues) < 0.05)),
                    "rejections_bh_5pct": int(np.sum(adjusted < 0.05)),
                }
            )
    return out


def _refutations(
    config: StudyConfig, table: pd.DataFrame, estimates: list[Estimate], effects: pd.DataFrame, memo: Memo
) -> list:
    """dowhy refuters on the first observational draw of every rated scheme (industry, company, plugins')."""
    first: dict[tuple[str, str, str], Estimate] = {}
    for e in estimates:
        first.setdefault((e.system, e.perturbation, e.scheme), e)
    out = []
    rated = [name for name, scheme in SCHEMES.items() if scheme.rated]
    # text attributes as categories (same values, same design): dowhy copies the sample for every simulation
    # and the matching plans are keyed on its content, both several times cheaper on codes than on text.
    # Labels and categories as plain Python objects: dowhy and the estimator look them up thousands of
    # times, and pandas' arrow-backed text index makes each lookup several times slower
    text = [c for c in table.columns if table[c].dtype.kind not in "biufcmM"]
    table = table.assign(**{c: _categorical(table[c]) for c in text})
    table.columns = table.columns.astype(object)
    for row in effects[effects["scheme"].isin(rated)].itertuples():
        estimate = first.get((row.system, row.perturbation, row.scheme))
        if estimate is None:
            continue
        confounders = (*attribute_columns(table), *SCHEMES.get(row.scheme).confounders)
        attributes = [c for c in dict.fromkeys(confounders) if c in table]
        data = estimate.sample(table, attributes)
        inputs = (data, attributes, estimate, (row.ape_adj_lo, row.ape_adj_hi), config.seed,
                  config.rigor.refute_simulations)  # fmt: skip
        found, refutations = memo(
            "refute",
            inputs,
            partial(_refute, *inputs, cache=memo.run),
            encode=lambda v: [v[0], [r.__dict__ for r in v[1]]],
            decode=lambda v: (v[0], [Refutation(**r) for r in v[1]]),
        )
        for r in refutations:
            out.append(
                {
                    "system": row.system,
                    "perturbation": row.perturbation,
                    "scheme": row.scheme,
                    "estimate": found,
                    "refuter": r.refuter,
                    "new_effect": r.new_effect,
                    "passed": bool(r.passed),
                    "rule": r.rule,
                }
            )
    return out


def _categorical(values: pd.Series) -> pd.Series:
    """The column as a categorical over its sorted distinct values (as astype("category")), held as objects."""
    categories = values.astype("category").cat.categories.to_numpy(dtype=object)
    return values.astype(pd.CategoricalDtype(pd.Index(categories, dtype=object)))


def _refute(
    data: pd.DataFrame,
    attributes: list[str],
    estimate: Estimate,
    interval: tuple,
    seed: int,
    sims: int,
    *,
    cache: RunCache,
):
    estimand = backdoor_estimand(data, tuple(attributes), cache)
    return refute(data, estimand, estimate, interval=interval, seed=seed, simulations=sims, cache=cache)
