"""Peers (issue 8, measure 2): the quickstart's clean windows backtested by statsforecast and darts.

Run in a separate environment with the peers installed (they are not causalrate dependencies):
    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install statsforecast u8darts
    /tmp/peers/bin/python bench/peers.py   (--smoke: the first 20 windows; without the peers it only loads the data)
and compare with `causalrate assess` on the same windows (bench/RESULTS.md). Same windows as the
quickstart: AAPL, MSFT, MRK, PFE, JPM, BAC in 2022, 80 input points, 20 ahead, stride 2.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from common import arguments

ROOT = Path(__file__).resolve().parents[1]
TICKERS = ["AAPL", "MSFT", "MRK", "PFE", "JPM", "BAC"]
N, H, STRIDE = 80, 20, 2


def load() -> pd.DataFrame:
    wide = pd.read_csv(ROOT / "causalrate/data/embedded/sp500_dataset.csv.gz", parse_dates=["Date"], index_col="Date")
    return wide.loc["2022-01-01":"2022-12-31", TICKERS]


def timed(label: str, fn):
    started = time.perf_counter()
    try:
        result = fn()
        print(f"| {label} | {time.perf_counter() - started:.2f} | ok |")
        return result
    except Exception as exc:
        print(f"| {label} | {time.perf_counter() - started:.2f} | failed: {type(exc).__name__}: {exc} |")
        return None


def statsforecast_cv(wide: pd.DataFrame, model) -> pd.DataFrame:
    from statsforecast import StatsForecast

    long = wide.reset_index().melt(id_vars="Date", var_name="unique_id", value_name="y").rename(columns={"Date": "ds"})
    long["ds"] = long.groupby("unique_id").cumcount()  # trading-day index, as causalrate windows are
    n_windows = (len(wide) - N - H) // STRIDE + 1
    sf = StatsForecast(models=[model], freq=1, n_jobs=1)
    return sf.cross_validation(df=long, h=H, step_size=STRIDE, n_windows=n_windows, input_size=N)


def darts_backtest(wide: pd.DataFrame, make_model) -> list:
    from darts import TimeSeries

    out = []
    for ticker in TICKERS:
        series = TimeSeries.from_values(wide[ticker].to_numpy())
        out.append(
            make_model().historical_forecasts(
                series,
                start=N,
                forecast_horizon=H,
                stride=STRIDE,
                retrain=True,
                train_length=N,
                last_points_only=False,
                overlap_end=False,
                verbose=False,
            )
        )
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    smoke = arguments().smoke
    wide = load().iloc[: N + H + 19 * STRIDE] if smoke else load()
    try:
        from darts.models import ARIMA as DartsARIMA
        from darts.models import NaiveSeasonal
        from statsforecast.models import ARIMA, Naive
    except ImportError as exc:
        if not smoke:
            raise
        print(f"smoke: {wide.shape} loaded; peers not installed ({exc.name}), nothing timed")
        return
    print(f"{len(wide)} days × {len(TICKERS)} series; windows per series: {(len(wide) - N - H) // STRIDE + 1}\n")
    print("| peer run | seconds | result |\n|---|---|---|")
    naive = timed("statsforecast cross_validation, Naive", lambda: statsforecast_cv(wide, Naive()))
    timed("statsforecast cross_validation, ARIMA(1,1,1)", lambda: statsforecast_cv(wide, ARIMA(order=(1, 1, 1))))
    timed("darts historical_forecasts, NaiveSeasonal(K=1)", lambda: darts_backtest(wide, lambda: NaiveSeasonal(K=1)))
    timed("darts historical_forecasts, ARIMA(1,1,1)", lambda: darts_backtest(wide, lambda: DartsARIMA(p=1, d=1, q=1)))
    if naive is not None:
        expected = len(TICKERS) * ((len(wide) - N - H) // STRIDE + 1)
        print(f"\nstatsforecast Naive produced {len(naive) // H} windows (causalrate: {expected})")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
