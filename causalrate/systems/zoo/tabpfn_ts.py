"""TabPFN-TS (Prior Labs, 2025): time series as tabular regression; own environment (gluonts: pandas < 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.zoo._base import OwnEnvironment, QuantileSettings, ZooSystem, levels_of, quantile_prediction


class TabPFNTSSettings(QuantileSettings):
    checkpoint_file: str = Field(description="the TabPFN regressor .ckpt inside the model folder")


@SYSTEMS.register("tabpfn-ts")
class TabPFNTS(ZooSystem):
    """TabPFN-TS: a tabular foundation model regressing each value on calendar and seasonal features of its date.

    TabPFNTSPipeline(tabpfn_mode=LOCAL, tabpfn_model_config={model_path: <folder>/<checkpoint_file>})
    .predict_df on (item_id, timestamp, target) rows, with the windows' own future dates as future_df
    (trading days are not a regular frequency to extrapolate); the package drops context rows whose
    target is NaN (a tabular model needs no contiguous history), so missing inputs leave rows out.
    """

    Settings = TabPFNTSSettings
    settings: TabPFNTSSettings
    package = ("tabpfn_time_series", "tabpfn-ts")
    own_environment = OwnEnvironment(
        why="tabpfn-time-series needs gluonts, which pins pandas<3",
        requirements=("tabpfn-time-series==1.3.0", "pandas<3", "torch==2.13.0"),
    )
    architecture = "in-context tabular transformer"
    nan_policy = "rows with NaN dropped by the package"
    output = "quantiles"
    wants_context = True  # its features are computed from the dates
    libraries = ("tabpfn-time-series", "tabpfn", "torch")

    def check(self, dataset) -> None:
        super().check(dataset)
        checkpoint = self.folder() / self.settings.checkpoint_file
        if not checkpoint.is_file():
            raise UserError(f"system type {self.type_name}: checkpoint_file: no file {checkpoint}")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from tabpfn_time_series import TABPFN_DEFAULT_CONFIG, TabPFNMode, TabPFNTSPipeline

        config = {**TABPFN_DEFAULT_CONFIG, "model_path": str(folder / self.settings.checkpoint_file), "device": device}
        return TabPFNTSPipeline(tabpfn_mode=TabPFNMode.LOCAL, tabpfn_model_config=config)

    def forecast(self, batch: Batch) -> Prediction:
        import pandas as pd

        pipeline, levels = self.loaded(), levels_of(self.settings)
        rows = len(batch.inputs)
        context = pd.DataFrame(
            {
                "item_id": np.repeat(np.arange(rows), batch.inputs.shape[1]),
                "timestamp": pd.to_datetime(batch.input_dates.ravel()),
                "target": batch.inputs.ravel(),
            }
        )
        future = pd.DataFrame(
            {
                "item_id": np.repeat(np.arange(rows), batch.horizon),
                "timestamp": pd.to_datetime(batch.truth_dates.ravel()),
            }
        )
        frame = pipeline.predict_df(context, future_df=future, quantiles=levels)
        frame = frame.reset_index().sort_values(["item_id", "timestamp"])
        columns = [q if q in frame.columns else str(q) for q in levels]
        grid = frame[columns].to_numpy(dtype=np.float64).reshape(rows, batch.horizon, len(levels))
        return quantile_prediction(grid, levels)
