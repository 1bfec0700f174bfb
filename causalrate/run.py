"""A finished run, typed: its ratings.json (schema causalrate/ratings-v3) and its forecast store.

The pydantic models below are the one definition of ratings.json: the report stage writes the file
through them (`RatingsDocument.to_json`) and every reader (cards, `rate`, `export`, the user study)
opens a run with `Run.open`. Read, fields a newer causalrate adds are kept (extra="allow") and written back
unchanged; sections added within v3 are optional, so an absent one reads as empty. Written (`Section.written`),
no field may be unknown: a misspelt key in the writer is an error, not a silently kept extra.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self, cast

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from causalrate import plugins
from causalrate.causal.schemes import attribute_scheme
from causalrate.config import StudyConfig
from causalrate.errors import UserError, format_validation_error
from causalrate.forecast.metrics import METRICS
from causalrate.forecast.store import ForecastStore
from causalrate.score.scores import SCORES, rated_dimension, register_dimension
from causalrate.study import Study, prepare

RATINGS_SCHEMA = "causalrate/ratings-v3"

Number = float | None  # ratings.json floats: rounded to 10 significant digits, None for NaN / inf
Interval = list[float | None]


WRITING = "causalrate/write"  # the validation context of a section the report stage writes


class Section(BaseModel):
    """One part of ratings.json: typed fields. Read, unknown (newer) fields are kept as they are; written
    (`written`), a field the model does not declare is an error (extra="forbid"), nested sections included."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_validator(mode="after")
    def _declared_when_written(self, info: ValidationInfo) -> Self:
        if info.context == WRITING and self.model_extra:
            raise ValueError(f"{type(self).__name__} has no field(s) {sorted(self.model_extra)}")
        return self

    @classmethod
    def written(cls, **fields: Any) -> Self:
        """The section as the report stage writes it: every field declared by the model, each dict nested in it
        checked the same way (a section passed as a model was checked when it was made)."""
        return cls.model_validate(fields, context=WRITING)


class MissingValues(Section):
    """A NaN-accepting system's `ape` through its own handling (`own`) and after imputation (`imputed`)."""

    own: str
    imputed: str
    imputation: str
    score: str
    own_value: Number
    imputed_value: Number
    difference_interval: Interval  # 95 % of the paired resamples of own − imputed
    better: str  # "its own handling", the imputation's name, "neither (…)" or "undetermined (…)"


class SystemRecord(Section):
    name: str
    type: str
    family: str | None = None
    modality: str | None = None
    architecture: str | None = None
    parameters: int | None = None
    imputation: str | None = None
    pins_relaxed: list[str] = Field(default_factory=list)  # pins its own environment does not honour
    nan_policy: str | None = None  # how missing inputs reach it (systems.base.nan_handling)
    licence: str | None = None  # a restriction on its weights (gated, non-commercial)
    missing_values: MissingValues | None = None  # own NaN handling against imputation (report.missing_values)
    settings: dict[str, Any] = Field(default_factory=dict)  # its type's settings, those chosen from the data included
    trained_on: list[str] | None = None  # as declared; None: unknown
    trained_on_study_data: list[str] = Field(default_factory=list)  # the declared entries that name the study's data


class PerturbationRecord(Section):
    id: str
    operator: str
    kind: str
    period: int | None = None
    phase: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    description: str
    family: str
    severity: Number = None
    severity_label: str = ""
    placement: str | None = None
    offset: int | None = None
    candidates: int | None = None
    impute: str | None = None
    for_systems: str = "all"  # "nan-accepting": forecast and rated only for systems that take NaN
    positional: bool = True
    combine: list[dict[str, Any]] | None = None
    calibration: dict[str, Number] | None = None  # series → calibrated magnitude
    level: int | None = None  # a duration fault's level in the severity table (ratings/severity.yaml)


class RatingRow(Section):
    """One (perturbation, score, system) rating, with its uncertainty markers when rigor ran."""

    perturbation: str
    score: str
    system: str
    raw: Number
    rating: int | None  # None: undefined (raw null with a note, shown "—"): neither best nor worst
    rule: str | None = None
    absolute_rating: int | None = None
    quantity: Number = None  # raw on the absolute scale's basis (a share of the naive clean error, a skill ratio)
    tied_with: list[str] = Field(default_factory=list)
    insufficient: bool = False
    note: str | None = None
    display: str | None = None  # "≥ k" when inconclusive
    interval: Interval | None = None
    stability: Number = None
    stable: bool | None = None
    inconclusive: bool | None = None
    power: Number = None
    p_value: Number = None
    min_effect: Number = None
    n_min: Number = None
    ape_true_interval: Interval | None = None
    margin: Number = None  # the practical-equivalence margin δ in the raw score's units (METHOD §6.2)
    improves: bool = False  # the APE's interval lies wholly below 0: the perturbation lowers its error (level 1)
    cannot_rule_out: Number = None  # inconclusive APE: the harm its interval leaves open (raw units)
    cannot_rule_out_share: Number = None  # the same as a share of the naive reference's clean error


class HeadlineCause(Section):
    """The rating row that set a weakest-link headline (robustness, bias), in words."""

    perturbation: str
    score: str
    raw: Number = None
    quantity: Number = None  # raw on the absolute scale's basis (e.g. a share of the naive clean error)
    insufficient: bool = False
    text: str = ""


class Headline(Section):
    rating: int | None = None
    absolute_rating: int | None = None
    meaning: str = ""
    stability: Number = None
    tied_with: list[str] = Field(default_factory=list)
    scores: list[str] = Field(default_factory=list)
    cause: HeadlineCause | None = None
    largest: HeadlineCause | None = None  # no practically relevant row: the largest effect (not a cause)
    verdict: str | None = None  # the published scale's verdict, where it leads the sentence (worst, or ≥ 2 apart)


class Check(Section):
    """One judged self-check (METHOD §5.4): does APE_adj recover APE_true on a confounded draw?"""

    system: str
    perturbation: str
    scheme: str
    ape_true: Number = None
    ape_obs: Number = None
    ape_adj: Number = None
    interval: Interval = Field(default_factory=list)
    noise: Number = None
    passed: bool
    reason: str = ""


class WrsTest(Section):
    system: str
    perturbation: str
    attribute: str
    pairs: int
    rejections_raw_5pct: int
    rejections_bh_5pct: int


class Refutation(Section):
    system: str
    perturbation: str
    scheme: str
    refuter: str
    estimate: Number = None
    new_effect: Number = None
    passed: bool | None = None
    rule: str = ""


class RecencyPoint(Section):
    system: str
    perturbation: str
    bin: str
    ape: Number
    interval: Interval
    n: int


class Effect(Section):
    """APE_true, observed and deconfounded APE and PIE% of one (system, perturbation, scheme)."""

    system: str
    perturbation: str
    scheme: str
    n_windows: int = Field(alias="windows")
    draws: int | None = None
    ape_true: Number = None
    ape_obs: Number = None
    ape_obs_lo: Number = None
    ape_obs_hi: Number = None
    ape_adj: Number = None
    ape_adj_lo: Number = None
    ape_adj_hi: Number = None
    pie: Number = None
    pie_lo: Number = None
    pie_hi: Number = None
    pie_note: str | None = None  # why PIE% is undefined (no effect to explain)
    smd_before: Number = None
    smd_after: Number = None
    unmatched: Number = None
    balance: dict[str, list[Number]] = Field(default_factory=dict)  # confounder → [before, after]


class FaultEffect(Section):
    """A duration fault at one severity level, for one system: how much its error rose (the label's line per
    fault, the report's fault × severity table)."""

    system: str
    perturbation: str
    fault: str  # the operator (stuck, gap, …)
    name: str  # the fault in plain words
    level: int
    ape_true: Number = None  # mean paired rise of the outcome over the windows
    clean: Number = None  # the system's mean clean outcome on those windows
    rise: Number = None  # ape_true / clean: the relative rise of its error
    ape_newest: Number = None  # the same with the fault still on at the newest input point (newest_point suites)
    rise_newest: Number = None


class Driver(Section):
    covariate: str
    importance: Number


class FragilityRule(Section):
    text: str
    cate: Number = None
    interval: Interval = Field(default_factory=list)
    share: Number = None
    ratio: Number = None


class Fragility(Section):
    """The fragility map of one (system, perturbation) (METHOD §5.5)."""

    drivers: list[Driver] = Field(default_factory=list)
    rules: list[FragilityRule] = Field(default_factory=list)
    spread: Number = None
    explained: Number = None
    selfcheck: list[dict[str, Any]] = Field(default_factory=list)
    selfcheck_skipped: str | None = None  # why a confounded scheme has no self-check row (too few windows)
    profile: dict[str, Any] | None = None  # the main driver's partial dependence: covariate, points


class Identification(Section):
    adjustment_set: list[str]
    estimand: str


class Counts(Section):
    series: int
    n_windows: int = Field(alias="windows")
    forecasts: int
    failures: int


class NotAssessed(Section):
    name: str
    reason: str


class ResolvedParameters(Section):
    """The study's derived parameters as its stages used them (causalrate.parameters, resolved by prepare)."""

    season: int  # the seasonal period of every MASE, seasonal system and naive basis
    block_length: int  # windows per bootstrap block (capped at half a series' windows where drawn)
    wrs_bandwidth: int  # windows WRS's tests take as dependent; 0 under rule: paper
    levels: int
    rule: str
    scale: str
    min_coverage: float
    naive_error: Number  # the naive reference's mean clean outcome: APE's basis (scale, minimal effect, δ)
    min_effect: Number  # the minimal APE of interest, in the outcome's units
    naive_scores: dict[str, Number] = Field(default_factory=dict)  # score on the naive_ratio basis → that basis
    timeout: float  # seconds per forecast


class Provenance(Section):
    config: dict[str, Any]
    data_source: str
    data_hash: str
    seed: int
    versions: dict[str, str] = Field(default_factory=dict)
    method_note: str = ""
    frequency: str | None = None  # the data's, declared or inferred (data.frequency)
    season: int | None = None  # the seasonal period MASE and seasonal_naive used (data.season)
    series: list[str] = Field(default_factory=list)  # the rated series' ids, in the data's order
    span: list[str] = Field(default_factory=list)  # [first date, last date] of the rated series (ISO)
    attributes: dict[str, list[str]] = Field(default_factory=dict)  # each attribute of the series: its values
    parameters: ResolvedParameters | None = None  # absent from runs made before 2026-11-27


class RatingsDocument(Section):
    """ratings.json: the run's contract with every reader."""

    schema_name: str = Field(alias="schema")
    study: str
    levels: int
    direction: str = "1 = best"
    meaning: str = ""
    outcome: str
    not_assessed: list[NotAssessed] = Field(default_factory=list)
    systems: list[SystemRecord]
    perturbations: list[PerturbationRecord]
    ratings: list[RatingRow]
    rule: str | None = None
    scale: str | None = None
    min_coverage: Number = None
    headlines: dict[str, dict[str, Headline]] = Field(default_factory=dict)  # system → headline name → headline
    checks: list[Check] = Field(default_factory=list)
    overall_stability: dict[str, Number] = Field(default_factory=dict)
    wrs_tests: list[WrsTest] = Field(default_factory=list)
    refutations: list[Refutation] = Field(default_factory=list)
    overall: dict[str, int | None]
    not_rated: dict[str, str] = Field(default_factory=dict)  # score → why it was not rated
    recency_profile: list[RecencyPoint] = Field(default_factory=list)
    effects: list[Effect] = Field(default_factory=list)
    faults: list[FaultEffect] = Field(default_factory=list)  # duration faults by severity level (issue 44)
    heterogeneity: dict[str, dict[str, Fragility]] = Field(default_factory=dict)  # system → perturbation → map
    identification: dict[str, Identification] = Field(default_factory=dict)
    counts: Counts | None = None
    provenance: Provenance

    @classmethod
    def read(cls, path: Path) -> RatingsDocument:
        """Parse and validate a ratings.json; a corrupt or hand-broken one is a UserError naming the field."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: not valid JSON ({exc})") from None
        schema = raw.get("schema") if isinstance(raw, dict) else None
        if schema != RATINGS_SCHEMA:
            raise UserError(
                f"{path}: schema {schema!r}; this causalrate reads {RATINGS_SCHEMA!r}. "
                f"Re-rate the run to upgrade it: causalrate rate {path.parent}"
            )
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise UserError(invalid_ratings(path, exc)) from None

    def to_json(self) -> str:
        """The file's bytes: keys sorted, two-space indent, only the fields that were set."""
        doc = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    @property
    def system_names(self) -> list[str]:
        return [s.name for s in self.systems]

    @property
    def control(self) -> str:
        """The clean-input perturbation (always the suite's first)."""
        return self.perturbations[0].id

    def system(self, name: str) -> SystemRecord:
        return next(s for s in self.systems if s.name == name)

    def perturbation(self, pid: str) -> PerturbationRecord | None:
        return next((p for p in self.perturbations if p.id == pid), None)

    def rows_of(self, system: str) -> list[RatingRow]:
        return [r for r in self.ratings if r.system == system]


def invalid_ratings(path: Path, exc: ValidationError) -> str:
    """One line per problem: the file, the dotted field and what was wrong."""
    lines = [f"{path}: invalid ratings.json (hand-edited or damaged? re-rate the run: causalrate rate {path.parent})"]
    for err in exc.errors()[:10]:
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        given = "" if err["type"] == "missing" else f" (got {err.get('input')!r:.60})"
        lines.append(f"  {field}: {err['msg']}{given}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Run:
    """A finished run folder: typed ratings and a read-only handle on its forecast store."""

    path: Path
    ratings: RatingsDocument

    @classmethod
    def open(cls, path: Path) -> Run:
        if (path / "forecasts.sqlite").is_file() and not (path / "ratings.json").is_file():
            raise UserError(  # an assess stopped before its outputs (Ctrl-C, a crash, a full disk)
                f"{path}: no ratings.json beside its forecasts.sqlite: the run's assess did not finish; resume it "
                f"(causalrate assess CONFIG --resume {path}), or rate its forecasts (causalrate rate {path})"
            )
        if not (path / "ratings.json").is_file() or not (path / "forecasts.sqlite").is_file():
            raise UserError(f"{path}: not a causalrate run directory (needs ratings.json and forecasts.sqlite)")
        run = cls(path=path, ratings=RatingsDocument.read(path / "ratings.json"))
        run.register_dimensions()
        return run

    def register_dimensions(self) -> None:
        """The scores of the run's data attributes (wrs_region, bias_region, ape_/pie_ of scheme region), so a
        reader in a fresh process describes them as the run did (they are registered when the data load)."""
        wanted = {a for r in self.ratings.ratings if r.score not in SCORES and (a := rated_dimension(r.score))}
        if not wanted:
            return
        with self.store() as store:
            attributes = set(store.series_attributes().columns) - {"series"}
        for attribute in sorted(a for a in wanted if a in attributes):
            register_dimension(attribute)
            attribute_scheme(attribute)

    @contextmanager
    def store(self) -> Iterator[ForecastStore]:
        """The run's forecasts.sqlite, read-only (runs of every readable store schema open)."""
        with closing(open_store(self.path)) as store:
            yield store


def open_store(run_dir: Path) -> ForecastStore:
    """A run's forecast store, read-only: re-rating, export and cards never change a run's file."""
    return ForecastStore.open(run_dir / "forecasts.sqlite", metrics=METRICS.names(), readonly=True)


@dataclass(frozen=True)
class StoredForecasts:
    """What a finished run's store holds for re-rating: its config (raw), data hash and forecast rows."""

    config: dict[str, Any]
    base_dir: Path  # the config's folder: relative paths in it resolve against this
    data_hash: str
    not_assessed: dict[str, str]  # system → why it could not run
    rows: pd.DataFrame  # ForecastStore.forecasts(): one row per forecast, metrics by name

    @classmethod
    def read(cls, run_dir: Path) -> StoredForecasts:
        """The store of a run whose forecasting finished (any readable store schema)."""
        with closing(open_store(run_dir)) as store:
            if store.get_meta("status") != "forecasted":
                raise UserError(
                    f"{run_dir}: the run's forecasting is unfinished; resume it with causalrate assess "
                    f"CONFIG --resume {run_dir}"
                )
            if not isinstance(store.get_meta("config"), dict):  # a store edited by hand, or not finished making
                raise UserError(f"{store.path}: holds no study config (meta 'config'); not a finished causalrate run")
            return cls(
                config=cast(dict, store.get_meta("config")),
                base_dir=Path(cast(str, store.get_meta("base_dir"))),
                data_hash=cast(str, store.get_meta("data_hash")),
                not_assessed=cast(dict, store.get_meta("not_assessed") or {}),
                rows=store.forecasts(),
            )

    def study(self, run_dir: Path) -> Study:
        """The run's study rebuilt from its stored config (systems not checked: nothing is forecast)."""
        load_run_plugins(run_dir)
        # the stored config names its resolved schemes, among them one per data attribute (`region`, `season`),
        # which only the data's loading registers: in a fresh process `rate` refused every such run's config
        with closing(open_store(run_dir)) as store:
            attributes = set(store.series_attributes().columns) - {"series"}
        for attribute in sorted(attributes & set((self.config.get("causal") or {}).get("schemes") or [])):
            attribute_scheme(attribute)
        try:
            config = StudyConfig.model_validate(self.config)
        except ValidationError as exc:
            raise UserError(format_validation_error(run_dir, exc)) from None
        study = prepare(config, base_dir=self.base_dir, check_systems=False, not_assessed=self.not_assessed)
        forecast = set(self.rows["perturbation"])
        if any(p.id not in forecast for p in study.suite):  # a suite file (a shipped catalog) grew since the run
            study = replace(study, suite=[p for p in study.suite if p.id in forecast])
        if study.dataset.content_hash() != self.data_hash:
            raise UserError(
                f"{run_dir}: the data ({study.dataset.source}) changed since the run; re-rating would mix "
                "old forecasts with new truth"
            )
        return study


def load_run_plugins(run_dir: Path) -> None:
    """Import the plugins a run was made with (its store records them), so its registered names resolve."""
    with closing(open_store(run_dir)) as store:
        entries = cast("list | None", store.get_meta("plugins"))
        if entries is None:  # a run made before the list was recorded: its config's, against its YAML folder
            raw = cast(dict, store.get_meta("config") or {})
            base_dir = Path(cast(str, store.get_meta("base_dir")) or run_dir)
            entries = plugins.resolve(raw.get("plugins", []), base_dir=base_dir, where=run_dir)
    plugins.load(entries, where=run_dir / "forecasts.sqlite")
