"""Moirai-2 (Salesforce, 2025) through uni2ts, in its own environment (uni2ts pins torch < 2.5, numpy 1.26)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.zoo._base import OwnEnvironment, QuantileSettings, ZooSystem, levels_of, quantile_prediction

# uni2ts 2.0.0's declared dependencies that its inference path imports, at its own pins but torch's
MOIRAI_REQUIREMENTS = (
    "torch==2.13.0",
    "numpy~=1.26.0",
    "scipy~=1.11.3",
    "einops==0.7.*",
    "jaxtyping~=0.2.24",
    "gluonts~=0.14.3",
    "lightning>=2.0",
    "hydra-core==1.3",
    "huggingface-hub>=0.23.0",
    "safetensors",
    "python-dotenv==1.0.0",
    "orjson",
    "pandas<2.3",
)
MOIRAI_RELAXED = (
    "torch<2.5,>=2.1 → 2.13.0",
    "datasets, jax[cpu], multiprocess, tensorboard: not installed (training and data building only)",
)


class Moirai2Settings(QuantileSettings):
    context_length: int = Field(1680, ge=8, description="the forecaster's context; shorter inputs are padded")


@SYSTEMS.register("moirai2")
class Moirai2(ZooSystem):
    """Moirai-2: a decoder-only transformer with a quantile head; NaN inputs are masked natively.

    Moirai2Module.from_pretrained(Salesforce/moirai-2.0-R-small) wrapped in a Moirai2Forecast
    per horizon; predict(past_target) marks NaN as unobserved and fills them by the causal mean, as
    in pre-training, and returns [batch, quantile, horizon].
    """

    Settings = Moirai2Settings
    settings: Moirai2Settings
    package = ("uni2ts", "moirai2")
    horizon_shaped = True  # loaded(horizon)
    own_environment = OwnEnvironment(
        why="uni2ts pins torch<2.5, numpy 1.26 and scipy 1.11, which conflict with the core",
        no_deps=("uni2ts==2.0.0",),
        requirements=MOIRAI_REQUIREMENTS,
        relaxed=MOIRAI_RELAXED,
    )
    architecture = "decoder-only"
    nan_policy = "native mask"
    output = "quantiles"
    libraries = ("uni2ts", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from uni2ts.model.moirai2 import Moirai2Forecast, Moirai2Module

        return Moirai2Forecast(
            module=Moirai2Module.from_pretrained(str(folder)),
            prediction_length=horizon,
            context_length=self.settings.context_length,
            target_dim=1,
            feat_dynamic_real_dim=0,
            past_feat_dynamic_real_dim=0,
        ).to(device)

    def forecast(self, batch: Batch) -> Prediction:
        model, levels = self.loaded(batch.horizon), levels_of(self.settings)
        known = [float(q) for q in model.module.quantile_levels]
        if not set(levels) <= set(known):
            raise ValueError(f"quantile_levels {levels} are not all among the checkpoint's {known}")
        grids = [
            model.predict(past_target=list(batch.inputs[start : start + self.batch_size]))
            for start in range(0, len(batch.inputs), self.batch_size)
        ]
        grid = np.concatenate(grids).reshape(len(batch.inputs), len(known), -1).transpose(0, 2, 1)  # [b, d, q]
        return quantile_prediction(grid[..., [known.index(q) for q in levels]], levels)
