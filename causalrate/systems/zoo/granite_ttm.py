"""Granite TinyTimeMixer (IBM, TTM-r2) through granite-tsfm, in its own environment (it pins torch < 2.12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from causalrate.systems.base import SYSTEMS, Batch
from causalrate.systems.checkpoints import CheckpointSettings
from causalrate.systems.zoo._base import OwnEnvironment, ZooSystem

# granite-tsfm 0.3.11's declared dependencies, torch excepted (it allows >=2.10,<2.12; the CPU build here is 2.13.0)
GRANITE_REQUIREMENTS = (
    "torch==2.13.0",
    "transformers[torch]>=4.57.6,<6",
    "datasets",
    "deprecated",
    "urllib3>=1.26.19",
    "numpy<3",
    "scikit-learn<1.8",
    "pandas>=2.3.3,<4",
    "filelock>=3.20.3",
    "einops>=0.7",
)


@SYSTEMS.register("granite-ttm")
class GraniteTTM(ZooSystem):
    """TTM: an MLP-Mixer point forecaster of fixed context and prediction length; NaN masked in its scaler.

    TinyTimeMixerForPrediction.from_pretrained(ibm-granite/granite-timeseries-ttm-r2, revision per
    context/horizon); inputs are left-padded to the checkpoint's context_length. past_observed_mask
    (0 on padding and missing values) only keeps them out of the model's own mean/std scaling, so
    they are filled with the window's observed mean: 0 after that scaling, as granite-tsfm's own
    preprocessing pads scaled series with 0. The first `horizon` steps of its forecast are kept.
    """

    Settings = CheckpointSettings
    settings: CheckpointSettings
    package = ("tsfm_public", "granite-ttm")
    own_environment = OwnEnvironment(
        why="granite-tsfm pins torch<2.12 and scikit-learn<1.8, which conflict with the core",
        no_deps=("granite-tsfm==0.3.11",),
        requirements=GRANITE_REQUIREMENTS,
        relaxed=("torch<2.12,>=2.10 → 2.13.0",),
    )
    architecture = "MLP-mixer"
    nan_policy = "masked in its scaler, filled with the window mean"
    libraries = ("granite-tsfm", "torch", "transformers")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from tsfm_public import TinyTimeMixerForPrediction

        return TinyTimeMixerForPrediction.from_pretrained(str(folder)).to(device).eval()

    def forecast(self, batch: Batch) -> np.ndarray:
        import torch

        model = self.loaded()
        n, length = model.config.context_length, model.config.prediction_length
        if batch.horizon > length:
            raise ValueError(f"horizon {batch.horizon} exceeds the checkpoint's prediction_length {length}")
        values = batch.inputs[:, -n:]
        observed = ~np.isnan(values)
        if not observed.any(axis=1).all():
            raise ValueError("a window without any observed value")
        mean = np.nanmean(values, axis=1, keepdims=True)
        x = np.repeat(mean, n, axis=1)[..., None]
        mask = np.zeros((len(values), n, 1))
        x[:, -values.shape[1] :, 0] = np.where(observed, values, mean)
        mask[:, -values.shape[1] :, 0] = observed
        parameter = next(model.parameters())
        out = []
        with torch.no_grad():
            for start in range(0, len(x), self.batch_size):
                pick = slice(start, start + self.batch_size)
                result = model(
                    past_values=torch.tensor(x[pick], dtype=parameter.dtype, device=parameter.device),
                    past_observed_mask=torch.tensor(mask[pick], dtype=torch.bool, device=parameter.device),
                )
                out.append(result.prediction_outputs[:, : batch.horizon, 0].float().cpu().numpy())
        return np.concatenate(out).astype(np.float64)
