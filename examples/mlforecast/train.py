"""Train an mlforecast LightGBM on the first three weeks of load.csv and save it to trained/ (MLForecast.save).

Positions, not dates: ds is 0..T−1 with freq=1, as the adapter feeds each input window.
"""

from pathlib import Path

import lightgbm as lgb
import pandas as pd
from mlforecast import MLForecast

LAGS = [1, 2, 3, 23, 24, 25, 48]


def train(csv: Path, out: Path, hours: int = 24 * 21) -> MLForecast:
    frame = pd.read_csv(csv).groupby("unique_id").head(hours)
    frame = frame.assign(ds=frame.groupby("unique_id").cumcount())[["unique_id", "ds", "y"]]
    model = lgb.LGBMRegressor(n_estimators=60, num_leaves=15, n_jobs=1, deterministic=True, verbosity=-1, seed=0)
    fcst = MLForecast(models={"lgbm": model}, freq=1, lags=LAGS)
    fcst.fit(frame, static_features=[])
    fcst.save(out)
    return fcst


if __name__ == "__main__":
    here = Path(__file__).parent
    train(here / "load.csv", here / "trained")
    print("saved", here / "trained")
