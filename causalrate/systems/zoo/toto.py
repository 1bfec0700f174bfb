"""Toto (Datadog, 2025) through toto-ts, in its own environment (toto-ts pins torch 2.7, numpy 1.26)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.checkpoints import CheckpointSettings
from causalrate.systems.zoo._base import ZooSystem

DAY = 86400  # seconds: the daily data causalrate rates


class TotoSettings(CheckpointSettings):
    num_samples: int = Field(64, ge=1, description="sample paths per forecast")


@SYSTEMS.register("toto")
class Toto(ZooSystem):
    """Toto: a decoder-only transformer with a Student-t mixture head, decoded autoregressively into sample paths.

    Toto.from_pretrained(Datadog/Toto-Open-Base-1.0) → TotoForecaster(model.model).forecast on a
    MaskedTimeseries; each row is drawn under its own seed, so a forecast does not depend on its batch.
    """

    Settings = TotoSettings
    package = ("toto", "toto")
    install = "causalrate env create toto (toto-ts pins torch 2.7, numpy 1.26 and transformers 4.52)"
    environment_requirements: ClassVar[list[str]] = ["toto-ts==0.2.0"]
    architecture = "decoder-only"
    stochastic = True
    accepts_nan = False  # its padding mask marks padding, not gaps inside the window
    output = "samples"
    libraries = ("toto-ts", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from toto.inference.forecaster import TotoForecaster
        from toto.model.toto import Toto as TotoModel

        model = TotoModel.from_pretrained(str(folder)).to(device)
        return TotoForecaster(model.model)

    def forecast(self, batch: Batch) -> Prediction:
        import torch
        from toto.data.util.dataset import MaskedTimeseries

        forecaster = self.loaded()
        device = next(forecaster.model.parameters()).device
        paths = []
        for row, seed in zip(batch.inputs, batch.seeds, strict=True):
            torch.manual_seed(int(seed) % 2**63)
            series = torch.tensor(row[None, None], dtype=torch.float32, device=device)  # [1, variate, time]
            inputs = MaskedTimeseries(
                series=series,
                padding_mask=torch.ones_like(series, dtype=torch.bool),
                id_mask=torch.zeros_like(series, dtype=torch.int),
                timestamp_seconds=torch.zeros_like(series, dtype=torch.int),
                time_interval_seconds=torch.full((1, 1), DAY, dtype=torch.int, device=device),
            )
            out = forecaster.forecast(inputs, prediction_length=batch.horizon, num_samples=self.settings.num_samples)
            paths.append(out.samples[:, 0].permute(0, 2, 1).float().cpu().numpy())  # [1, s, d]
        samples = np.concatenate(paths).astype(np.float64)
        return Prediction(point=np.median(samples, axis=1), samples=samples)
