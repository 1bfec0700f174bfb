"""Toto (Datadog, 2025) through toto-ts, in its own environment (toto-ts pins torch 2.7, numpy 1.26)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.checkpoints import CheckpointSettings
from causalrate.systems.zoo._base import OwnEnvironment, ZooSystem

DAY = 86400  # seconds: the daily data causalrate rates
# toto-ts 0.2.0's declared dependencies that its inference path imports, at its own pins but torch's
TOTO_REQUIREMENTS = (
    "torch==2.13.0",
    "numpy==1.26.4",
    "pandas==2.2.3",
    "einops==0.7.0",
    "jaxtyping==0.2.29",
    "beartype==0.18.5",
    "gluonts[torch]==0.16.2",
    "rotary-embedding-torch==0.8.6",
    "lightning==2.3.3",
    "setuptools<81",  # lightning 2.3 imports pkg_resources, which setuptools 81 removed
    "huggingface-hub",
    "safetensors",
    "pyyaml==6.0.2",
    "tqdm==4.66.3",
    "rich>=10.2.2",
)
TOTO_RELAXED = (
    "torch==2.7.0 → 2.13.0",
    "aioboto3, boto3, datasets, dill, scikit-learn, transformers, black, isort, jupyter, matplotlib, mypy, "
    "pytest, pytest-env, tabulate, tensorboard, types-pyyaml, types-tabulate: not installed "
    "(evaluation, cloud data, development and plotting only)",
)


class TotoSettings(CheckpointSettings):
    num_samples: int = Field(64, ge=1, description="sample paths per forecast")


@SYSTEMS.register("toto")
class Toto(ZooSystem):
    """Toto: a decoder-only transformer with a Student-t mixture head, decoded autoregressively into sample paths.

    Toto.load_from_checkpoint(<Datadog/Toto-Open-Base-1.0 folder>) → TotoForecaster(model.model).forecast on a
    MaskedTimeseries (samples [batch, variate, time, sample]); each row is drawn under its own seed,
    so a forecast does not depend on its batch.
    """

    Settings = TotoSettings
    settings: TotoSettings
    package = ("toto", "toto")
    own_environment = OwnEnvironment(
        why="toto-ts pins torch 2.7.0, numpy 1.26 and pandas 2.2, which conflict with the core",
        no_deps=("toto-ts==0.2.0",),
        requirements=TOTO_REQUIREMENTS,
        relaxed=TOTO_RELAXED,
    )
    architecture = "decoder-only"
    stochastic = True
    accepts_nan = False  # its padding mask marks padding, not gaps inside the window
    output = "samples"
    libraries = ("toto-ts", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from toto.inference.forecaster import TotoForecaster
        from toto.model.toto import Toto as TotoModel

        # the package's loader for a local folder (config.json + model.safetensors), strict=False as its
        # from_pretrained passes; from_pretrained itself fails under huggingface-hub ≥ 1 (proxies/resume_download)
        model = TotoModel.load_from_checkpoint(str(folder), map_location=device, strict=False)
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
            n = self.settings.num_samples  # one sampling batch: num_samples must be a multiple of samples_per_batch
            out = forecaster.forecast(inputs, prediction_length=batch.horizon, num_samples=n, samples_per_batch=n)
            paths.append(out.samples[:, 0].permute(0, 2, 1).float().cpu().numpy())  # [1, s, d]
        samples = np.concatenate(paths).astype(np.float64)
        return Prediction(point=np.median(samples, axis=1), samples=samples)
