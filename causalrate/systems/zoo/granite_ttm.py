"""Granite TinyTimeMixer (IBM, TTM-r2) through granite-tsfm, in its own environment (it pins torch < 2.12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from causalrate.systems.base import SYSTEMS, Batch
from causalrate.systems.checkpoints import CheckpointSettings
from causalrate.systems.zoo._base import ZooSystem


@SYSTEMS.register("granite-ttm")
class GraniteTTM(ZooSystem):
    """TTM: an MLP-Mixer point forecaster of fixed context and prediction length; NaN and padding masked natively.

    TinyTimeMixerForPrediction.from_pretrained(ibm-granite/granite-timeseries-ttm-r2, revision per
    context/horizon); inputs are left-padded to the checkpoint's context_length with
    past_observed_mask 0 on padding and missing values, and the first `horizon` steps are kept.
    """

    Settings = CheckpointSettings
    package = ("tsfm_public", "granite-ttm")
    install = "causalrate env create granite-ttm (granite-tsfm pins torch<2.12 and scikit-learn<1.8)"
    environment_requirements: ClassVar[list[str]] = ["granite-tsfm==0.3.11"]
    architecture = "MLP-mixer"
    nan_policy = "native mask"
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
        x, mask = np.zeros((len(values), n, 1)), np.zeros((len(values), n, 1))
        observed = ~np.isnan(values)
        x[:, -values.shape[1] :, 0] = np.where(observed, values, 0.0)
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
