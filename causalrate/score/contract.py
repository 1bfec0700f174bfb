"""The Score contract (METHOD §6): a score's facts as types, the SCORES registry and the checks every score
and every compute() frame passes (a violation is a ContractError naming the score, its class and file).

A score reads the Evidence (forecast rows, WRS table, effect summaries) and returns a frame with columns
system, perturbation, raw (checked by check_frame) — or Unavailable(reason) when the run cannot provide it.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

import numpy as np
import pandas as pd

from causalrate.contracts import ContractError, describe, facts_of, is_plugin, violation
from causalrate.registry import Registry
from causalrate.score.evidence import (
    Evidence,
    Resampler,
    RowReplicates,
    Unavailable,
    absolute_mean,
    harm_of,
    wide_column,
)

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
# the accuracy headline ("not_in_headline": a plugin's score that means less for a point) or not applicable
# ("not_applicable": WQL and coverage error, a point forecast has no quantiles; its coverage is 0 by construction)
PointForecasts = Literal["rated", "not_in_headline", "not_applicable"]


# which headline a score's rows join (METHOD §6.5); None: rated and shown, in no headline (the default, so a
# plugin score joins a headline only by declaring it and cannot change `overall` by default)
Headline = Literal["robustness", "bias", "accuracy"]
HEADLINE_NAMES: tuple[Headline, ...] = get_args(Headline)
# which of a score's rating rows join its headline: the clean input's (P0; needs on_control), the perturbed
# inputs' or all of them; None: no headline to join
Rows = Literal["clean", "perturbed", "all"]
Coverage = Literal["perturbed", "paired"]
Resampling = Literal["windows", "draws", "none"]
FRAME_COLUMNS = ("system", "perturbation", "raw")  # a compute() frame's columns, plus an optional `note`

# the deprecated `family` fact, read as the (headline, rows) it used to decide
FAMILIES: dict[str, tuple[Headline | None, Rows | None]] = {
    "robustness": ("robustness", "all"),
    "bias": ("bias", "perturbed"),
    "accuracy": ("accuracy", "clean"),
    "confounding": (None, None),
    "fragility": (None, None),
    "diagnostic": (None, None),
}


class Score:
    """A raw score. Lower is better unless higher_is_better.

    `headline` is the headline rating its rows join: "robustness" (the overall rating), "bias", "accuracy",
    or None (rated and shown, in no headline: the default, so a score joins a headline only by declaring it);
    `rows` which of its rows join it: "clean" (the clean input's), "perturbed" or "all". `coverage` says which
    forecasts it needs: "perturbed" (the perturbed one) or "paired" (perturbed and clean); a row
    computed on fewer than rating.min_coverage of a system's windows is rated insufficient.
    A compute() frame may carry a `note` column: a row with raw NaN and a note is *undefined*.
    """

    higher_is_better: ClassVar[bool] = False
    headline: ClassVar[Headline | None] = None
    rows: ClassVar[Rows | None] = None
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

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "family" in vars(cls):
            read_family(cls)

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
log = logging.getLogger(__name__)


def read_family(cls: type[Score]) -> None:
    """A class that still declares the deprecated `family` gets the headline and rows it used to decide (those it
    declares itself win), with a DeprecationWarning and a line on stderr; an unknown word is refused by _fits."""
    family = vars(cls)["family"]
    if family not in FAMILIES:
        return
    headline, rows = FAMILIES[family]
    if "headline" not in vars(cls):
        cls.headline = headline
    if "rows" not in vars(cls):
        cls.rows = rows
    message = (
        f"score class {describe(cls)}: `family = {family!r}` is deprecated and read as headline = {cls.headline!r}, "
        f"rows = {cls.rows!r}; write those facts instead"
    )
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    log.warning(message)


def joins_headline(frame: pd.DataFrame, headline: Headline, *, control: str) -> pd.Series:
    """Which rows of a rating frame (columns score, perturbation) join `headline`: their score declares it, and
    the row is among the score's `rows` (the clean input's, the perturbed inputs' or all). A score this version
    has not registered (a newer ratings.json) joins none."""

    def rows_of(score: str) -> Rows | None:
        cls = SCORES.get(score) if score in SCORES else None
        return cls.rows if cls is not None and cls.headline == headline else None

    rows = frame["score"].map({score: rows_of(score) for score in frame["score"].unique()})
    clean = frame["perturbation"] == control
    return (rows == "all") | ((rows == "clean") & clean) | ((rows == "perturbed") & ~clean)


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
    family = vars(cls).get("family")
    if family is not None and (family not in FAMILIES or FAMILIES[family][0] != cls.headline):
        words = ", ".join(repr(f) for f in FAMILIES)
        raise violation(
            "score",
            name,
            cls,
            f"family = {family!r} is not allowed; expected one of {words} (deprecated: declare headline = "
            "'robustness' | 'bias' | 'accuracy' | None and rows = 'clean' | 'perturbed' | 'all' instead)"
            if family not in FAMILIES
            else f"family = {family!r} (deprecated) and headline = {cls.headline!r} disagree; declare headline only",
        )
    inherited = next((base for base in cls.__mro__ if "headline" in vars(base)), Score)
    if cls.headline is not None and is_plugin(cls) and not is_plugin(inherited):
        raise violation(
            "score",
            name,
            cls,
            f"it inherits headline = {cls.headline!r} from causalrate's {inherited.__name__}; a plugin score joins a "
            f"headline only by declaring it: write headline = {cls.headline!r} (or None) in its class",
        )
    if cls.headline is not None and cls.rows is None:
        raise violation(
            "score",
            name,
            cls,
            f"headline = {cls.headline!r} needs `rows`: which of its rows join it ('clean', 'perturbed' or 'all')",
        )
    if cls.rows == "clean" and cls.headline is not None and not cls.on_control:
        raise violation(
            "score", name, cls, "rows = 'clean' joins its clean-input rows to its headline, but on_control is False"
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
        "headline",
        "rows",
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
    systems, perturbations = evidence.derived(("known names",), lambda: _known_names(evidence))
    for column, known in (("system", systems), ("perturbation", perturbations)):
        unknown = sorted(set(values[column]) - known, key=str)
        if unknown:
            raise wrong(f"unknown {column}(s) {unknown[:5]}; the run has {sorted(known, key=str)}")


def _known_names(evidence: Evidence) -> tuple[set, set]:
    """The run's systems and perturbations (and severity grids), as check_frame accepts them: read once per
    evidence from the distinct values, not per score from every forecast row."""
    forecasts = evidence.forecasts
    perturbations = {
        *forecasts["perturbation"].unique(),
        *(grid for grid, _ in evidence.severity.values()),
        *(evidence.newest["perturbation"].unique() if "perturbation" in evidence.newest else ()),
    }
    return set(forecasts["system"].unique()), perturbations
