"""What the zoo's adapters share: their own-environment recipe and quantile grids as predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from causalrate.systems.base import Prediction
from causalrate.systems.checkpoints import CheckpointSettings, CheckpointSystem

LEVELS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


class QuantileSettings(CheckpointSettings):
    quantile_levels: list[float] = Field(LEVELS, description="quantiles kept (the median is always added)")


@dataclass(frozen=True)
class OwnEnvironment:
    """A zoo model's managed environment: why it needs one, and its recipe (see forecast.environments.Recipe).

    `requirements` install with their dependencies; `no_deps` (the model's package, whose declared
    pins cannot be met here) without theirs, so `requirements` then lists its runtime dependencies;
    `relaxed` names each declared pin not honoured, as "torch<2.5 → 2.13.0".
    """

    why: str
    requirements: tuple[str, ...]
    no_deps: tuple[str, ...] = ()
    relaxed: tuple[str, ...] = ()


class ZooSystem(CheckpointSystem):
    """A checkpoint-backed zoo model; `own_environment` None means it runs in the core environment."""

    family = "time-series FM"
    own_environment: ClassVar[OwnEnvironment | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("own_environment")
        if own is not None:
            cls.environment_requirements, cls.environment_no_deps, cls.pins_relaxed = (
                own.requirements,
                own.no_deps,
                own.relaxed,
            )

    @property
    def install(self) -> str | None:  # type: ignore[override]  # a per-instance fact (see System)
        """How to get its package: the command that builds its environment, and why it has one."""
        own = self.own_environment
        name = self.environment_name or self.type_name
        return None if own is None else f"causalrate env create {name} ({own.why})"


def levels_of(settings: QuantileSettings) -> list[float]:
    """The kept quantile levels, sorted, with the median (the point forecast)."""
    return sorted(set(settings.quantile_levels) | {0.5})


def quantile_prediction(grid: np.ndarray, levels: list[float]) -> Prediction:
    """A [batch, horizon, quantile] grid → point = median, the grid kept as [batch, quantile, horizon] samples."""
    grid = np.asarray(grid, dtype=np.float64)
    return Prediction(point=grid[..., levels.index(0.5)], samples=grid.transpose(0, 2, 1))
