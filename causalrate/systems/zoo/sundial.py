"""Sundial (THUML, 2025) through transformers with the checkpoint's own (remote) modelling code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.checkpoints import CheckpointSettings
from causalrate.systems.zoo._base import ZooSystem


class SundialSettings(CheckpointSettings):
    num_samples: int = Field(20, ge=1, description="sample paths per forecast (the flow-matching head's draws)")


@SYSTEMS.register("sundial")
class Sundial(ZooSystem):
    """Sundial: a decoder-only transformer with a flow-matching head drawing sample paths.

    Loaded with AutoModelForCausalLM(trust_remote_code=True) from thuml/sundial-base-128m and
    forecast with its generate(inputs, max_new_tokens, num_samples) → [batch, samples, horizon].
    Each row is drawn under its own seed, so a forecast does not depend on its batch.
    """

    Settings = SundialSettings
    settings: SundialSettings
    package = ("transformers", "hf")
    architecture = "decoder-only"
    stochastic = True
    accepts_nan = False  # the remote code has no missing-value mask
    output = "samples"
    libraries = ("transformers", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=True, dtype=dtype)
        return model.to(device).eval()

    def forecast(self, batch: Batch) -> Prediction:
        import torch

        model = self.loaded()
        parameter = next(model.parameters())
        paths = []
        with torch.no_grad():
            for row, seed in zip(batch.inputs, batch.seeds, strict=True):
                torch.manual_seed(int(seed) % 2**63)
                x = torch.tensor(row[None], dtype=parameter.dtype, device=parameter.device)
                out = model.generate(x, max_new_tokens=batch.horizon, num_samples=self.settings.num_samples)
                paths.append(out.reshape(1, self.settings.num_samples, -1)[..., : batch.horizon].float().cpu().numpy())
        samples = np.concatenate(paths).astype(np.float64)
        return Prediction(point=np.median(samples, axis=1), samples=samples)
