"""causalrate's python system over a pre-trained neuralforecast model (the folder NeuralForecast.save wrote).

The study declares the folder under `files:`, so its content enters the forecast cache key: retraining
re-forecasts. NaN policy: NHITS takes no missing values, so the system is `accepts_nan: false` and causalrate
imputes them first. The model forecasts its trained horizon only: another one is a clear failure.
"""

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from neuralforecast import NeuralForecast


@cache
def _load(folder: Path) -> NeuralForecast:
    return NeuralForecast.load(str(folder))


def predict(inputs: np.ndarray, horizon: int, files: dict[str, Path]) -> np.ndarray:
    """Each input window is a new series for the trained model (predict(df=...) on unseen ids)."""
    nf = _load(files["model"])
    trained = nf.models[0].h
    if horizon != trained:
        raise ValueError(f"the model was trained for horizon {trained}, not {horizon}: set windows.horizon: {trained}")
    rows, n = inputs.shape
    ids = [f"{i:06d}" for i in range(rows)]
    frame = pd.DataFrame({"unique_id": np.repeat(ids, n), "ds": np.tile(np.arange(n), rows), "y": inputs.ravel()})
    out = nf.predict(df=frame)
    return out.pivot(index="unique_id", columns="ds", values=str(nf.models[0])).loc[ids].to_numpy()
