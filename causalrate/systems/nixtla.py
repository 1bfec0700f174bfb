"""The `statsforecast` system: any model of Nixtla's statsforecast, by class name, with its own settings.

Each input window is one series (``unique_id`` = its row, ``ds`` = 0..n−1, ``freq=1``: these models read
the order of the points, never their dates), and every model is fitted on its window alone, as fev does;
one ``StatsForecast.forecast`` call fits the whole batch, spread over statsforecast's own ``n_jobs``
processes. A model whose constructor takes ``season_length`` and is not given one gets the study's
seasonal period (data.season). NaN policy: statsforecast's models do not take missing values, so
causalrate imputes them first (forecast.imputation) and records it.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from causalrate.data.dataset import Dataset
from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, Batch, System
from causalrate.systems.checkpoints import require


class StatsForecastSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model: str = Field(description="a class of statsforecast.models: AutoARIMA, AutoETS, AutoTheta, SeasonalNaive, …")
    params: dict[str, Any] = Field(default_factory=dict, description="the model's keyword arguments")
    n_jobs: int = Field(1, ge=-1, description="statsforecast's processes across the batch's windows (-1: all cores)")


@SYSTEMS.register("statsforecast")
class StatsForecastModel(System):
    """A statsforecast model fitted on each input window (missing values imputed first)."""

    Settings = StatsForecastSettings
    settings: StatsForecastSettings
    accepts_nan = False
    seasonal = True
    libraries = ("statsforecast", "coreforecast", "numpy", "scipy", "statsmodels")

    def identity(self) -> dict[str, Any]:
        """n_jobs changes how fast, not what it forecasts: it stays out of the cache key."""
        identity = super().identity()
        settings = {k: v for k, v in identity["settings"].items() if k != "n_jobs"}
        return {**identity, "settings": settings}

    def check(self, dataset: Dataset) -> None:
        require("statsforecast", "statsforecast", system="statsforecast")
        self.build(dataset.season)

    def build(self, season: int) -> Any:
        """The model object: its class by name, its params, and the study's season where it takes one."""
        from statsforecast import models

        name = self.settings.model
        cls = getattr(models, name, None)
        if not inspect.isclass(cls) or name.startswith("_"):
            known = sorted(n for n, c in vars(models).items() if inspect.isclass(c) and hasattr(c, "forecast"))
            raise UserError(f"system type statsforecast: model: no model {name!r} in statsforecast; known: {known}")
        params = dict(self.settings.params)
        if "season_length" in inspect.signature(cls).parameters:
            params.setdefault("season_length", season)
        try:
            return cls(**params)
        except (TypeError, ValueError) as exc:
            raise UserError(f"system type statsforecast: params of {name}: {exc}") from None

    def forecast(self, batch: Batch) -> np.ndarray:
        import pandas as pd
        from statsforecast import StatsForecast

        rows, n = batch.inputs.shape
        ids = [f"{i:06d}" for i in range(rows)]  # zero-padded: sorted ids keep the batch's order
        frame = pd.DataFrame(
            {"unique_id": np.repeat(ids, n), "ds": np.tile(np.arange(n), rows), "y": batch.inputs.ravel()}
        )
        model = self.build(batch.season)
        fitted = StatsForecast(models=[model], freq=1, n_jobs=self.settings.n_jobs)
        out = fitted.forecast(df=frame, h=batch.horizon)
        table = out.pivot(index="unique_id", columns="ds", values=str(model))
        return table.loc[ids].to_numpy(dtype=np.float64)
