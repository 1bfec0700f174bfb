"""The study a config resolves to (prepare: data, windows, suite, systems, window table) and its Result."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from causalrate.causal.graph import Identification
from causalrate.causal.resampling import dependence_block
from causalrate.causal.schemes import SCHEMES, attribute_scheme
from causalrate.causal.wrs import Dimension, attribute_dimensions
from causalrate.config import StudyConfig
from causalrate.data import Dataset, Windows, make_windows
from causalrate.data.characteristics import CHARACTERISTICS, attribute_columns, compute_characteristics, terciles
from causalrate.data.loaders import load_dataset
from causalrate.errors import UserError
from causalrate.forecast.metrics import METRICS
from causalrate.parameters import Parameters, RatingSettings
from causalrate.perturb import Perturbation, load_suite
from causalrate.rate.absolute import naive_clean_error, naive_scores
from causalrate.rate.ratings import levels_warning
from causalrate.rate.tiers import resolution_warning
from causalrate.redact import scrub
from causalrate.score.scores import SCORES, Evidence, register_dimension
from causalrate.systems.base import System
from causalrate.systems.spec import build_system, settle
from causalrate.uncertainty.rigor import Rigor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Study:
    """Everything resolved from a config before any forecast is made."""

    config: StudyConfig
    base_dir: Path
    dataset: Dataset
    windows: Windows
    suite: list[Perturbation]
    systems: dict[str, System]
    table: pd.DataFrame  # per window: series, attributes, characteristics
    parameters: Parameters  # every derived parameter, resolved once (causalrate.parameters)
    not_assessed: dict[str, str] = field(default_factory=dict)  # system → why it could not run (--skip-unavailable)
    newest: list[Perturbation] = field(default_factory=list)  # newest-point companions (ape_last), forecast only
    trained_on_study_data: dict[str, list[str]] = field(default_factory=dict)  # system → its trained_on naming the data

    @property
    def control(self) -> str:
        return self.suite[0].id

    @property
    def dimensions(self) -> tuple[Dimension, ...]:
        """The data's bias dimensions (METHOD §4): every attribute, nested as declared or detected."""
        return attribute_dimensions(self.table, attribute_columns(self.table), self.config.data.nesting)

    @property
    def forecast_suite(self) -> list[Perturbation]:
        """Every perturbation that is forecast: the rated suite, then the newest-point companions."""
        return [*self.suite, *self.newest]


FEW_WINDOWS = 40  # fewer: wide intervals, most ties, and no fragility map (it needs 20 valid windows per cell)


def _check_window_count(count: int, stride: int) -> None:
    """Warn about a study whose ratings will be mostly ties (rated all the same: a smoke test is small on purpose)."""
    if count < FEW_WINDOWS:
        log.warning(
            f"windows: only {count} windows; the ratings will be mostly ties with wide "
            f"intervals, and the fragility map needs 20 per system and perturbation; lower windows.stride "
            f"(now {stride}) or give more data (a longer period, more series)"
        )


def prepare(
    config: StudyConfig,
    *,
    base_dir: Path,
    check_systems: bool = True,
    skip_unavailable: bool = False,
    not_assessed: dict[str, str] | None = None,
) -> Study:
    """Load data, windows, the perturbation suite and the systems; every user mistake surfaces here.

    Systems that cannot run here (a missing checkpoint, library or API key) are all listed in one
    error — or, with skip_unavailable, left out of the study and listed in its outputs, never silently.
    Re-rating stored forecasts does not need the systems to run (check_systems=False).
    """
    w = config.windows
    dataset = load_dataset(config.data, base_dir=base_dir, min_length=w.input_length + w.horizon)
    if dataset.season >= w.input_length:
        raise UserError(
            f"data.season is {dataset.season} ({dataset.frequency} data) but windows.input_length is only "
            f"{w.input_length}: a window must hold more than one season (MASE compares each point with the one a "
            "season before); lengthen the windows or declare a shorter data.season"
        )
    windows = make_windows(dataset, input_length=w.input_length, horizon=w.horizon, stride=w.stride)
    config, left_out = _fit_references(config, dataset)
    config = config.model_copy(update={"systems": [settle(spec, dataset) for spec in config.systems]})
    dimensions = _dimensions(dataset, windows, config)
    if "schemes" not in config.causal.model_fields_set:  # the defaults: every dimension's scheme, and `level`
        flat_first = sorted(dimensions, key=lambda d: d.parent is not None)  # industry, then company
        own = [d.attribute for d in flat_first if SCHEMES.get(d.attribute).confounders == (d.attribute,)]
        schemes = ["uniform", *own, "level"]
        config = config.model_copy(update={"causal": config.causal.model_copy(update={"schemes": schemes})})
    _check_window_count(len(windows), w.stride)
    loaded = load_suite(
        config.perturbations,
        base_dir=base_dir,
        input_length=w.input_length,
        placement=config.placement,
        season=dataset.season,
    )
    suite, newest = [p for p in loaded if not p.newest_of], [p for p in loaded if p.newest_of]
    systems, unavailable = {}, dict(not_assessed or {})
    for spec in config.systems:
        system = build_system(spec, base_dir=base_dir)
        try:
            if check_systems:
                system.check(dataset)
        except UserError as exc:
            unavailable[spec.name] = scrub(str(exc))  # stored in the run and its outputs
            continue
        systems[spec.name] = system
    if unavailable and check_systems:
        listing = "\n".join(f"  - {name}: {why}" for name, why in unavailable.items())
        if not skip_unavailable:
            raise UserError(
                f"{len(unavailable)} system(s) cannot run here:\n{listing}\n"
                "Provide them, or pass --skip-unavailable to rate the others (the skipped ones are then "
                "listed in ratings.json and report.md)."
            )
        if not systems:
            raise UserError(f"no system can run here:\n{listing}")
        config = config.model_copy(update={"systems": [s for s in config.systems if s.name in systems]})
    unavailable.update(left_out)  # listed with the outputs as not assessed, with why
    leaks = {spec.name: names_study_data(spec.trained_on or [], config, dataset) for spec in config.systems}
    for spec in config.systems:
        leaked = leaks[spec.name]
        if leaked:
            log.warning(
                f"system {spec.name!r} declares trained_on {leaked}, which names this study's "
                "data: its forecasts may have seen the windows they are scored on"
            )
    parameters = resolve_parameters(config, dataset, windows)
    warning = levels_warning(parameters.rating.levels, len(systems), parameters.rating.scale)
    if warning:
        log.warning(warning)
    if parameters.rating.rule == "tiers" and (too_few := resolution_warning(config.rigor.bootstrap_size, len(systems))):
        log.warning(too_few)
    table = window_table(dataset, windows, config)
    for name in config.causal.schemes:
        SCHEMES.get(name)().check(table)
    return Study(
        config=config,
        base_dir=base_dir,
        dataset=dataset,
        windows=windows,
        suite=suite,
        systems=systems,
        table=table,
        parameters=parameters,
        not_assessed=unavailable,
        newest=newest,
        trained_on_study_data={name: leaked for name, leaked in leaks.items() if leaked},
    )


def resolve_parameters(config: StudyConfig, dataset: Dataset, windows: Windows) -> Parameters:
    """The study's derived parameters (causalrate.parameters), each computed here and nowhere else."""
    w, rating = config.windows, config.rating
    block = config.rigor.block_length or dependence_block(
        input_length=w.input_length, horizon=w.horizon, stride=w.stride
    )
    season = dataset.season  # the one season every MASE uses (data.season, else the frequency's usual one)
    with warnings.catch_warnings():  # an outcome with no finite value: NaN bases (undefined), refused by preflight
        warnings.simplefilter("ignore", RuntimeWarning)
        naive_error = naive_clean_error(windows.inputs, windows.truth, METRICS.get(config.outcome), season=season)
        skill = naive_scores(windows.inputs, windows.truth, season=season)  # what the naive_ratio basis divides by
    return Parameters(
        season=season,
        block_length=block,
        wrs_bandwidth=0 if rating.rule == "paper" else block,  # the paper's tests take windows as independent
        rating=RatingSettings(
            levels=rating.levels, rule=rating.rule, scale=rating.scale, min_coverage=rating.min_coverage
        ),
        naive_error=naive_error,
        min_effect=config.rigor.min_effect * naive_error,
        timeout=config.forecast.timeout,
        naive_scores=skill,
    )


def _fit_references(config: StudyConfig, dataset: Dataset) -> tuple[StudyConfig, dict[str, str]]:
    """A model YAML's references that fit its data (METHOD §7): naive, arima, random always; seasonal_naive when
    the season is above 1; biased when the data have an attribute to be biased on. The others are left out with
    a note (never an error). A study YAML's systems are as listed."""
    if not config.fit_references:
        return config, {}
    why = {}
    if dataset.season <= 1:
        why["seasonal_naive"] = "left out: the data's season is 1, where seasonal_naive is naive (METHOD §7)"
    if not dataset.attribute_names:
        why["biased"] = "left out: the data have no attributes, so nothing to be biased on (METHOD §7)"
    elif not any(len({s.attributes.get(a) for s in dataset.series}) >= 2 for a in dataset.attribute_names):
        why["biased"] = (
            "left out: every attribute of the data has one value, so there is no other group to be biased "
            "against (METHOD §7)"
        )
    dropped = {s.name: why[s.type] for s in config.systems[1:] if s.type in why and s.name == s.type}
    for name, note in dropped.items():
        log.info(f"reference system {name} {note}")
    kept = [s for s in config.systems if s.name not in dropped]
    return config.model_copy(update={"systems": kept}), {n: w for n, w in dropped.items() if n != "seasonal_naive"}


def _dimensions(dataset: Dataset, windows: Windows, config: StudyConfig) -> tuple[Dimension, ...]:
    """The data's bias dimensions, with their scores and schemes registered (wrs_<attr>, bias_<attr>, scheme
    <attr> and its ape_/pie_): every attribute is one, whatever its name. data.nesting must name attributes."""
    attributes = list(dict.fromkeys(k for s in dataset.series for k in s.attributes))  # the data's order
    declared = config.data.nesting or {}
    unknown = sorted({*declared, *declared.values()} - set(attributes))
    if unknown:
        raise UserError(
            f"data.nesting: {unknown} {'is not an attribute' if len(unknown) == 1 else 'are not attributes'} of the "
            f"data; its attributes: {attributes or 'none'}"
        )
    labels = pd.DataFrame([dataset.series[i].attributes for i in windows.series_index], columns=attributes)
    dimensions = attribute_dimensions(labels, attributes, config.data.nesting)
    for d in dimensions:
        register_dimension(d.attribute)
        attribute_scheme(d.attribute)
    unknown_scores = [n for n in config.rating.scores or [] if n not in SCORES]
    if unknown_scores:
        raise UserError(
            f"rating.scores: unknown score(s) {unknown_scores}; the data's bias dimensions are "
            f"{[d.attribute for d in dimensions] or 'none'} (its attributes: {attributes or 'none'})"
        )
    return dimensions


def names_study_data(trained_on: list[str], config: StudyConfig, dataset: Dataset) -> list[str]:
    """The trained_on entries that name the study's data: its file (name or stem), a series id, a `dataset`
    attribute's value, or a word of the data source's description (case-insensitive)."""
    names = {s.id.lower() for s in dataset.series} | {s.attributes.get("dataset", "").lower() for s in dataset.series}
    if config.data.path:
        names |= {Path(config.data.path).name.lower(), Path(config.data.path).stem.lower()}
    source = dataset.source.lower()
    return [entry for entry in trained_on if entry.lower() in names - {""} or entry.lower() in source]


def window_table(dataset: Dataset, windows: Windows, config: StudyConfig) -> pd.DataFrame:
    """Per window: its series, attributes (Z), and the characteristics the causal settings use."""
    table = pd.DataFrame([dataset.series[i].attributes for i in windows.series_index])
    table.insert(0, "series", [dataset.series[i].id for i in windows.series_index])
    table["start"] = windows.start
    causal = config.causal
    driven = [c for name in causal.schemes for c in SCHEMES.get(name).confounders if c in CHARACTERISTICS]
    needed = list(dict.fromkeys([*causal.covariates, *driven, *causal.wrs_groups]))
    table = table.assign(**compute_characteristics(windows.inputs, needed, period=causal.stl_period))
    for name in causal.wrs_groups:
        table[f"{name}_tercile"] = terciles(table[name].to_numpy())
    return table


@dataclass(frozen=True)
class Result:
    """What the causal and rating stages derive from the forecast rows."""

    evidence: Evidence
    effect_draws: pd.DataFrame
    ratings: pd.DataFrame  # rate.ratings.COLUMNS
    overall: dict[str, int]
    identification: dict[str, Identification]
    unavailable: dict[str, str]  # score → why it was not rated
    rigor: Rigor | None = None
    headlines: dict[str, dict[str, dict]] = field(default_factory=dict)  # system → family → headline
    checks: list[dict] = field(default_factory=list)  # the judged self-check (causal.selfcheck)
    recency_profile: list[dict] = field(default_factory=list)  # APE by distance of the corruption from the origin
    heterogeneity: dict = field(default_factory=dict)  # ratings.json's fragility map (§5.5)
