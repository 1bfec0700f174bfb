"""Raw scores (METHOD §6): one number per (system, perturbation), found by name in SCORES.

A score reads the Evidence (forecast rows, WRS table, effect summaries) and returns a
frame with columns system, perturbation, raw (checked by check_frame) — or Unavailable(reason)
when the run cannot provide it (e.g. the data has no `industry` attribute).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal

import numpy as np
import pandas as pd

from causalrate.causal.estimate import Estimate
from causalrate.causal.resampling import (
    GroupedCounts,
    Resamples,
    bias_corrected_interval,
    folded,
    group_sums,
    interval,
    mean_interval,
    replicate_wrs,
)
from causalrate.causal.schemes import SCHEMES, Scheme
from causalrate.causal.wrs import Dimension, Grouping, attribute_dimensions, grouped_wrs, unit_scaled, wrs_plans
from causalrate.contracts import ContractError, describe, facts_of, guarded, is_plugin, violation
from causalrate.data.characteristics import attribute_columns
from causalrate.registry import Registry
from causalrate.score.bias import bias_gap, observed_bias
from causalrate.score.wide import wide_tables


@dataclass(frozen=True)
class Evidence:
    forecasts: pd.DataFrame  # one row per forecast: system, perturbation, window, failed, outcome, metrics
    wrs: pd.DataFrame  # system, perturbation, attribute, wrs, pairs
    effects: pd.DataFrame  # summarise_effects(): system, perturbation, scheme, ape_true, ape_adj, pie, ...
    control: str
    severity: dict[str, tuple[str, float]]  # perturbation id → (grid family, severity), for severity grids only
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


Basis = Literal["naive_clean_error", "naive_ratio", "wrs_max", "percent", "none"]


@dataclass(frozen=True)
class Scale:
    """A published absolute scale (METHOD §6): the raw score on `basis` (rate.absolute), cut by two thresholds
    into levels 1–3 that do not depend on the systems compared."""

    basis: Basis
    thresholds: tuple[float, float]
    higher_is_better: bool = False
    rationale: str = ""


@dataclass(frozen=True)
class Margin:
    """A score's practical-equivalence margin δ (METHOD §6.2) on `basis` (rate.absolute converts it to the raw
    score's units): two systems closer than δ are tied, and a robustness or bias effect below δ has no practical
    effect. The built-ins' are published beside their thresholds in ratings/scales.yaml (checked equal)."""

    basis: Basis
    value: float


APE_MARGIN = Margin("naive_clean_error", 0.05)  # 5 % of the naive reference's clean error (the minimal effect)
SKILL_MARGIN = Margin("naive_ratio", 0.02)  # 2 % of the naive reference's value of the same score

# how a score treats a point forecast (no distribution): rated like any other ("rated"), rated but kept out of
# the accuracy headline ("not_in_headline": WQL is a point forecast's WAPE) or not applicable ("not_applicable":
# a point forecast's coverage is 0 by construction)
PointForecasts = Literal["rated", "not_in_headline", "not_applicable"]


# which headline a score feeds: the three headlines, or rated in none (a score that declares no family is a
# "diagnostic": rated and shown, never part of a headline, so a plugin score cannot change `overall` by default)
Family = Literal["robustness", "bias", "accuracy", "confounding", "fragility", "diagnostic"]
HEADLINE_FAMILIES: tuple[Family, ...] = ("robustness", "bias", "accuracy")
Coverage = Literal["perturbed", "paired"]
Resampling = Literal["windows", "draws", "none"]
FRAME_COLUMNS = ("system", "perturbation", "raw")  # a compute() frame's columns, plus an optional `note`


class Score:
    """A raw score. Lower is better unless higher_is_better.

    `family` decides which headline rating it feeds: "robustness" (the overall rating), "bias",
    "accuracy" (clean input only), or "confounding" / "fragility" / "diagnostic" (rated, in no headline;
    "diagnostic" is the default, so a score joins a headline only by declaring it). `coverage` says which
    forecasts it needs: "perturbed" (the perturbed one) or "paired" (perturbed and clean); a row
    computed on fewer than rating.min_coverage of a system's windows is rated insufficient.
    A compute() frame may carry a `note` column: a row with raw NaN and a note is *undefined*.
    """

    higher_is_better: ClassVar[bool] = False
    family: ClassVar[Family] = "diagnostic"
    coverage: ClassVar[Coverage] = "paired"
    on_control: ClassVar[bool] = False  # also computed for the clean input (P0)
    label: ClassVar[str] = ""  # short human name for tables and cards
    description: ClassVar[str] = ""  # one plain-language line
    # which estimator and aggregation the number is, for the report (e.g. "mean SMAPE over forecasts"; a draws
    # score's "draws" gets their count); default: estimator_text()
    estimator: ClassVar[str] = ""
    radar: ClassVar[bool] = False  # an axis of the radar / small multiples, and a row of the cards' tables
    # where its replicates (interval, stability, ties) come from: "windows" (block bootstrap over windows
    # within series), "draws" (the B observational draws of a scheme) or "none"; it also picks the
    # tiers rule's paired test (rate.tiers.PAIRED_TESTS: bootstrap p for windows, paired t for draws)
    resampling: ClassVar[Resampling] = "none"
    metric: ClassVar[str | None] = None  # per-forecast column whose window mean is the score (bootstrapped)
    # its published absolute scale; None: the built-ins' in ratings/scales.yaml, else absolute_rating null
    absolute_scale: ClassVar[Scale | None] = None
    scheme: ClassVar[str | None] = None  # the assignment scheme a confounding score belongs to
    coverage_suffix: ClassVar[str] = ""  # its coverage is read from the forecasts of perturbation id + this
    # its practical-equivalence margin δ; None: 0, any significant difference counts (a plugin's default)
    margin: ClassVar[Margin | None] = None
    # rated on harm, max(mean effect, 0): a perturbation that lowers the error is no worse than none (§6.6)
    harm: ClassVar[bool] = False
    point_forecasts: ClassVar[PointForecasts] = "rated"

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        raise NotImplementedError

    def window_values(self, evidence: Evidence) -> dict[tuple[str, str], np.ndarray]:
        """For a score that is |mean| of per-window values not stored per forecast (no `metric`): per
        (system, perturbation), those values over all windows (NaN = not in the mean), which the default
        replicates() bootstraps. Empty: the score has none."""
        return {}

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """Per (system, perturbation), the raw score's replicates and interval. Default: a `metric` score's
        window mean under every resample (the mean's interval, Resamples.intervals), else the |mean|
        (or the harm, max(mean, 0)) of window_values() (that interval of the signed mean, folded or cut at 0).
        A score that is another statistic (a median, a quantile) overrides this."""
        resamples = resampler.resamples
        out = {}
        if self.metric:
            for system, table in wide_column(evidence, self.metric).items():
                values = table.to_numpy()
                means = resamples.means(values)
                bounds = resamples.intervals(values, means)
                out.update({(system, p): RowReplicates(means[:, j], bounds[j]) for j, p in enumerate(table.columns)})
            return out
        of = harm_of if self.harm else absolute_mean
        for key, values in self.window_values(evidence).items():
            signed = resamples.means(values)
            out[key] = of(signed, resamples.intervals(values, signed)[0])
        return out


SCORES: Registry[type[Score]] = Registry("score")


def estimator_text(cls: type[Score], draws: int | None = None) -> str:
    """The score's `estimator`, else the mean of its metric over forecasts, else its description (else label);
    "draws" says how many for a draws score."""
    text = cls.estimator or (f"mean {cls.label or cls.metric} over forecasts" if cls.metric else "")
    text = text or cls.description or cls.label
    return text.replace("draws", f"{draws} draws") if draws and cls.resampling == "draws" else text


def _fits(name: str, cls: type[Score]) -> None:
    """A score is a Score subclass with compute(); draws come from a scheme, so a draws score names one;
    a window-resampled score says what is resampled."""
    if not (isinstance(cls, type) and issubclass(cls, Score)):
        raise ContractError(f"score {name!r} ({describe(cls)}): expected a subclass of causalrate's Score")
    if cls.compute is Score.compute:
        raise violation("score", name, cls, "it does not implement compute(evidence)")
    if not callable(cls.replicates):
        raise violation("score", name, cls, "`replicates` is a method; where they come from is the fact `resampling`")
    if cls.resampling == "draws" and cls.scheme is None:
        raise violation("score", name, cls, "resampling = 'draws' needs `scheme`, the scheme whose draws it reads")
    own = cls.window_values is not Score.window_values or cls.replicates is not Score.replicates
    if cls.resampling == "windows" and not (cls.metric or own):
        raise violation(
            "score", name, cls, "resampling = 'windows' needs a `metric`, window_values(evidence) or replicates()"
        )
    inherited = next((base for base in cls.__mro__ if "family" in vars(base)), Score)
    if cls.family in HEADLINE_FAMILIES and is_plugin(cls) and not is_plugin(inherited):
        raise violation(
            "score",
            name,
            cls,
            f"it inherits family = {cls.family!r} from causalrate's {inherited.__name__}; a plugin score joins a "
            f"headline only by declaring it: write family = {cls.family!r} (or 'diagnostic') in its class",
        )
    check_metric(name, cls, known_only=True)


SPECIAL_METRICS = ("failed", "outcome")  # per-forecast columns that are no registered metric


def check_metric(name: str, cls: type[Score], *, known_only: bool = False) -> None:
    """A score's `metric` is a registered metric (or failed / outcome) whose direction is the score's:
    a typo must not surface as a KeyError after forecasting, nor a higher-is-better metric be rated backwards.
    known_only: only the direction of a metric already registered (a plugin may register it later)."""
    from causalrate.forecast.metrics import METRICS

    if cls.metric is None or cls.metric in SPECIAL_METRICS:
        return
    if cls.metric not in METRICS:
        if known_only:
            return
        raise violation(
            "score", name, cls, f"metric = {cls.metric!r} is no registered metric; expected one of {METRICS.names()}"
        )
    lower = METRICS.get(cls.metric).lower_is_better
    if cls.higher_is_better == lower:
        raise violation(
            "score",
            name,
            cls,
            f"higher_is_better = {cls.higher_is_better} but its metric {cls.metric!r} is "
            f"{'lower' if lower else 'higher'}-is-better; declare higher_is_better = {not lower}",
        )


SCORES.contract(
    facts_of(
        Score,
        "higher_is_better",
        "family",
        "coverage",
        "on_control",
        "label",
        "description",
        "estimator",
        "radar",
        "resampling",
        "metric",
        "scheme",
        "coverage_suffix",
        "harm",
        "point_forecasts",
    ),
    _fits,
)


def score_all(evidence: Evidence, names: list[str] | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every score's raw rows (column `score` added; the control's only for on_control scores), and why
    each score the run cannot provide is unavailable. `names` defaults to every registered score."""
    raw, unavailable = [], {}
    rated = {d.attribute for d in dimensions_of(evidence)}
    for name in names or SCORES.names():
        cls = SCORES.get(name)
        generated_for = getattr(cls, "generated_for", None)
        if generated_for is not None and generated_for not in rated:
            continue  # another data's attribute (registered earlier in this process): not a score of this run
        score = cls()
        with guarded("score", name, cls, "compute(evidence)"):
            values = score.compute(evidence)
        if isinstance(values, Unavailable):
            unavailable[name] = values.reason
            continue
        check_frame(name, type(score), values, evidence)
        if not score.on_control:
            values = values[values["perturbation"] != evidence.control]
        raw.append(values.assign(score=name))
    return pd.concat(raw, ignore_index=True), unavailable


def check_frame(name: str, cls: type[Score], values: object, evidence: Evidence) -> None:
    """A compute() frame crosses into the rating as it is: columns system, perturbation, raw (numeric) and an
    optional note, one row per (system, perturbation), only the run's systems and perturbations (or severity
    grids). Else ContractError naming the score: a wrong frame must not rate everything insufficient."""

    def wrong(problem: str) -> ContractError:
        return violation("score", name, cls, f"compute() returned {problem}")

    if not isinstance(values, pd.DataFrame):
        raise wrong(f"a {type(values).__name__}; expected a pandas DataFrame (or Unavailable(reason))")
    missing = [c for c in FRAME_COLUMNS if c not in values.columns]
    extra = [c for c in values.columns if c not in (*FRAME_COLUMNS, "note")]
    if missing or extra:
        raise wrong(
            f"columns {list(values.columns)}; expected {', '.join(FRAME_COLUMNS)} (and optionally note)"
            + (f" — missing {missing}" if missing else "")
            + (f" — unknown {extra}" if extra else "")
        )
    if len(values) and values["raw"].dtype.kind not in "iuf":
        raise wrong(f"raw values of dtype {values['raw'].dtype}; expected numbers (NaN: not computed)")
    raw = values["raw"].to_numpy(dtype=float) if len(values) else np.zeros(0)
    infinite = np.isinf(raw)
    # NaN with no note: a built-in's "not computed" (rated insufficient); a plugin must say why in `note`
    unexplained = np.isnan(raw) & (values["note"].isna().to_numpy() if "note" in values else True)
    bad = infinite | (unexplained if is_plugin(cls) else False)
    if bad.any():
        first = values[bad].iloc[0]
        raise wrong(
            f"{int(bad.sum())} non-finite raw value(s), e.g. {first['raw']} for ({first['system']!r}, "
            f"{first['perturbation']!r}); expected finite numbers, or NaN with a `note` saying why it is undefined"
        )
    duplicated = values.duplicated(["system", "perturbation"])
    if duplicated.any():
        first = values[duplicated].iloc[0]
        raise wrong(
            f"{int(duplicated.sum())} duplicated row(s), e.g. ({first['system']!r}, {first['perturbation']!r}); "
            "expected one row per (system, perturbation)"
        )
    systems = set(evidence.forecasts["system"])
    perturbations = {
        *evidence.forecasts["perturbation"],
        *(family for family, _ in evidence.severity.values()),
        *evidence.newest.get("perturbation", ()),
    }
    for column, known in (("system", systems), ("perturbation", perturbations)):
        unknown = sorted(set(values[column]) - known, key=str)
        if unknown:
            raise wrong(f"unknown {column}(s) {unknown[:5]}; the run has {sorted(known, key=str)}")


class WrsScore(Score):
    family = "bias"
    coverage = "perturbed"
    resampling = "windows"
    margin = Margin("wrs_max", 0.1)  # 0.1 of its maximum (2.3 per pair)
    attribute: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = evidence.wrs[evidence.wrs["attribute"] == self.attribute]
        if rows.empty:
            return Unavailable(f"the run has no {self.attribute!r} grouping (data attribute or causal.wrs_groups)")
        frame = rows[["system", "perturbation"]].assign(raw=rows["wrs"].to_numpy())
        return frame.assign(note=rows["note"].to_numpy()) if "note" in rows else frame

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """The WRS under every resample's group counts, on the observed test's design effects and df; the
        bias-corrected percentile interval."""
        out = {}
        for key, values, plan in perturbed_groups(evidence, resampler, self.attribute):
            deff = plan.design_effects(values, resampler.series_index, bandwidth=resampler.bandwidth)
            sizes = plan.df_sizes(values, resampler.series_index, bandwidth=resampler.bandwidth)
            sums = group_sums(resampler.grouped[self.attribute], values)
            reps = replicate_wrs(sums, design_effects=deff, df_sizes=sizes)
            observed = grouped_wrs(plan.samples(values), design_effects=deff, df_sizes=sizes)[0]
            out[key] = RowReplicates(reps, bias_corrected_interval(observed, reps))
        return out


def perturbed_groups(
    evidence: Evidence, resampler: Resampler, attribute: str
) -> list[tuple[tuple[str, str], np.ndarray, Grouping]]:
    """Per (system, perturbed input), when the run groups on `attribute`: the outcomes (unit-scaled: WRS and
    bias do not change with the scale) and the grouping."""
    plan = resampler.groupings.get(attribute)
    if plan is None:
        return []
    return [
        ((system, p), unit_scaled(wide[p].to_numpy()), plan)
        for system, wide in wide_column(evidence, "outcome").items()
        for p in wide.columns
        if p != evidence.control
    ]


@SCORES.register("wrs_industry")
class WrsIndustry(WrsScore):
    attribute = "industry"
    estimator = "WRS over industry groups (Welch t, weighted pair count)"
    radar = True
    label = "WRS industry"
    description = (
        "how much its errors differ between industries (0 = not at all; each pair of industries adds up to 2.3)"
    )


@SCORES.register("wrs_domain")
class WrsDomain(WrsScore):
    attribute = "domain"
    estimator = "WRS over domain groups (Welch t, weighted pair count)"
    label = "WRS domain"
    description = "how much its errors differ between data domains (0 = not at all; each pair adds up to 2.3)"


@SCORES.register("wrs_company")
class WrsCompany(WrsScore):
    attribute = "company"
    estimator = "WRS over company groups (Welch t, weighted pair count)"
    radar = True
    label = "WRS company"
    description = "how much its errors differ between companies of the same industry (0 = not at all)"


@SCORES.register("wrs_volatility")
class WrsVolatility(WrsScore):
    attribute = "volatility"
    estimator = "WRS over volatility groups (Welch t, weighted pair count)"
    label = "WRS volatility"
    description = "how much its errors differ between calm, middling and volatile windows (terciles; 0 = not at all)"


def bias_groups(evidence: Evidence, attribute: str) -> Grouping | None:
    """The groups a bias score compares: its attribute's WRS grouping (a nested attribute within its parent)."""
    if evidence.table is None:
        return None
    return next((g for g in wrs_plans(evidence.table, [], dimensions_of(evidence)) if g.attribute == attribute), None)


class BiasScore(Score):
    """bias_<attr> (METHOD §4): the largest relative gap between one group's mean outcome and the rest."""

    family = "bias"
    coverage = "perturbed"
    resampling = "windows"
    margin = Margin("none", 0.05)  # a gap of 5 % of the mean (the score is already a share of the mean)
    attribute: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        grouping = bias_groups(evidence, self.attribute)
        if grouping is None:
            return Unavailable(f"the data has no {self.attribute!r} attribute")
        rows = [
            {"system": s, "perturbation": p, "raw": observed_bias(table[p].to_numpy(), grouping)}
            for s, table in wide_column(evidence, "outcome").items()
            for p in table.columns
        ]
        return pd.DataFrame(rows, columns=["system", "perturbation", "raw"]).sort_values(["system", "perturbation"])

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """The gap under every resample's group counts; the bias-corrected percentile interval."""
        out = {}
        for key, values, plan in perturbed_groups(evidence, resampler, self.attribute):
            gaps = bias_gap(group_sums(resampler.grouped[self.attribute], values))
            out[key] = RowReplicates(gaps, bias_corrected_interval(observed_bias(values, plan), gaps))
        return out


@SCORES.register("bias_industry")
class BiasIndustry(BiasScore):
    attribute = "industry"
    estimator = "largest gap between one industry's mean outcome and the rest, / mean outcome"
    label = "Bias industry"
    description = "largest gap between one industry's mean error and the other industries', relative to the mean"


@SCORES.register("bias_domain")
class BiasDomain(BiasScore):
    attribute = "domain"
    estimator = "largest gap between one domain's mean outcome and the rest, / mean outcome"
    label = "Bias domain"
    description = "largest gap between one domain's mean error and the other domains', relative to the mean"


@SCORES.register("bias_company")
class BiasCompany(BiasScore):
    attribute = "company"
    estimator = "largest gap between one company's mean outcome and its industry's others, / mean outcome"
    label = "Bias company"
    description = "largest gap between one company's mean error and its industry peers', relative to the mean"


def register_dimension(attribute: str) -> None:
    """wrs_<attr> and bias_<attr> for a data attribute that no registered score covers (METHOD §4: every
    categorical attribute is a bias dimension, whatever its name). Registered once per process; a run rates
    those of its own data's dimensions only (score_all skips another data's, by `generated_for`)."""
    entries = (
        ("wrs", WrsScore, f"WRS {attribute}", f"WRS over {attribute} groups (Welch t, weighted pair count)",
         f"how much its errors differ between values of {attribute} (0 = not at all; each pair adds up to 2.3)"),
        ("bias", BiasScore, f"Bias {attribute}", f"largest gap between one {attribute}'s mean outcome and the rest, "
         "/ mean outcome", f"largest gap between one {attribute}'s mean error and the others', relative to the mean"),
    )  # fmt: skip
    for prefix, base, label, estimator, description in entries:
        name = f"{prefix}_{attribute}"
        if name in SCORES:
            continue
        body = {"attribute": attribute, "label": label, "estimator": estimator, "description": description}
        SCORES.register(name)(type(f"{prefix.title()}_{attribute}", (base,), {**body, "generated_for": attribute}))


def bias_attributes(scores: Iterable[str]) -> list[str]:
    """The attributes the bias scores among `scores` compare (wrs_/bias_<attr>), in the registry's order
    (flat before nested for the built-ins: industry, company); for the bias question in words."""
    given = set(scores)
    found = [cls.attribute for name, cls in SCORES.items() if name in given and issubclass(cls, WrsScore | BiasScore)]
    return list(dict.fromkeys(found))


def differ_by(attributes: Sequence[str]) -> str:
    """ "by industry or company" ("by a, b or c"); "" for none."""
    if not attributes:
        return ""
    head = ", ".join(attributes[:-1])
    return f"by {head} or {attributes[-1]}" if head else f"by {attributes[0]}"


def rated_dimension(score: str) -> str | None:
    """The attribute a generated bias or scheme score name would be for (wrs_region → region), else None."""
    for prefix in ("wrs_", "bias_", "ape_", "pie_"):
        if score.startswith(prefix) and len(score) > len(prefix):
            return score[len(prefix) :]
    return None


@SCORES.register("ape")
class Ape(Score):
    family = "robustness"
    radar = True
    resampling = "windows"
    margin = APE_MARGIN
    harm = True
    label = "APE"
    estimator = "max(APE_true, 0) (all windows, randomized): the harm"
    description = "how much the perturbation raises its error, measured on every window (randomized)"

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        first = evidence.effects.drop_duplicates(["system", "perturbation"])
        first = first[~first["perturbation"].isin(evidence.worst_perturbations)]
        rows = first[["system", "perturbation"]].assign(raw=first["ape_true"].clip(lower=0).to_numpy())
        return every_system(evidence, rows, exclude=evidence.worst_perturbations)

    def window_values(self, evidence: Evidence) -> dict[tuple[str, str], np.ndarray]:
        """The paired differences outcome − clean outcome of every window (APE_true is their mean)."""
        control, worst = evidence.control, set(evidence.worst_perturbations)
        return {
            (system, p): wide[p].to_numpy() - wide[control].to_numpy()
            for system, wide in wide_column(evidence, "outcome").items()
            for p in wide.columns
            if p != control and p not in worst
        }


@SCORES.register("ape_auc")
class ApeAuc(Score):
    family = "robustness"
    margin = APE_MARGIN
    label = "Dose-response AUC"
    estimator = "area under |APE_true| over severity"
    description = (
        "average |APE| over a severity grid (area under |APE| vs severity scaled to 0–1): error growth as data worsens"
    )

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        if not evidence.severity:
            return Unavailable("the suite has no severity grid (grid: in a perturbation)")
        first = evidence.effects.drop_duplicates(["system", "perturbation"])
        first = first[first["perturbation"].isin(evidence.severity)]
        first = first.assign(
            family=first["perturbation"].map(lambda p: evidence.severity[p][0]),
            severity=first["perturbation"].map(lambda p: evidence.severity[p][1]),
        )
        rows = []
        for (system, family), group in first.groupby(["system", "family"], sort=True):
            rows.append(
                {"system": system, "perturbation": family, "raw": dose_auc(group["severity"], group["ape_true"])}
            )
        return pd.DataFrame(rows, columns=["system", "perturbation", "raw"])


def dose_auc(severity: pd.Series, ape: pd.Series) -> float:
    """Trapezoidal area under |APE| over severity rescaled to [0, 1] (= mean |APE| across the grid's range)."""
    order = np.argsort(severity.to_numpy())
    x, y = severity.to_numpy()[order], np.abs(ape.to_numpy()[order])
    if not np.isfinite(y).all():
        return np.nan
    x = (x - x[0]) / (x[-1] - x[0])
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


@SCORES.register("fragility_spread")
class FragilitySpread(Score):
    """Where the effect falls, not how large it is: rated, but in no headline (METHOD §6.5 builds the
    robustness headline from APE, recency, worst case and failure rate). A system that fails equally
    everywhere has no spread, so averaging this in would pull a uniformly fragile system up."""

    family = "fragility"
    label = "Fragility spread"
    estimator = "spread of conditional effects"
    description = (
        "how unevenly the perturbation hurts: spread of its effect across the sub-populations a causal tree "
        "finds (share of the average clean error; 0 = the same effect everywhere)"
    )

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        if evidence.heterogeneity is None:
            from causalrate.causal.heterogeneity import INSTALL

            return Unavailable(
                f"no fragility map: heterogeneity.enabled is false, or causalml cannot be used here ({INSTALL})"
            )
        rows = evidence.heterogeneity
        if rows.empty:
            from causalrate.causal.heterogeneity import MIN_LEAF_WINDOWS

            return Unavailable(
                f"no fragility map: no system and perturbation has {4 * MIN_LEAF_WINDOWS} windows forecast both "
                "clean and perturbed (more windows: a longer period, more series or a smaller stride)"
            )
        mapped = set(rows["perturbation"])
        return every_system(evidence, rows, exclude=tuple(p for p in evidence.perturbations if p not in mapped))


class SchemeScore(Score):
    """|mean APE_adj over the B draws| under one scheme: the effect estimate (METHOD §5.3)."""

    family = "confounding"
    radar = True
    resampling = "draws"
    margin: ClassVar[Margin | None] = APE_MARGIN
    estimator = "|mean over draws of APE_adj|"
    draw_column: ClassVar[str] = "abs_adj"  # its per-draw replicate in the draws table
    interval_column: ClassVar[str] = "ape_adj"  # the signed per-draw value whose mean's interval is shown
    rates_magnitude: ClassVar[bool] = True  # rated as |mean|: the interval of the mean, folded at 0

    def rows(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = evidence.effects[evidence.effects["scheme"] == self.scheme]
        if rows.empty:
            return Unavailable(f"the run has no {self.scheme!r} assignment scheme (causal.schemes)")
        return rows

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = self.rows(evidence)
        if isinstance(rows, Unavailable):
            return rows
        return every_system(evidence, rows[["system", "perturbation"]].assign(raw=rows["ape_adj"].abs().to_numpy()))

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """The score in each of its scheme's draws (none where the systems' draw counts differ: not paired),
        and the t interval of the mean over draws of the signed per-draw value, folded when rated as |mean|."""
        out = {}
        draws = _per_draw(resampler.estimates, self.scheme, self.draw_column)
        signed = _per_draw(resampler.estimates, self.scheme, self.interval_column)
        for p in sorted(draws):
            per_system = {s: np.array([v for _, v in sorted(draws[p][s])]) for s in sorted(draws[p])}
            paired = len({v.size for v in per_system.values()}) == 1
            for s, values in per_system.items():
                lo, hi = mean_interval(np.array([v for _, v in signed[p][s]]))
                bounds = folded(lo, hi) if self.rates_magnitude else (lo, hi)
                out[(s, p)] = RowReplicates(values if paired else None, bounds)
        return out


def _per_draw(
    estimates: tuple[Estimate, ...], scheme: str | None, column: str
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """perturbation → system → (draw, value of `column`) of one scheme's Estimates."""
    per_p: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for e in estimates:
        if e.scheme == scheme:
            per_p.setdefault(e.perturbation, {}).setdefault(e.system, []).append((e.draw, getattr(e, column)))
    return per_p


class PieScore(SchemeScore):
    """Mean PIE% over the draws; undefined (NaN with a note) when APE_obs's interval covers 0."""

    estimator = "mean over draws of PIE%"
    margin = None
    draw_column = "pie"
    interval_column = "pie"
    rates_magnitude = False

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = self.rows(evidence)
        if isinstance(rows, Unavailable):
            return rows
        nothing = (rows["ape_obs_lo"] <= 0) & (rows["ape_obs_hi"] >= 0)
        note = [
            f"undefined: APE_obs interval [{lo:.3g}, {hi:.3g}] covers 0, no apparent effect to explain" if n else None
            for lo, hi, n in zip(rows["ape_obs_lo"], rows["ape_obs_hi"], nothing, strict=True)
        ]
        frame = rows[["system", "perturbation"]].assign(raw=rows["pie"].where(~nothing).to_numpy(), note=note)
        return every_system(evidence, frame)

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """As SchemeScore's, with no interval where PIE% is undefined (the effects table's pie is NaN)."""
        effects = evidence.effects
        undefined = set(
            effects.loc[
                effects["pie"].isna() & (effects["scheme"] == self.scheme), ["system", "perturbation"]
            ].itertuples(index=False, name=None)
        )
        return {
            key: replace(row, interval=None) if key in undefined else row
            for key, row in super().replicates(evidence, resampler).items()
        }


def register_ape(name: str, generated_for: str | None = None) -> None:
    """ape_<scheme>: the effect estimated after matching under the scheme."""
    SCORES.register(f"ape_{name}")(
        type(
            f"Ape_{name}",
            (SchemeScore,),
            {
                "generated_for": generated_for,
                "scheme": name,
                "label": f"APE, {name}-confounded",
                "description": f"the same effect, estimated after matching when {name} decides which windows are "
                "perturbed",
            },
        )
    )


def register_pie(name: str, generated_for: str | None = None) -> None:
    """pie_<scheme>: the share of the apparent effect that the scheme's confounder explains."""
    SCORES.register(f"pie_{name}")(
        type(
            f"Pie_{name}",
            (PieScore,),
            {
                "generated_for": generated_for,
                "scheme": name,
                "label": f"PIE% {name}",
                "description": f"how much of the apparent effect is really due to {name} (%; lower = less misleading)",
            },
        )
    )


def register_scheme_scores(name: str, scheme: type[Scheme]) -> None:
    """Every rated scheme, a plugin's included, gets its ape_ and pie_ scores."""
    if scheme.rated:
        register_ape(name, getattr(scheme, "generated_for", None))
        register_pie(name, getattr(scheme, "generated_for", None))


# the built-in schemes' scores (all APEs, then all PIEs: their order in tables), then any registered later
_BUILT_IN = [name for name, scheme in SCHEMES.items() if scheme.rated]
for _name in _BUILT_IN:
    register_ape(_name)
for _name in _BUILT_IN:
    register_pie(_name)
SCHEMES.on_register(register_scheme_scores)


class MetricScore(Score):
    """Mean of a per-forecast metric over the successful forecasts of (system, perturbation)."""

    family = "accuracy"
    coverage = "perturbed"
    on_control = True
    radar = True
    resampling = "windows"
    margin = SKILL_MARGIN
    metric: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        ok = evidence.forecasts[~evidence.forecasts["failed"]]
        means = ok.groupby(["system", "perturbation"], sort=True)[self.metric].mean()
        return _complete(evidence, means)


@SCORES.register("smape")
class Smape(MetricScore):
    metric = "smape"
    label = "SMAPE"
    description = "forecast error in relative terms (0 = perfect, 2 = worst)"


@SCORES.register("mase")
class Mase(MetricScore):
    metric = "mase"
    label = "MASE"
    description = (
        "error relative to the seasonal naive's in-sample error (below 1 beats it; season 1: the day-to-day change)"
    )


@SCORES.register("crps")
class Crps(MetricScore):
    metric = "crps"
    label = "CRPS"
    description = "error of the forecast distribution, in the data's units (point forecasts: their MAE)"


@SCORES.register("wql")
class Wql(MetricScore):
    metric = "wql"
    radar = False
    point_forecasts = "not_in_headline"
    label = "WQL"
    estimator = "WQL"
    description = (
        "weighted quantile loss of the forecast quantiles, relative to the truth's size (point forecasts: WAPE)"
    )


@SCORES.register("coverage_error")
class CoverageError(MetricScore):
    metric = "coverage_error"
    radar = False
    margin = Margin("none", 0.01)  # one percentage point of coverage
    point_forecasts = "not_applicable"
    label = "Coverage error"
    estimator = "Coverage error"
    description = "how far the share of truths inside its widest interval is from that interval's level (0 = exact)"


@SCORES.register("sign_accuracy")
class SignAccuracy(MetricScore):
    metric = "sign_accuracy"
    higher_is_better = True
    margin = Margin("none", 0.01)
    label = "Sign accuracy"
    estimator = "mean sign accuracy over forecasts"
    description = "share of forecast steps that move in the right direction (higher is better)"


@SCORES.register("failure_rate")
class FailureRate(Score):
    family = "robustness"
    coverage = "perturbed"  # over 20 % failed (default) is insufficient: worst level, never rewarded
    on_control = True
    radar = True
    resampling = "windows"
    metric = "failed"  # the per-forecast failure flag
    margin = Margin("percent", 1.0)  # one percentage point
    label = "Failure rate"
    estimator = "share of forecasts failed"
    description = "share of forecasts that failed (crashed, timed out, wrong length, NaN)"

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rates = evidence.forecasts.groupby(["system", "perturbation"], sort=True)["failed"].mean()
        return _complete(evidence, rates)


def every_system(evidence: Evidence, frame: pd.DataFrame, exclude: tuple[str, ...] = ()) -> pd.DataFrame:
    """An effect score's rows plus a row of raw NaN (not computed: rated insufficient, worst) for every system
    and perturbation of the run (the control and `exclude` aside) the effects have none for: a system whose
    every forecast failed has no effect estimate, and must not go unrated."""
    if evidence.forecasts.empty:
        return frame
    forecast = evidence.forecasts[["system", "perturbation"]].drop_duplicates()
    wanted = forecast[(forecast["perturbation"] != evidence.control) & ~forecast["perturbation"].isin(exclude)]
    have = pd.MultiIndex.from_frame(frame[["system", "perturbation"]])
    missing = wanted[~pd.MultiIndex.from_frame(wanted).isin(have)]
    if missing.empty:
        return frame
    out = pd.concat([frame, missing.assign(raw=np.nan)], ignore_index=True)
    # numbers even where every row is a filler (concat with an empty frame's column keeps its object dtype)
    out["raw"] = out["raw"].astype(float)
    return out.sort_values(["system", "perturbation"], kind="stable", ignore_index=True)


def _complete(evidence: Evidence, values: pd.Series) -> pd.DataFrame:
    """Every (system, perturbation) of the run, NaN where nothing was computed."""
    index = evidence.derived(
        ("run_pairs",),
        lambda: pd.MultiIndex.from_frame(
            evidence.forecasts[["system", "perturbation"]].drop_duplicates().sort_values(["system", "perturbation"])
        ),
    )
    return values.reindex(index).rename("raw").reset_index().astype({"raw": np.float64})
