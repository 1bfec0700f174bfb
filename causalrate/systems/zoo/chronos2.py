"""Chronos-2 (Amazon, 2025) through chronos-forecasting's Chronos2Pipeline (≥ 2.2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.zoo._base import QuantileSettings, ZooSystem, levels_of, quantile_prediction


@SYSTEMS.register("chronos2")
class Chronos2(ZooSystem):
    """Chronos-2: a patch encoder predicting a quantile grid; NaN inputs are masked natively.

    Each window is forecast as its own univariate series (cross_learning off), so a forecast
    never depends on which other windows share its batch.
    """

    Settings = QuantileSettings
    settings: QuantileSettings
    package = ("chronos", "chronos2")
    architecture = "encoder-only"
    nan_policy = "native mask"
    output = "quantiles"
    libraries = ("chronos-forecasting", "torch", "transformers")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from chronos import Chronos2Pipeline

        return Chronos2Pipeline.from_pretrained(str(folder), device_map=device, dtype=dtype)

    def forecast(self, batch: Batch) -> Prediction:
        pipeline, levels = self.loaded(), levels_of(self.settings)
        quantiles, _ = pipeline.predict_quantiles(
            batch.inputs[:, None, :].astype(np.float32),
            prediction_length=batch.horizon,
            quantile_levels=levels,
            batch_size=self.batch_size,
            cross_learning=False,
        )
        grid = np.stack([q[0].float().cpu().numpy() for q in quantiles])  # [b, d, q]
        return quantile_prediction(grid, levels)
