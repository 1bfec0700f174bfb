"""TiRex (NX-AI, 2025): an xLSTM forecaster, through the tirex-ts package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.zoo._base import QuantileSettings, ZooSystem, levels_of, quantile_prediction


@SYSTEMS.register("tirex")
class TiRex(ZooSystem):
    """TiRex: sLSTM blocks over patches predicting quantiles; NaN inputs are masked natively.

    The checkpoint folder holds model.ckpt (as in NX-AI/TiRex); it loads through
    TiRexZero.from_pretrained, the call behind tirex.load_model, on the pure-torch backend
    (the CUDA kernels are optional and change nothing but speed).
    """

    Settings = QuantileSettings
    settings: QuantileSettings
    package = ("tirex", "tirex")
    architecture = "recurrent (xLSTM)"
    nan_policy = "native mask"
    output = "quantiles"
    libraries = ("tirex-ts", "torch")

    def check(self, dataset) -> None:
        super().check(dataset)
        if not (self.folder() / "model.ckpt").is_file():
            raise UserError(f"system type tirex: model: no model.ckpt in {self.folder()}")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from tirex import TiRexZero

        return TiRexZero.from_pretrained(str(folder / "model.ckpt"), backend="torch", device=device).eval()

    def forecast(self, batch: Batch) -> Prediction:
        import torch

        model = self.loaded()
        levels = levels_of(self.settings)
        known = [float(q) for q in model.config.quantiles]
        if not set(levels) <= set(known):
            raise ValueError(f"quantile_levels {levels} are not all among the checkpoint's {known}")
        context = torch.tensor(batch.inputs, dtype=torch.float32)
        grid, _ = model.forecast(
            context, prediction_length=batch.horizon, batch_size=self.batch_size, output_type="numpy"
        )
        grid = np.asarray(grid)[:, : batch.horizon, [known.index(q) for q in levels]]
        return quantile_prediction(grid, levels)
