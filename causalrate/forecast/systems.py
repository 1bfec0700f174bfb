"""The system protocol (METHOD §1) and its registry.

A system is a black box: it receives a Batch of input windows and returns a
float array [batch, horizon]. Rows that are NaN/inf, a wrong shape, an
exception or a timeout become failure rows; the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from causalrate.data.dataset import Dataset
from causalrate.registry import Registry


@dataclass(frozen=True)
class Batch:
    """What a system sees: inputs (NaN where missing) and, if it wants context, dates and attributes."""

    inputs: np.ndarray  # float [b, n]
    horizon: int
    seeds: np.ndarray  # uint64 [b], one stable seed per forecast (for stochastic systems)
    attributes: tuple[dict[str, str], ...]  # per row
    input_dates: np.ndarray  # datetime64[D] [b, n]
    truth_dates: np.ndarray  # datetime64[D] [b, d], the dates to forecast


class NoSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class System:
    """Base class of every system. Subclasses set Settings and implement forecast()."""

    Settings: ClassVar[type[BaseModel]] = NoSettings
    family: ClassVar[str] = "statistical"
    architecture: ClassVar[str | None] = None
    accepts_nan: bool = True  # False: the run imputes missing values first and records it
    wants_context: ClassVar[bool] = False  # reads Batch.attributes / dates: they enter the cache key
    stochastic: ClassVar[bool] = False  # uses Batch.seeds: the seed enters the cache key
    version: ClassVar[str] = "1"  # bump when the system's code changes its forecasts
    libraries: ClassVar[tuple[str, ...]] = ()  # packages whose version changes its forecasts

    def __init__(self, settings: BaseModel, *, base_dir: Path) -> None:
        self.settings = settings
        self.base_dir = base_dir

    def identity(self) -> dict[str, Any]:
        """What makes two forecasts of the same input interchangeable: the forecast cache's system key."""
        from importlib.metadata import PackageNotFoundError, version

        def installed(name: str) -> str:
            try:
                return version(name)
            except PackageNotFoundError:
                return "absent"

        return {
            "type": type(self).__name__,
            "version": self.version,
            "settings": self.settings.model_dump(mode="json"),
            "libraries": {name: installed(name) for name in self.libraries},
        }

    def check(self, dataset: Dataset) -> None:
        """Raise UserError if the system cannot work on this dataset (called once, before forecasting)."""

    def forecast(self, batch: Batch) -> np.ndarray:
        raise NotImplementedError


SYSTEMS: Registry[type[System]] = Registry("system type")


def build_system(spec: dict[str, Any], *, base_dir: Path) -> System:
    """Instantiate a system from a validated SystemSpec dump."""
    cls = SYSTEMS.get(spec["type"])
    from causalrate.config import SystemSpec

    settings = cls.Settings.model_validate(SystemSpec.model_validate(spec).settings)
    return cls(settings, base_dir=base_dir)
