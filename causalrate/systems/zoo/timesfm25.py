"""TimesFM-2.5 (Google, 2025) through transformers' native TimesFm2_5ModelForPrediction.

The `timesfm` package hard-codes the 200M definition (no config to build a small copy from);
transformers ≥ 5 ships the same model with a config, loading google/timesfm-2.5-200m-transformers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.checkpoints import CheckpointSettings
from causalrate.systems.zoo._base import ZooSystem, quantile_prediction


@SYSTEMS.register("timesfm2.5")
class TimesFM25(ZooSystem):
    """TimesFM-2.5: a decoder-only patch model with a quantile head; missing inputs are imputed by causalrate.

    One forward pass forecasts up to the checkpoint's horizon_length (128) steps; the
    quantile grid is the checkpoint's own (0.1 … 0.9), the point forecast its median.
    """

    Settings = CheckpointSettings
    settings: CheckpointSettings
    package = ("transformers", "hf")
    architecture = "decoder-only"
    accepts_nan = False  # the model has no missing-value mask; NaN would poison its normalisation
    output = "quantiles"
    libraries = ("transformers", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from transformers import TimesFm2_5ModelForPrediction

        return TimesFm2_5ModelForPrediction.from_pretrained(str(folder), dtype=dtype).to(device).eval()

    def forecast(self, batch: Batch) -> Prediction:
        import torch

        model = self.loaded()
        if batch.horizon > model.config.horizon_length:
            raise ValueError(f"horizon {batch.horizon} exceeds the checkpoint's {model.config.horizon_length}")
        parameter = next(model.parameters())
        patch, n = model.config.patch_length, batch.inputs.shape[1]
        context = min(model.config.context_length, -(-n // patch) * patch)  # whole patches; the front is padded
        grids = []
        with torch.no_grad():
            for start in range(0, len(batch.inputs), self.batch_size):
                rows = batch.inputs[start : start + self.batch_size]
                past = [torch.tensor(r, dtype=parameter.dtype, device=parameter.device) for r in rows]
                out = model(past_values=past, forecast_context_len=context)
                grids.append(out.full_predictions[:, : batch.horizon, 1:].float().cpu().numpy())  # 0 is the mean
        levels = [float(q) for q in model.config.quantiles]
        return quantile_prediction(np.concatenate(grids), levels)
