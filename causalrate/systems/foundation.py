"""Time-series foundation models: Chronos (chronos-forecasting) and MOMENT (momentfm)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.checkpoints import CheckpointSettings, CheckpointSystem, locate


class ChronosSettings(CheckpointSettings):
    num_samples: int = Field(20, ge=1, description="sample paths per forecast (sampling Chronos models)")
    quantile_levels: list[float] = Field(
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        description="quantiles kept (Chronos-Bolt and other quantile models)",
    )


@SYSTEMS.register("chronos")
class Chronos(CheckpointSystem):
    """Chronos and Chronos-Bolt through chronos-forecasting's BaseChronosPipeline.

    Sampling models (Chronos) keep their sample paths, quantile models (Chronos-Bolt) their
    quantile grid; the point forecast is the median. Missing values go in as NaN, which the
    pipeline masks out.
    """

    Settings = ChronosSettings
    settings: ChronosSettings
    package = ("chronos", "chronos")
    t5_family = True
    family = "time-series FM"
    architecture = "encoder-decoder"
    stochastic = True
    nan_policy = "native mask"
    output = "samples or quantiles"  # sampling Chronos: samples; Chronos-Bolt: quantiles
    libraries = ("chronos-forecasting", "torch", "transformers")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from chronos import BaseChronosPipeline

        return BaseChronosPipeline.from_pretrained(str(folder), device_map=device, dtype=dtype)

    def forecast(self, batch: Batch) -> Prediction:
        import torch
        from chronos.base import ForecastType

        pipeline, s = self.loaded(), self.settings
        context = torch.tensor(batch.inputs, dtype=torch.float32)
        if pipeline.forecast_type == ForecastType.SAMPLES:
            parts = []
            for rows in torch.arange(len(context)).split(self.batch_size):
                with row_sampling(pipeline, batch.seeds[rows.numpy()], s.num_samples):
                    parts.append(
                        pipeline.predict(
                            context[rows],
                            prediction_length=batch.horizon,
                            num_samples=s.num_samples,
                            limit_prediction_length=False,
                        )
                    )
            paths = torch.cat(parts).float().numpy().astype(np.float64)
            return Prediction(point=np.median(paths, axis=1), samples=paths)
        levels = sorted(set(s.quantile_levels) | {0.5})
        grids = [
            pipeline.predict_quantiles(c, prediction_length=batch.horizon, quantile_levels=levels)[0]
            for c in context.split(self.batch_size)
        ]
        grid = torch.cat(grids).float().numpy().astype(np.float64)  # [b, d, q]
        return Prediction(point=grid[..., levels.index(0.5)], samples=grid.transpose(0, 2, 1))


@contextmanager
def row_sampling(pipeline: Any, seeds: np.ndarray, samples: int) -> Iterator[None]:
    """Inside, a sampling Chronos draws every row's paths from that row's own seed, in one batched call.

    chronos-forecasting samples through transformers' `generate` (one multinomial draw over the
    whole batch, so a row's paths would depend on its batch). This adds a logits processor that
    applies the model's temperature, top-k and top-p and picks each row's token by the
    exponential race (Gumbel-max) with that row's own generator, leaving one token possible.
    """
    from transformers import LogitsProcessorList

    config = pipeline.model.config
    sampler = RowSampler(seeds, samples, temperature=config.temperature, top_k=config.top_k, top_p=config.top_p)
    inner = pipeline.model.model
    inner.generate = functools.partial(inner.generate, logits_processor=LogitsProcessorList([sampler]))
    try:
        yield
    finally:
        del inner.generate  # the class's own method again


class RowSampler:
    """A transformers logits processor: next tokens drawn per row (rows are [row, sample] in row-major order)."""

    def __init__(self, seeds: np.ndarray, samples: int, *, temperature: float, top_k: int, top_p: float) -> None:
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.seeds, self.samples = [int(s) % 2**63 for s in seeds], samples
        self.warpers = [TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k)]
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p))
        self.generators: list[Any] | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.generators is None:  # on the scores' device, made once: later steps continue each row's stream
            self.generators = [torch.Generator(scores.device).manual_seed(seed) for seed in self.seeds]
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        shape = (self.samples, scores.shape[-1])
        race = torch.cat([torch.empty(shape, device=scores.device).exponential_(generator=g) for g in self.generators])
        chosen = (scores.float() - race.log()).argmax(dim=-1, keepdim=True)
        return torch.full_like(scores, -torch.inf).scatter_(-1, chosen, 0.0)


class MomentSettings(CheckpointSettings):
    head: str | None = Field(
        None, description="forecasting head weights (.safetensors or torch .pt state dict), relative to the YAML file"
    )
    untrained_head: bool = Field(
        False, description="allow the randomly initialised head (smoke tests only: its forecasts are meaningless)"
    )
    seq_len: int = Field(512, ge=8, description="the checkpoint's input length; inputs are left-padded and masked")


@SYSTEMS.register("moment")
class Moment(CheckpointSystem):
    """MOMENT in forecasting mode: frozen embedder and encoder, a fine-tuned forecasting head.

    momentfm only pre-trains the reconstruction head, so a forecasting head must come from
    fine-tuning (the paper: head_dropout 0.1, weight_decay 0, frozen encoder and embedder).
    Inputs are left-padded to seq_len; padding and missing values are masked out (input_mask 0).
    """

    Settings = MomentSettings
    horizon_shaped = True  # its head is built for the horizon

    def sources(self) -> tuple[Path, ...]:
        head = () if self.settings.head is None else (self.base_dir / self.settings.head,)
        return (*CheckpointSystem.sources(self), *head)  # not super(): an environment's proxy asks as well

    settings: MomentSettings
    package = ("momentfm", "moment")
    t5_family = True
    family = "time-series FM"
    architecture = "encoder-only"
    nan_policy = "native mask"
    libraries = ("momentfm", "torch", "transformers")
    # momentfm 0.1.4 pins numpy 1.25 and transformers 4.33, which cannot live beside the engine's
    environment_requirements = ("momentfm==0.1.4", "torch==2.13.0", "safetensors>=0.4")
    install = "causalrate env create moment (or name an environment: whose Python has momentfm==0.1.4)"

    def check(self, dataset) -> None:
        super().check(dataset)
        if self.settings.head is None and not self.settings.untrained_head:
            raise UserError(
                "system type moment: head: MOMENT's forecasting head is not pre-trained; give the fine-tuned "
                "head's weights file (or untrained_head: true for a smoke test)"
            )
        if self.settings.head is not None and not (self.base_dir / self.settings.head).is_file():
            raise UserError(f"system type moment: head: no file {self.base_dir / self.settings.head}")

    def identity(self) -> dict[str, Any]:
        identity = super().identity()
        if self.settings.head is not None:
            identity["head"] = hashlib.sha256((self.base_dir / self.settings.head).read_bytes()).hexdigest()
        return identity

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from momentfm import MOMENTPipeline

        model = MOMENTPipeline.from_pretrained(
            str(folder),
            model_kwargs={  # the paper's fine-tuning set-up; at inference only the head's shape matters
                "task_name": "forecasting",
                "forecast_horizon": horizon,
                "head_dropout": 0.1,
                "weight_decay": 0,
                "freeze_encoder": True,
                "freeze_embedder": True,
                "freeze_head": False,
            },
        )
        model.init()
        if self.settings.head is not None and (self.base_dir / self.settings.head).is_file():
            model.head.load_state_dict(_load_state(self.base_dir / self.settings.head))
        return model.to(device=device, dtype=dtype).eval()

    def forecast(self, batch: Batch) -> np.ndarray:
        """Inputs standardised and outputs restored in float64 here; only unit-scale values meet the weights' dtype.

        MOMENT's own RevIN would do the same in the weights' dtype: in bfloat16, prices near 1,000
        snap to a grid of 4. Its RevIN then sees mean 0 and deviation 1 and changes nothing.
        """
        import torch

        model = self.loaded(batch.horizon)
        x, mask = _moment_inputs(batch.inputs, self.settings.seq_len)
        x, mean, scale = _standardise(x, mask)
        parameter = next(model.parameters())
        out = []
        with torch.no_grad():
            for rows in np.array_split(np.arange(len(x)), max(1, -(-len(x) // self.batch_size))):
                result = model(
                    x_enc=torch.tensor(x[rows], dtype=parameter.dtype, device=parameter.device),
                    input_mask=torch.tensor(mask[rows], dtype=parameter.dtype, device=parameter.device),
                )
                out.append(result.forecast[:, 0].float().cpu().numpy())
        return np.concatenate(out).astype(np.float64) * scale + mean


def _standardise(x: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RevIN's statistics in float64: per row the observed values' mean and deviation (+1e-5), as MOMENT uses."""
    values = np.where(mask[:, None, :] > 0, x, np.nan)[:, 0]
    mean = np.nanmean(values, axis=1, keepdims=True)
    scale = np.sqrt(np.nanmean((values - mean) ** 2, axis=1, keepdims=True)) + 1e-5
    z = np.where(mask > 0, (x[:, 0] - mean) / scale, 0.0)
    return z[:, None, :], mean, scale


def _load_state(path: Path) -> dict:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def fit_moment_head(
    system: Moment,
    *,
    inputs: np.ndarray,
    truth: np.ndarray,
    out: Path | str,
    epochs: int = 3,
    learning_rate: float = 1e-4,
    batch_size: int = 32,
    seed: int = 0,
) -> dict[str, float]:
    """Train MOMENT's forecasting head on (input window, truth) pairs the paper's way and save it.

    Encoder and patch embedder stay frozen, the head trains with dropout 0.1 and weight decay 0
    (Adam, MSE), in float32 whatever the system's dtype (Adam's small updates vanish in bfloat16).
    `out` (.safetensors) is what the `moment` system's `head:` setting loads.
    Returns the mean training loss of the first and the last epoch. Runs in MOMENT's environment.
    """
    import torch
    from safetensors.torch import save_file

    out = Path(out)
    locate(system.settings.model, base_dir=system.base_dir, system="moment", download=True)
    torch.manual_seed(seed)
    model = system.load(system.folder(), device=system.device, dtype=torch.float32, horizon=truth.shape[1])
    n = system.settings.seq_len
    parameter = next(model.parameters())
    x, mask, y = (
        torch.tensor(a, dtype=parameter.dtype, device=parameter.device) for a in (*_moment_inputs(inputs, n), truth)
    )
    optimiser = torch.optim.Adam(model.head.parameters(), lr=learning_rate, weight_decay=0.0)
    order = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        model.train()
        epoch = []
        for rows in np.array_split(order.permutation(len(x)), max(1, -(-len(x) // batch_size))):
            forecast = model(x_enc=x[rows], input_mask=mask[rows]).forecast[:, 0]
            loss = torch.nn.functional.mse_loss(forecast, y[rows])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            epoch.append(float(loss))
        losses.append(float(np.mean(epoch)))
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in model.head.state_dict().items()}, str(out))
    return {"first_epoch_loss": losses[0], "last_epoch_loss": losses[-1]}


def _moment_inputs(values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Left-pad (and cut) input windows to MOMENT's length n; mask 0 on padding and missing values."""
    values = values[:, -n:]
    x = np.zeros((values.shape[0], 1, n))
    mask = np.zeros((values.shape[0], n))
    observed = ~np.isnan(values)
    x[:, 0, -values.shape[1] :] = np.where(observed, values, 0.0)
    mask[:, -values.shape[1] :] = observed
    return x, mask
