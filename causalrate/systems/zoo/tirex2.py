"""TiRex-2 (NX-AI, 2026): bidirectional xLSTM time mixers with variate attention, through tirex-2.

Own environment: tirex-2 needs flashrnn, which requires triton (a GPU compiler, hundreds of MB) on
Linux; on the CPU, tirex-2 runs flashrnn's pure-torch "vanilla" backend, so flashrnn is installed
without its dependencies rather than pulling triton into the core.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.zoo._base import OwnEnvironment, QuantileSettings, ZooSystem, levels_of, quantile_prediction

# tirex-2 0.4.0's declared dependencies (flashrnn aside, installed --no-deps), torch at the CPU build here
TIREX2_REQUIREMENTS = (
    "torch==2.13.0",
    "numpy>=2.1.3",
    "mlstm_kernels==2.0.6",
    "einops",
    "PyYAML>=6",
    "huggingface-hub>=0.35.3",
    "safetensors>=0.6",
    "narwhals>=2.0",
)


@SYSTEMS.register("tirex2")
class TiRex2(ZooSystem):
    """TiRex-2: xLSTM blocks over patches predicting quantiles; NaN inputs are masked natively.

    tirex2.load_model(<folder with config.json + model.safetensors>, device) → ForecastModel;
    forecast([TimeseriesType(target [1, T])], prediction_length, output_type="numpy") gives
    [1, quantile, horizon] per series. The model feeds ~isnan(x) as a mask channel beside the
    zero-filled values, as in pre-training.
    """

    Settings = QuantileSettings
    settings: QuantileSettings
    package = ("tirex2", "tirex2")
    own_environment = OwnEnvironment(
        why="tirex-2 needs flashrnn, which pulls triton (GPU only) into the environment",
        requirements=TIREX2_REQUIREMENTS,
        no_deps=("tirex-2==0.4.0", "flashrnn==1.0.8"),
        relaxed=(
            "flashrnn 1.0.8 requires triton, ninja: not installed (its fused CUDA kernels; on the CPU "
            "tirex-2 runs the pure-torch vanilla backend of flashrnn)",
        ),
    )
    architecture = "recurrent (xLSTM)"
    nan_policy = "native mask"
    output = "quantiles"
    libraries = ("tirex-2", "flashrnn", "mlstm_kernels", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from tirex2 import load_model

        return load_model(str(folder), device=device.split(":")[0])

    def forecast(self, batch: Batch) -> Prediction:
        import torch
        from tirex2 import TimeseriesType

        model, levels = self.loaded(), levels_of(self.settings)
        known = [round(float(q), 6) for q in model.model.quantiles]
        if not set(levels) <= set(known):
            raise ValueError(f"quantile_levels {levels} are not all among the checkpoint's {known}")
        series = [
            TimeseriesType(
                target=torch.tensor(row[None], dtype=torch.float32), past_covariates=None, future_covariates=None
            )
            for row in batch.inputs
        ]
        out = model.forecast(series, prediction_length=batch.horizon, batch_size=self.batch_size, output_type="numpy")
        grid = np.stack([np.asarray(o)[0] for o in out]).transpose(0, 2, 1)  # [b, q, d] → [b, d, q]
        return quantile_prediction(grid[:, : batch.horizon, [known.index(q) for q in levels]], levels)
