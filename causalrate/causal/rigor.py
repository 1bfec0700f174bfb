"""The rigor layer: how sure each rating is (issue 6).

- intervals: block bootstrap over windows within series for the mean-type scores (APE, SMAPE, MASE,
  sign accuracy, failure rate) and the WRS distribution; APE_adj and PIE% use the spread over the
  B observational draws they already have (the causal stage's Estimate objects, never redrawn);
- power: the one-sided test of "no effect" for every APE, its achieved power against the minimal
  effect of interest, n_min, and an inconclusive flag (no effect seen, too little power to say so);
- stability (rate.stability): the share of replicates in which a system keeps its rating;
- multiple testing: Benjamini–Hochberg over the pairwise tests behind each WRS;
- refutation: dowhy's placebo, random-common-cause and data-subset refuters on the first Estimate of
  every rated scheme.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import special

from causalrate.causal.estimate import Estimate
from causalrate.causal.refute import Refutation, backdoor_estimand, refute
from causalrate.causal.schemes import SCHEMES
from causalrate.causal.uncertainty import (
    GroupedCounts,
    benjamini_hochberg,
    bootstrap_counts,
    group_sums,
    interval,
    power_analysis,
    replicate_means,
    replicate_wrs,
)
from causalrate.causal.wrs import Grouping
from causalrate.config import StudyConfig
from causalrate.memo import OFF, Memo
from causalrate.score.bias import bias_gap
from causalrate.score.scores import SCORES, Evidence, Score
from causalrate.score.wide import wide_tables
from causalrate.seeding import rng


@dataclass
class Rigor:
    rows: dict[tuple[str, str, str], dict] = field(default_factory=dict)  # (perturbation, score, system) → extras
    # (score, perturbation) → system → paired replicates of the raw score: bootstrap over windows, or
    # the B observational draws for deconfounded APE and PIE% (what the tiers rule tests ties on)
    replicates: dict[tuple[str, str], dict[str, np.ndarray]] = field(default_factory=dict)
    bootstrap: set[tuple[str, str]] = field(default_factory=set)  # the replicates that are window resamples
    overall_stability: dict[str, float] = field(default_factory=dict)
    wrs_tests: list[dict] = field(default_factory=list)
    refutations: list[dict] = field(default_factory=list)


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


def wrs_pairs(values: np.ndarray, grouping: Grouping) -> list[float]:
    """Two-sided Welch p-values of every pair a WRS counts (scipy's ttest_ind, vectorised over the pairs;
    the t tail is special.stdtr, which is what stats.t.sf computes)."""
    out = []
    for block in grouping.samples(values):
        samples = [v for v in block if v.size >= 2]
        pairs = list(combinations(range(len(samples)), 2))
        if not pairs:
            continue
        a, b = np.array(pairs).T
        n = np.array([x.size for x in samples], dtype=float)
        mean = np.array([x.mean() for x in samples])
        var = np.array([x.var(ddof=1) for x in samples])
        va, vb = var[a] / n[a], var[b] / n[b]
        with np.errstate(divide="ignore", invalid="ignore"):
            df = (va + vb) ** 2 / (va**2 / (n[a] - 1) + vb**2 / (n[b] - 1))
            t = (mean[a] - mean[b]) / np.sqrt(va + vb)
        df = np.where(np.isnan(df), 1.0, df)
        out.extend(float(p) for p in 2 * special.stdtr(df, -np.abs(t)))
    return out


def assess_rigor(
    *,
    config: StudyConfig,
    evidence: Evidence,
    table: pd.DataFrame,
    series_index: np.ndarray,
    forecasts: pd.DataFrame,
    outcomes: dict[str, pd.DataFrame],
    estimates: list[Estimate],
    effects: pd.DataFrame,
    control: str,
    wrs_plans: list[Grouping],
    memo: Memo = OFF,
) -> Rigor:
    """Intervals, power, replicates, BH counts and refutations; stability comes after rating (rate.stability)."""
    cfg = config.rigor
    rigor = Rigor()
    systems = sorted(outcomes)
    counts = bootstrap_counts(series_index, replicates=cfg.replicates, rng=rng(config.seed, "bootstrap"))
    perturbations = list(next(iter(outcomes.values())).columns)
    metric = {
        name: wide_tables(forecasts, column, perturbations=perturbations, n_windows=len(table))
        for name, column in _window_means().items()
    }
    grouped = {plan.attribute: GroupedCounts.of(counts, plan) for plan in wrs_plans}
    replicates: dict[tuple[str, str], dict[str, np.ndarray]] = {}
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
            means = dict(zip(columns, replicate_means(counts, np.column_stack(list(columns.values()))).T, strict=True))
            for p in perturbations:
                values = wide[p].to_numpy()
                if p != control:
                    diff = columns[("ape", p)]
                    reps = means[("ape", p)]
                    power = power_analysis(
                        diff,
                        standard_error=float(np.nanstd(reps, ddof=1)),
                        min_effect=cfg.min_effect * float(np.nanmean(np.abs(base))),
                        alpha=cfg.alpha,
                    )
                    rigor.rows[(p, "ape", system)] = {
                        "ape_true_interval": list(interval(reps)),
                        "p_value": power.p_value,
                        "power": power.power,
                        "n_min": power.n_min,
                        "min_effect": power.min_effect,
                        "inconclusive": bool(power.inconclusive),
                    }
                    replicates.setdefault(("ape", p), {})[system] = np.abs(reps)
                    for plan in wrs_plans:
                        attribute = plan.attribute
                        sums = group_sums(grouped[attribute], values)  # what WRS and the bias gap are made of
                        replicates.setdefault((f"wrs_{attribute}", p), {})[system] = replicate_wrs(sums)
                        if f"bias_{attribute}" in SCORES:
                            replicates.setdefault((f"bias_{attribute}", p), {})[system] = bias_gap(sums)
                        pvalues = wrs_pairs(values, plan)
                        adjusted = benjamini_hochberg(pvalues) if pvalues else np.array([])
                        rigor.wrs_tests.append(
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
    for score, cls in _window_scores():  # e.g. recency, ape_worst: |mean| of the score's own per-window values
        for (system, p), values in cls().window_values(evidence).items():
            replicates.setdefault((score, p), {})[system] = np.abs(replicate_means(counts, values))
    bootstrap = set(replicates)
    replicates.update(draw_replicates(estimates))
    for (score, p), per_system in replicates.items():
        for s, column in per_system.items():
            rigor.rows.setdefault((p, score, s), {}).setdefault("interval", list(interval(column)))
    rigor.replicates = replicates
    rigor.bootstrap = bootstrap
    if cfg.refute:
        rigor.refutations = _refutations(config, table, estimates, effects, memo)
    return rigor


def draw_replicates(estimates: list[Estimate]) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    """(score, perturbation) → system → the score's value in each of its scheme's draws, for every
    score whose replicates are draws; left out where the systems' draw counts differ (not paired)."""
    out = {}
    for score, cls in _draw_scores():
        per_p: dict[str, dict[str, list[tuple[int, float]]]] = {}
        for e in estimates:
            if e.scheme == cls.scheme:
                value = getattr(e, cls.draw_column)
                per_p.setdefault(e.perturbation, {}).setdefault(e.system, []).append((e.draw, value))
        for p in sorted(per_p):
            per_system = {s: np.array([v for _, v in sorted(per_p[p][s])]) for s in sorted(per_p[p])}
            if len({v.size for v in per_system.values()}) == 1:
                out[(score, p)] = per_system
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
        confounders = ("company", "industry", "sector", *SCHEMES.get(row.scheme).confounders)
        attributes = [c for c in dict.fromkeys(confounders) if c in table]
        data = estimate.sample(table, attributes)
        inputs = (data, attributes, estimate, (row.ape_adj_lo, row.ape_adj_hi), config.seed,
                  config.rigor.refute_simulations)  # fmt: skip
        found, refutations = memo(
            "refute",
            inputs,
            lambda inputs=inputs: _refute(*inputs),
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


def _refute(data: pd.DataFrame, attributes: list[str], estimate: Estimate, interval: tuple, seed: int, sims: int):
    return refute(
        data, backdoor_estimand(data, tuple(attributes)), estimate, interval=interval, seed=seed, simulations=sims
    )
