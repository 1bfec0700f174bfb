"""Study and model YAML files, validated with pydantic.

A *study* YAML lists ``systems:``; a *model* YAML has a single ``model:`` and is
assessed against the reference systems on the default (quickstart) data. Every
mistake is reported as a UserError naming the file, the field and what was expected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from causalrate import plugins
from causalrate.data.spec import DataConfig, default_data
from causalrate.errors import UserError, format_validation_error
from causalrate.perturb.spec import PerturbationSpec
from causalrate.systems.spec import SystemSpec
from causalrate.yamlio import read_yaml

REFERENCE_SYSTEMS = ["naive", "arima", "random", "seasonal_naive", "biased"]  # METHOD §7


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # no setting means inf or NaN


class WindowsConfig(Strict):
    input_length: PositiveInt = Field(80, description="n, points the system sees")
    horizon: PositiveInt = Field(20, description="d, points it forecasts")
    stride: PositiveInt = Field(2, description="step between window starts (the paper uses 1)")


class CausalConfig(Strict):
    schemes: list[str] = Field(default_factory=lambda: ["uniform", "industry", "company", "level"])
    draws: PositiveInt = Field(20, description="B observational draws per distribution")
    high: float = Field(0.8, gt=0, lt=1, description="probability of a perturbation in a scheme's favoured group")
    low: float = Field(0.2, gt=0, lt=1, description="... in the others; below high (else no confounding, or reversed)")
    caliper: float = Field(0.2, gt=0, description="in standard deviations of the logit propensity")
    covariates: list[str] = Field(
        default_factory=list, description="window characteristics to adjust for (e.g. level, volatility)"
    )
    wrs_groups: list[str] = Field(
        default_factory=list, description="window characteristics whose terciles are WRS groups (score wrs_<name>)"
    )
    stl_period: int = Field(5, ge=2, description="STL period for trend/seasonality strength (5 = a trading week)")
    recency_k: PositiveInt = Field(5, description="k_r: score recency = APE when a last-k_r input point is perturbed")

    @model_validator(mode="after")
    def _high_above_low(self) -> CausalConfig:
        if self.high <= self.low:  # equal: the schemes confound nothing; reversed: each favours the wrong group
            raise ValueError(f"causal.high ({self.high}) must be above causal.low ({self.low})")
        return self

    @field_validator("covariates", "wrs_groups")
    @classmethod
    def _known_characteristics(cls, names: list[str]) -> list[str]:
        from causalrate.data.characteristics import CHARACTERISTICS

        return CHARACTERISTICS.known(names)

    @field_validator("schemes")
    @classmethod
    def _known_schemes(cls, names: list[str]) -> list[str]:
        from causalrate.causal.schemes import SCHEMES

        return SCHEMES.known(names)


class RatingConfig(Strict):
    levels: int = Field(3, ge=2, description="L, number of rating levels")
    rule: Literal["tiers", "paper"] = Field(
        "tiers", description="tiers: ties by paired bootstrap + BH, tie groups into levels; paper: array_split"
    )
    scale: Literal["relative", "absolute", "both"] = Field(
        "both", description="relative ratings, the published absolute scale (ratings/scales.yaml), or both"
    )
    min_coverage: float = Field(
        0.8, gt=0, le=1, description="share of a system's windows a score needs; fewer is insufficient (worst)"
    )
    scores: list[str] | None = Field(None, description="scores to rate; null = all registered")

    @field_validator("scores")
    @classmethod
    def _known_scores(cls, names: list[str] | None) -> list[str] | None:
        from causalrate.score.scores import SCORES, rated_dimension

        if names == []:  # read as "every score" before: a silent opposite of what an empty list says
            raise ValueError("an empty list rates no score; leave rating.scores out to rate every score")
        if names is not None:  # an attribute's wrs_/bias_/ape_/pie_ are registered with the data (prepare checks)
            SCORES.known([n for n in names if rated_dimension(n) is None])
        return names


class ForecastConfig(Strict):
    imputation: Literal["ffill", "linear", "zero"] = "ffill"
    batch_size: PositiveInt = 32
    timeout: float = Field(
        30.0,
        gt=0,
        description="seconds per forecast: a batch of b forecasts may take b × this before its forecasts fail as "
        "timeouts (stated on stderr)",
    )
    retries: int = Field(1, ge=0, description="times a batch whose worker crashed or hung is tried again")
    cache: bool | Literal["refresh"] = Field(
        True, description="reuse forecasts from the content-addressed cache; refresh: make them afresh and store them"
    )
    cache_path: str | None = Field(
        None, description="shared cache file (relative to the YAML); default $CAUSALRATE_CACHE_DIR or ~/.cache"
    )


class RigorConfig(Strict):
    """How sure each rating is (intervals, power, stability, refutation)."""

    bootstrap_size: int = Field(
        200,
        ge=0,
        validation_alias=AliasChoices("bootstrap_size", "replicates"),  # `replicates`: its name before 2026-11
        description="block-bootstrap replicates drawn for every interval and test; 0 turns the rigor layer off",
    )
    block_length: int | None = Field(
        None,
        ge=1,
        description="windows per bootstrap block; default ⌈(input_length + horizon) / stride⌉, the run of windows "
        "that share a point (capped at half a series' windows); 1 = windows taken as independent",
    )
    min_effect: float = Field(
        0.05, gt=0, description="minimal APE of interest, as a share of the naive reference's clean error"
    )
    alpha: float = Field(0.05, gt=0, lt=0.5)
    refute: bool = True
    refute_simulations: int = Field(
        5, ge=2, description="simulations per dowhy refuter (2 or more: the placebo test needs their spread)"
    )


class HeterogeneityConfig(Strict):
    """Where a system is fragile (METHOD §5.5): a causalml causal tree on each system × perturbation."""

    enabled: bool = Field(True, description="fit the fragility map (causalml's causal tree)")
    covariates: list[str] = Field(
        default_factory=lambda: ["level", "volatility", "trend_strength", "seasonality_strength", "adf_pvalue"],
        description="window characteristics the tree may split on (besides the attributes and the perturbed offset)",
    )
    max_depth: int = Field(3, ge=1, le=6, description="depth of the causal tree: rules have at most this many terms")
    min_leaf: float = Field(0.02, gt=0, lt=0.5, description="smallest leaf, as a share of the windows (at least 5)")
    rules: int = Field(3, ge=1, description="leaves reported as rules, largest effect first")
    selfcheck: bool = Field(True, description="score causalml meta-learners against the true ITEs")
    selfcheck_draws: int = Field(1, ge=1, description="observational draws per confounded scheme for the self-check")

    @field_validator("covariates")
    @classmethod
    def _known_characteristics(cls, names: list[str]) -> list[str]:
        from causalrate.data.characteristics import CHARACTERISTICS

        return CHARACTERISTICS.known(names)


MAX_SEED = 2**32 - 1


class StudySettings(Strict):
    """Everything a study and a model YAML share."""

    seed: int = Field(0, ge=0, le=MAX_SEED, description="every random draw derives from it (numpy's 0 to 2**32 - 1)")
    plugins: list[str] = Field(
        default_factory=list, description="modules or .py files (relative to the YAML) imported first: user registries"
    )
    data: DataConfig = Field(default_factory=default_data)
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    perturbations: str | list[PerturbationSpec] = "paper"
    placement: Literal["cyclic", "series", "last", "random"] = Field(
        "cyclic", description="placement of suite entries that set none (series = the paper's every-nth value)"
    )
    outcome: str = "rmax"
    causal: CausalConfig = Field(default_factory=CausalConfig)
    rating: RatingConfig = Field(default_factory=RatingConfig)
    forecast: ForecastConfig = Field(default_factory=ForecastConfig)
    rigor: RigorConfig = Field(default_factory=RigorConfig)
    heterogeneity: HeterogeneityConfig = Field(default_factory=HeterogeneityConfig)

    @field_validator("outcome")
    @classmethod
    def _known_outcome(cls, name: str) -> str:
        from causalrate.forecast.metrics import METRICS

        if name not in METRICS or not METRICS.get(name).lower_is_better:
            raise ValueError(f"unknown outcome {name!r}; expected an error metric: {outcome_metric_names()}")
        return name


class StudyConfig(StudySettings):
    name: str = Field("study", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    systems: list[SystemSpec] = Field(min_length=1)
    # a model YAML's: its reference systems are those that fit the data (prepare: seasonal_naive only when the
    # season is above 1, biased only on data with attributes); not stored, as prepare's choice is
    fit_references: bool = Field(False, exclude=True)

    @field_validator("systems")
    @classmethod
    def _unique_names(cls, systems: list[SystemSpec]) -> list[SystemSpec]:
        names = [s.name for s in systems]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"system names must be unique; repeated: {dup}")
        return systems


class ModelConfig(StudySettings):
    """A single model, assessed against the reference systems on the default data."""

    model: SystemSpec
    name: str | None = None
    outcome: str = Field(
        "rmax_scaled", description="the quickstart's outcome (docs/reference.md: Method decisions), not METHOD's rmax"
    )

    @model_validator(mode="after")
    def _not_a_reference_name(self) -> ModelConfig:
        """A model named like a reference system of another type would replace that reference unseen."""
        if self.model.name in REFERENCE_SYSTEMS and self.model.type != self.model.name:
            raise ValueError(
                f"model.name {self.model.name!r} is the name of a reference system the model is compared with; "
                "give the model another name"
            )
        return self

    def to_study(self) -> dict[str, Any]:
        references = [{"name": n, "type": n} for n in REFERENCE_SYSTEMS if n != self.model.name]
        study = self.model_dump(exclude={"model"}, exclude_unset=True)
        study["outcome"] = self.outcome
        study["name"] = self.name or _safe_name(self.model.name)
        study["systems"] = [self.model.model_dump(exclude_unset=True), *references]
        study["fit_references"] = True
        return study


def outcome_metric_names() -> list[str]:
    from causalrate.forecast.metrics import METRICS

    return [n for n, m in METRICS.items() if m.lower_is_better]


def load_config(path: str | Path, *, seed: int | None = None) -> tuple[StudyConfig, Path]:
    """Read and validate a study or model YAML; return it and the folder it lives in."""
    path = Path(path)
    try:
        raw = read_yaml(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a folder; give the study or model YAML file (e.g. studies/quickstart.yaml)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the config ({exc})") from None
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected a mapping with 'systems:' (a study) or 'model:' (one model)")
    if ("model" in raw) == ("systems" in raw):
        raise UserError(f"{path}: give exactly one of 'systems:' (a study) or 'model:' (one model to assess)")
    plugins.load(plugins.resolve(raw.get("plugins", []), base_dir=path.parent, where=path), where=path)
    if seed is not None:
        raw["seed"] = seed
    try:
        if "model" in raw:
            raw = ModelConfig.model_validate(raw).to_study()
        return StudyConfig.model_validate(raw), path.parent.resolve()
    except ValidationError as exc:
        raise UserError(format_validation_error(path, exc)) from None


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "-" for c in name).strip("-.")
    return cleaned or "model"
