"""What the zoo's adapters share: their own-environment recipe and quantile grids as predictions."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from causalrate.systems.base import Prediction
from causalrate.systems.checkpoints import CheckpointSettings, CheckpointSystem

LEVELS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


class QuantileSettings(CheckpointSettings):
    quantile_levels: list[float] = Field(LEVELS, description="quantiles kept (the median is always added)")


class ZooSystem(CheckpointSystem):
    """A checkpoint-backed zoo model; `environment_requirements` empty means it runs in the core environment."""

    family = "time-series FM"
    environment_requirements: ClassVar[list[str]] = []


def levels_of(settings: QuantileSettings) -> list[float]:
    """The kept quantile levels, sorted, with the median (the point forecast)."""
    return sorted(set(settings.quantile_levels) | {0.5})


def quantile_prediction(grid: np.ndarray, levels: list[float]) -> Prediction:
    """A [batch, horizon, quantile] grid → point = median, the grid kept as [batch, quantile, horizon] samples."""
    grid = np.asarray(grid, dtype=np.float64)
    return Prediction(point=grid[..., levels.index(0.5)], samples=grid.transpose(0, 2, 1))
