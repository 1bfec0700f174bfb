"""FlowState (IBM, 2025): a state-space (S5) encoder with a functional basis decoder, through granite-tsfm.

It runs in Granite TTM's managed environment (the same granite-tsfm recipe, built once).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.zoo._base import QuantileSettings, ZooSystem, levels_of, quantile_prediction
from causalrate.systems.zoo.granite_ttm import GraniteTTM


class FlowStateSettings(QuantileSettings):
    freq: str = Field("D", description="the data's frequency, as granite-tsfm's get_fixed_factor reads it")
    domain: str | None = Field(None, description="get_fixed_factor's domain: Transport, Healthcare or Sales add weekly")


@SYSTEMS.register("flowstate")
class FlowState(ZooSystem):
    """FlowState: an S5 encoder over the raw series, decoded into quantiles at any horizon; NaN masked natively.

    FlowStateForPrediction.from_pretrained(ibm-granite/granite-timeseries-flowstate-r1); its forward
    (past_values [batch, time, 1], scale_factor, prediction_length) feeds isnan(x) as a second
    channel (with_missing, on by default) and returns quantile_outputs [batch, quantile, horizon, 1].
    scale_factor is get_fixed_factor(freq, domain): 24/365 for daily data outside weekly domains.
    """

    Settings = FlowStateSettings
    settings: FlowStateSettings
    package = ("tsfm_public", "granite-ttm")
    own_environment = GraniteTTM.own_environment
    environment_name = "granite-ttm"
    architecture = "state-space (S5)"
    nan_policy = "native mask"
    output = "quantiles"
    libraries = ("granite-tsfm", "torch", "transformers")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from tsfm_public import FlowStateForPrediction

        model = FlowStateForPrediction.from_pretrained(str(folder)).to(device).eval()
        if not model.config.with_missing:  # NaN would reach its normalisation unmasked
            raise ValueError(f"the FlowState checkpoint in {folder} has with_missing false: it cannot mask NaN")
        return model

    def forecast(self, batch: Batch) -> Prediction:
        import torch
        from tsfm_public.models.flowstate.utils.utils import get_fixed_factor

        model, levels = self.loaded(), levels_of(self.settings)
        known = [float(q) for q in model.config.quantiles]
        if not set(levels) <= set(known):
            raise ValueError(f"quantile_levels {levels} are not all among the checkpoint's {known}")
        scale = get_fixed_factor(self.settings.freq, self.settings.domain)
        parameter = next(model.parameters())
        grids = []
        with torch.no_grad():
            for start in range(0, len(batch.inputs), self.batch_size):
                rows = batch.inputs[start : start + self.batch_size, :, None]
                out = model(
                    past_values=torch.tensor(rows, dtype=parameter.dtype, device=parameter.device),
                    scale_factor=scale,
                    prediction_length=batch.horizon,
                )
                grids.append(out.quantile_outputs[..., 0].float().cpu().numpy())  # [b, q, d]
        grid = np.concatenate(grids).transpose(0, 2, 1)[:, : batch.horizon, [known.index(q) for q in levels]]
        return quantile_prediction(grid, levels)
