"""TimesFM 3.0 (Google, 2026) through the timesfm package's own `timesfm3` module (timesfm ≥ 3).

The weights (google/timesfm-3.0-pytorch) are gated on the Hugging Face Hub under a non-commercial
licence; the package's code is Apache-2.0. Both are stated on the card through `licence`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.checkpoints import CheckpointSettings
from causalrate.systems.zoo._base import ZooSystem, quantile_prediction


@SYSTEMS.register("timesfm3")
class TimesFM3(ZooSystem):
    """TimesFM 3.0: a decoder-only patch transformer with a quantile head; NaN interpolated inside its API.

    TimesFM3Forecaster.from_pretrained(<folder with config.json + model.safetensors>) loads
    TimesFM3Torch through huggingface_hub's mixin; predict_batch(contexts, horizon,
    return_quantiles=True) strips leading NaN and linearly interpolates the rest before the model
    sees the window, so a NaN reaches the package, not the network. The point forecast is its
    median; the quantile grid is the checkpoint's own.
    """

    Settings = CheckpointSettings
    settings: CheckpointSettings
    package = ("timesfm3", "timesfm3")
    architecture = "decoder-only"
    nan_policy = "linearly interpolated inside its API"
    output = "quantiles"
    licence = "weights gated on the Hugging Face Hub, non-commercial licence; code Apache-2.0"
    libraries = ("timesfm", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from timesfm3 import TimesFM3Forecaster

        return TimesFM3Forecaster.from_pretrained(
            str(folder), device=device, per_core_batch_size=self.batch_size or 4, local_files_only=True
        )

    def forecast(self, batch: Batch) -> Prediction:
        forecaster = self.loaded()
        rows = list(batch.inputs.astype(np.float32))
        out = forecaster.predict_batch(contexts=rows, horizon=batch.horizon, return_quantiles=True)
        grid = np.stack([o.quantiles for o in out])  # [b, d, q]
        return quantile_prediction(grid, [float(q) for q in forecaster.config.quantiles])
