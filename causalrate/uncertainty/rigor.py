"""The rigor layer: how sure each rating is (issue 6).

- intervals: a circular block bootstrap over windows within series (blocks as long as the run of windows
  that share a point) for the window scores (APE, SMAPE, MASE, sign accuracy, failure rate, recency,
  ape_last, ape_worst), WRS and bias; APE_adj and PIE% get the t interval of their mean over the B
  observational draws they already have (the causal stage's Estimate objects, never redrawn);
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

import numpy as np
import pandas as pd

from causalrate.causal.estimate import Estimate
from causalrate.causal.refute import Refutation, backdoor_estimand, refute
from causalrate.causal.resampling import (
    GroupedCounts,
    Power,
    Resamples,
    abs_mean_interval,
    benjamini_hochberg,
    bias_corrected_interval,
    block_counts,
    dependence_block,
    folded,
    group_sums,
    interval,
    mean_interval,
    power_analysis,
    replicate_wrs,
    small_sample_factor,
)
from causalrate.causal.schemes import SCHEMES
from causalrate.causal.welch import two_sided_p
from causalrate.causal.wrs import Grouping, grouped_wrs, pair_tests, unit_scaled
from causalrate.config import StudyConfig
from causalrate.memo import OFF, Memo, RunCache
from causalrate.score.bias import bias_gap, observed_bias
from causalrate.score.scores import SCORES, Evidence, Score
from causalrate.score.wide import wide_tables
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
    replicates: Mapping[tuple[str, str], Mapping[str, np.ndarray]] = field(default_factory=dict)
    bootstrap: frozenset[tuple[str, str]] = frozenset()  # the replicates that are window resamples
    overall_stability: Mapping[str, float] = field(default_factory=dict)
    wrs_tests: tuple[dict, ...] = ()
    refutations: tuple[dict, ...] = ()

    def row(self, key: Key) -> RowUncertainty:
        return self.rows.get(key, NOT_ASSESSED)


def _window_means() -> dict[str, str]:
    """Score → per-forecast column, for every registered score that is a window mean (bootstrapped)."""
    return {name: cls.metric for name, cls in SCORES.items() if cls.replicates == "windows" and cls.metric}


def _window_scores() -> list[tuple[str, type]]:
    """Every registered score bootstrapped over windows from values of its own (Score.window_values)."""
    return [
        (name, cls)
        for name, cls in SCORES.items()
        if cls.replicates == "windows" and not cls.metric and cls.window_values is not Score.window_values
    ]


def _draw_scores() -> list[tuple[str, type]]:
    """Every registered score whose replicates are a scheme's observational draws."""
    return [(name, cls) for name, cls in SCORES.items() if cls.replicates == "draws"]


def wrs_pairs(values: np.ndarray, grouping: Grouping, design_effects: list[list[float]] | None = None) -> list[float]:
    """Two-sided Welch p-values of every pair a WRS counts (wrs.pair_tests), on the same effective sample sizes."""
    t, df = pair_tests(grouping.samples(values), design_effects)
    return two_sided_p(t, df).tolist()


def resampling_block(config: StudyConfig) -> int:
    """The bootstrap's block length in windows: configured, or the run of windows that share a point."""
    w = config.windows
    return config.rigor.block_length or dependence_block(
        input_length=w.input_length, horizon=w.horizon, stride=w.stride
    )


def wrs_bandwidth(config: StudyConfig) -> int:
    """How far apart WRS's windows stay dependent (design_effect): the resampling block, or 0 under
    `rule: paper` (the paper's tests on windows taken as independent)."""
    return 0 if config.rating.rule == "paper" else resampling_block(config)


def run_resamples(config: StudyConfig, series_index: np.ndarray) -> Resamples:
    """The run's block-bootstrap replicates and their small-sample widening."""
    block = resampling_block(config)
    counts = block_counts(
        series_index, block=block, replicates=config.rigor.replicates, rng=rng(config.seed, "bootstrap")
    )
    return Resamples(counts=counts, widen=small_sample_factor(series_index, block=block))


def assess_rigor(
    *,
    config: StudyConfig,
    evidence: Evidence,
    resamples: Resamples,
    series_index: np.ndarray,
    outcomes: dict[str, pd.DataFrame],
    estimates: list[Estimate],
    wrs_plans: list[Grouping],
    naive_error: float,
    memo: Memo = OFF,
) -> Rigor:
    """Intervals, power, replicates, BH counts and refutations; stability comes after rating (rate.stability).

    resamples: run_resamples(); naive_error: the naive reference's mean clean outcome (the minimal effect's basis).
    Every interval contains the value it rates: |mean| scores get the folded interval of the mean,
    WRS and bias the bias-corrected percentile interval, draw scores the t interval of their mean.
    """
    cfg, control, table = config.rigor, evidence.control, evidence.table
    ape: dict[Key, RowUncertainty] = {}
    wrs_tests: list[dict] = []
    systems = sorted(outcomes)
    perturbations = list(next(iter(outcomes.values())).columns)
    metric = {
        name: wide_tables(evidence.forecasts, column, perturbations=perturbations, n_windows=len(table))
        for name, column in _window_means().items()
    }
    grouped = {plan.attribute: GroupedCounts.of(resamples.counts, plan) for plan in wrs_plans}
    bandwidth = wrs_bandwidth(config)
    replicates: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    intervals: dict[tuple[str, str, str], tuple[float, float]] = {}
    with warnings.catch_warnings():  # a system whose forecasts all failed yields NaN intervals, by design
        warnings.simplefilter("ignore", RuntimeWarning)
        for system in systems:
            wide = outcomes[system]
            base = wide[control].to_numpy()
            # every mean-type replicate of the system in one matrix product: the [B, W] counts are read once
            columns = {("ape", p): wide[p].to_numpy() - base for p in perturbations if p != control}
            for score, per_system in metric.items():
                if system in per_system:
                    columns.update({(score, p): per_system[system][p].to_numpy() for p in perturbations})
            means = dict(zip(columns, resamples.means(np.column_stack(list(columns.values()))).T, strict=True))
            for p in perturbations:
                values = unit_scaled(wide[p].to_numpy())  # for WRS and bias, which do not change with the scale
                if p != control:
                    diff = columns[("ape", p)]
                    reps = means[("ape", p)]
                    power = power_analysis(
                        diff,
                        standard_error=float(np.nanstd(reps, ddof=1)),
                        min_effect=cfg.min_effect * naive_error,
                        alpha=cfg.alpha,
                    )
                    ape[(p, "ape", system)] = RowUncertainty(ape_true_interval=interval(reps), power=power)
                    replicates.setdefault(("ape", p), {})[system] = np.abs(reps)
                    intervals[(p, "ape", system)] = abs_mean_interval(reps)
                    for plan in wrs_plans:
                        attribute = plan.attribute
                        deff = plan.design_effects(values, series_index, bandwidth=bandwidth)
                        sums = group_sums(grouped[attribute], values)  # what WRS and the bias gap are made of
                        wrs_reps = replicate_wrs(sums, design_effects=deff)
                        replicates.setdefault((f"wrs_{attribute}", p), {})[system] = wrs_reps
                        observed = grouped_wrs(plan.samples(values), design_effects=deff)[0]
                        intervals[(p, f"wrs_{attribute}", system)] = bias_corrected_interval(observed, wrs_reps)
                        if f"bias_{attribute}" in SCORES:
                            gaps = bias_gap(sums)
                            replicates.setdefault((f"bias_{attribute}", p), {})[system] = gaps
                            intervals[(p, f"bias_{attribute}", system)] = bias_corrected_interval(
                                observed_bias(values, plan), gaps
                            )
                        pvalues = wrs_pairs(values, plan, deff)
                        adjusted = benjamini_hochberg(pvalues) if pvalues else np.array([])
                        wrs_tests.append(
                            {
                                "system": system,
                                "perturbation": p,
                                "attribute": attribute,
                                "pairs": len(pvalues),
                                "rejections_raw_5pct": int(np.sum(np.array(pvalues) < 0.05)),
                                "rejections_bh_5pct": int(np.sum(adjusted < 0.05)),
                            }
                        )
                for score, per_system in metric.items():
                    if system in per_system:
                        replicates.setdefault((score, p), {})[system] = means[(score, p)]
                        intervals[(p, score, system)] = interval(means[(score, p)])
    for score, cls in _window_scores():  # e.g. recency, ape_last, ape_worst: |mean| of their own per-window values
        for (system, p), values in cls().window_values(evidence).items():
            signed = resamples.means(values)
            replicates.setdefault((score, p), {})[system] = np.abs(signed)
            intervals[(p, score, system)] = abs_mean_interval(signed)
    bootstrap = frozenset(replicates)
    replicates.update(draw_replicates(estimates))
    intervals.update(draw_intervals(estimates, evidence.effects))
    return Rigor(
        rows={key: replace(ape.get(key, NOT_ASSESSED), interval=bounds) for key, bounds in intervals.items()},
        replicates=replicates,
        bootstrap=bootstrap,
        wrs_tests=tuple(wrs_tests),
        refutations=tuple(_refutations(config, table, estimates, evidence.effects, memo)) if cfg.refute else (),
    )


def draw_replicates(estimates: list[Estimate]) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """(score, perturbation) → system → the score's value in each of its scheme's draws, for every
    score whose replicates are draws; left out where the systems' draw counts differ (not paired)."""
    out = {}
    for score, cls in _draw_scores():
        per_p = _per_draw(estimates, cls.scheme, cls.draw_column)
        for p in sorted(per_p):
            per_system = {s: np.array([v for _, v in sorted(per_p[p][s])]) for s in sorted(per_p[p])}
            if len({v.size for v in per_system.values()}) == 1:
                out[(score, p)] = per_system
    return out


def draw_intervals(estimates: list[Estimate], effects: pd.DataFrame) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(perturbation, score, system) → the t interval of the mean over draws of every draw score's signed
    per-draw value (Score.interval_column), folded when the score rates |mean|; none where the rated value
    is undefined (PIE% with no apparent effect)."""
    undefined = set(effects.loc[effects["pie"].isna(), ["system", "perturbation", "scheme"]].itertuples(index=False))
    out = {}
    for score, cls in _draw_scores():
        for p, per_system in _per_draw(estimates, cls.scheme, cls.interval_column).items():
            for s, draws in per_system.items():
                if cls.interval_column == "pie" and (s, p, cls.scheme) in undefined:
                    continue
                lo, hi = mean_interval(np.array([v for _, v in draws]))
                out[(p, score, s)] = folded(lo, hi) if cls.rates_magnitude else (lo, hi)
    return out


def _per_draw(
    estimates: list[Estimate], scheme: str | None, column: str
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """perturbation → system → (draw, value of `column`) of one scheme's Estimates."""
    per_p: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for e in estimates:
        if e.scheme == scheme:
            per_p.setdefault(e.perturbation, {}).setdefault(e.system, []).append((e.draw, getattr(e, column)))
    return per_p


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
        confounders = ("company", "industry", "sector", *SCHEMES.get(row.scheme).confounders)
        attributes = [c for c in dict.fromkeys(confounders) if c in table]
        data = estimate.sample(table, attributes)
        inputs = (data, attributes, estimate, (row.ape_adj_lo, row.ape_adj_hi), config.seed,
                  config.rigor.refute_simulations)  # fmt: skip
        found, refutations = memo(
            "refute",
            inputs,
            lambda inputs=inputs: _refute(*inputs, cache=memo.run),
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
