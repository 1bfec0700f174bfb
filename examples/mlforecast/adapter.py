"""causalrate's python system over a pre-trained mlforecast model (the folder MLForecast.save wrote).

The study declares the folder under `files:`, so its content enters the forecast cache key:
retraining re-forecasts. NaN policy: LightGBM's lags would carry a NaN into the features, so the
system is declared `accepts_nan: false` and causalrate imputes missing inputs first.
"""

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from mlforecast import MLForecast


@cache
def _load(folder: Path) -> MLForecast:
    return MLForecast.load(folder)


def predict(inputs: np.ndarray, horizon: int, files: dict[str, Path]) -> np.ndarray:
    """Each input window is a new series for the trained model (mlforecast's new_df transfer)."""
    fcst = _load(files["model"])
    rows, n = inputs.shape
    ids = [f"{i:06d}" for i in range(rows)]
    frame = pd.DataFrame({"unique_id": np.repeat(ids, n), "ds": np.tile(np.arange(n), rows), "y": inputs.ravel()})
    out = fcst.predict(horizon, new_df=frame)
    return out.pivot(index="unique_id", columns="ds", values="lgbm").loc[ids].to_numpy()
