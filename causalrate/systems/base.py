"""The system protocol (METHOD §1) and its registry.

A system is a black box: it receives a Batch of input windows and returns a
float array [batch, horizon] (point forecasts), [batch, samples, horizon]
(sample paths; the point forecast is their median) or a Prediction (point,
optional samples, optional per-row facts such as token counts). Rows that are
NaN/inf, a wrong shape, an exception or a timeout become failure rows; the run
goes on.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from causalrate import plugins
from causalrate.contracts import ContractError, describe, facts_of, violation
from causalrate.registry import Registry
from causalrate.versions import installed

if TYPE_CHECKING:  # the environment worker imports this module with numpy and pydantic only
    from causalrate.data.dataset import Dataset


@dataclass(frozen=True)
class Batch:
    """What a system sees: inputs (NaN where missing), the data's frequency and seasonal period, and, if it
    wants context, dates and attributes."""

    inputs: np.ndarray  # float [b, n]
    horizon: int
    seeds: np.ndarray  # uint64 [b], one stable seed per forecast (for stochastic systems)
    attributes: tuple[dict[str, str], ...]  # per row
    input_dates: np.ndarray  # datetime64[D] [b, n] (datetime64[s] for sub-daily data)
    truth_dates: np.ndarray  # datetime64[D] [b, d], the dates to forecast
    images: tuple[bytes, ...] | None = None  # PNG of each (perturbed) input window, for plot-modality systems
    frequency: str = "business-daily"  # data.frequency's name: hourly, daily, ..., yearly
    season: int = 1  # the study's seasonal period in points

    def row(self, i: int) -> Batch:
        """The one-row batch of row i (used to isolate failing rows)."""
        return self.rows(i, i + 1)

    def rows(self, start: int, stop: int) -> Batch:
        """The batch of rows start to stop (one call of the model in a job of several)."""
        pick = slice(start, stop)
        return Batch(
            inputs=self.inputs[pick],
            horizon=self.horizon,
            frequency=self.frequency,
            season=self.season,
            seeds=self.seeds[pick],
            attributes=self.attributes[pick],
            input_dates=self.input_dates[pick],
            truth_dates=self.truth_dates[pick],
            images=None if self.images is None else self.images[pick],
        )


class TransportError(Exception):
    """The system could not be reached (after its own retries): a failure of the whole batch, not of a row.

    The runner does not retry such a batch row by row, and stops a system after several in a row.
    """


@dataclass(frozen=True)
class Prediction:
    """A system's answer for a batch: point forecasts, optional sample paths, optional per-row facts."""

    point: np.ndarray  # float [b, d]
    samples: np.ndarray | None = None  # float [b, s, d]; quantile grids are stored here too
    info: tuple[dict[str, Any], ...] | None = None  # per row, JSON-able: tokens, latency, attempts
    errors: tuple[str | None, ...] | None = None  # per row: why it failed (its point row is then ignored)

    @classmethod
    def of_quantiles(cls, grid: object, levels: tuple[float, ...], *, rows: int, horizon: int) -> Prediction:
        """Quantiles [batch, level, horizon] at `levels` (which hold 0.5): the point forecast is the median."""
        grid = np.asarray(grid, dtype=np.float64)
        if grid.shape != (rows, len(levels), horizon):
            raise ValueError(f"wrong quantile shape: expected {(rows, len(levels), horizon)}, got {grid.shape}")
        return cls(point=grid[:, levels.index(0.5)], samples=grid)

    @classmethod
    def of(cls, out: object, *, rows: int, horizon: int) -> Prediction:
        """Normalise what forecast() returned; a wrong shape raises ValueError (→ failure rows)."""
        if not isinstance(out, Prediction):
            array = real_numbers(out, "the forecast")
            if array.ndim == 3:
                out = Prediction(point=np.median(array, axis=1), samples=array)
            else:
                out = Prediction(point=array)
        point = real_numbers(out.point, "the point forecast")
        if point.shape != (rows, horizon):
            raise ValueError(
                f"wrong shape: expected {(rows, horizon)} (or [batch, samples, horizon]), got {point.shape}"
            )
        samples = None if out.samples is None else real_numbers(out.samples, "the samples")
        if samples is not None and (samples.ndim != 3 or samples.shape[::2] != (rows, horizon)):
            raise ValueError(f"wrong sample shape: expected ({rows}, samples, {horizon}), got {samples.shape}")
        for name in ("info", "errors"):
            if getattr(out, name) is not None and len(getattr(out, name)) != rows:
                raise ValueError(f"{name} has {len(getattr(out, name))} rows, expected {rows}")
        return Prediction(point=point, samples=samples, info=out.info, errors=out.errors)


def real_numbers(values: object, what: str) -> np.ndarray:
    """float64 of real numbers; complex numbers or text raise ValueError (failure rows), never a silent cast."""
    array = np.asarray(values)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{what} must be real numbers (int or float), got {array.dtype} values")
    return array.astype(np.float64)


def quantile_levels(levels: list[float] | None) -> list[float] | None:
    """A system's stated quantile levels, checked: in (0, 1), distinct, the median among them, ascending (the
    order of the grid's rows: levels given in another order would be read as if sorted, silently wrong)."""
    if levels is None:
        return None
    if not all(0 < q < 1 for q in levels) or len(set(levels)) != len(levels) or 0.5 not in levels:
        raise ValueError(f"quantiles must be distinct levels in (0, 1) that include 0.5 (the point), got {levels}")
    if list(levels) != sorted(levels):
        raise ValueError(
            f"quantiles must be in ascending order, as the rows of the forecast's quantile grid, got {levels}; "
            f"list them as {sorted(levels)} and return the grid's rows in that order"
        )
    return list(levels)


Modality = Literal["numeric", "plot"]
# what forecast() returns: point forecasts, a quantile grid or sample paths (the last two are also scored by
# CRPS); "samples or quantiles": the checkpoint decides (Chronos samples, Chronos-Bolt quantiles)
Output = Literal["point", "quantiles", "samples", "samples or quantiles"]


class NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class System:
    """Base class of every system. Subclasses set Settings and implement forecast()."""

    # facts without ClassVar may also be set per instance (a python system, a proxy for another environment)
    Settings: type[BaseModel] = NoSettings
    family: ClassVar[str | None] = "statistical"  # or "time-series FM", "general-purpose LLM"
    modality: ClassVar[Modality] = "numeric"  # "plot": the system sees Batch.images
    architecture: ClassVar[str | None] = None
    accepts_nan: bool = True  # False: the run imputes missing values first and records it
    nan_policy: ClassVar[str] = "own handling"  # what a NaN-accepting system does with them ("native mask", ...)
    licence: ClassVar[str | None] = None  # a restriction on its weights (gated, non-commercial), stated on the card
    output: Output = "point"  # "point", "quantiles" or "samples" (the last two are also scored by CRPS)
    quantile_levels: tuple[float, ...] | None = None  # the levels of Prediction.samples' rows, if quantiles
    wants_context: bool = False  # reads Batch.attributes / dates: they enter the cache key
    stochastic: ClassVar[bool] = False  # uses Batch.seeds: the seed enters the cache key
    seasonal: ClassVar[bool] = False  # uses Batch.season / frequency: they enter the cache key
    version: str = "1"  # bump when the system's code changes its forecasts
    libraries: tuple[str, ...] = ()  # packages whose version changes its forecasts
    # accelerator and batch_size may be properties in a subclass (decided by its settings): mypy cannot
    # check a property overriding an attribute, so those overrides say `# type: ignore[override]`
    accelerator: str | None = None  # the device it runs on ("cuda", "cuda:1", "mps"): one worker per device
    batch_size: int | None = None  # rows per job; None: the run's forecast.batch_size
    uses_cores: ClassVar[bool] = False  # multi-threaded on the CPU: given its worker's share of the cores
    quick: ClassVar[bool] = False  # microseconds a forecast (the baselines): its jobs are large from the first
    # pip requirements of its own managed environment (`causalrate env create <type>`); empty: the engine's
    environment_requirements: ClassVar[tuple[str, ...]] = ()
    # the managed environment it runs in when that is another type's (the same recipe, built once); None: its own
    environment_name: ClassVar[str | None] = None
    # installed --no-deps after those: packages whose declared pins cannot be met here (the requirements
    # above then list their runtime dependencies), and each pin not honoured, as "torch<2.5 → 2.13.0"
    environment_no_deps: ClassVar[tuple[str, ...]] = ()
    pins_relaxed: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: BaseModel, *, base_dir: Path) -> None:
        self.settings = settings
        self.base_dir = base_dir

    def identity(self) -> dict[str, Any]:
        """What makes two forecasts of the same input interchangeable: the forecast cache's system key. A class
        defined outside causalrate (a plugin's) adds its module's source digest: an edited plugin system is a new
        key, never the forecasts of its old code (causalrate's own say so by bumping `version`)."""
        identity = {
            "type": type(self).__name__,
            "version": self.version,
            "settings": self.settings.model_dump(mode="json"),
            "libraries": installed(self.libraries),
        }
        own = type(self).__module__.partition(".")[0] == "causalrate"
        source = None if own else plugins.source_digest(sys.modules.get(type(self).__module__))
        return identity | ({"plugin": source} if source else {})

    @classmethod
    def from_data(cls, settings: BaseModel, dataset: Dataset) -> dict[str, Any]:
        """Settings the entry leaves to the data, chosen from it (prepare records them in the run's config)."""
        return {}

    def check(self, dataset: Dataset) -> None:
        """Raise UserError if the system cannot work on this dataset (called once, before forecasting)."""

    def forecast(self, batch: Batch) -> np.ndarray | Prediction:
        raise NotImplementedError

    def sources(self) -> tuple[Path, ...]:
        """The files and folders building this system reads (a function's file, a trained model, a checkpoint):
        a worker builds it again when one of them changes (size or mtime). None by default."""
        return ()

    def warm(self, horizon: int) -> None:
        """Load what forecasting needs (a model's weights) before the first batch: a device's worker does it while
        the main process plans. Nothing by default (loaded at the first batch)."""


def nan_handling(system: System | type[System]) -> str:
    """How missing inputs reach the system: its own policy, or imputed by causalrate first (METHOD §2)."""
    return system.nan_policy if system.accepts_nan else "imputed by causalrate"


SYSTEMS: Registry[type[System]] = Registry("system type")


def _fits(name: str, cls: type[System]) -> None:
    """A System subclass with forecast(); a quantile grid's stated levels hold the median (the point)."""
    if not (isinstance(cls, type) and issubclass(cls, System)):
        raise ContractError(f"system type {name!r} ({describe(cls)}): expected a subclass of System")
    if cls.forecast is System.forecast:
        raise violation("system type", name, cls, "it does not implement forecast(batch)")
    levels = cls.quantile_levels
    if isinstance(levels, tuple):
        try:
            quantile_levels(list(levels))
        except ValueError as exc:
            raise violation("system type", name, cls, f"quantile_levels: {exc}") from None


SYSTEMS.contract(
    facts_of(
        System,
        "Settings",
        "family",
        "modality",
        "architecture",
        "accepts_nan",
        "nan_policy",
        "licence",
        "output",
        "quantile_levels",
        "wants_context",
        "stochastic",
        "seasonal",
        "version",
        "libraries",
        "accelerator",
        "batch_size",
        "uses_cores",
        "quick",
        "environment_requirements",
        "environment_name",
        "environment_no_deps",
        "pins_relaxed",
    ),
    _fits,
)
