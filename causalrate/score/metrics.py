"""Per-forecast metrics (METHOD §3), vectorised over a batch; found by name in METRICS.

Each takes truth [b, d], forecast [b, d] and the clean input [b, n] and returns [b].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from causalrate.registry import Registry

MetricFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Metric:
    name: str
    fn: MetricFn
    description: str
    lower_is_better: bool = True

    def __call__(self, truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
        return self.fn(truth, forecast, clean_input)


METRICS: Registry[Metric] = Registry("metric")


def metric(name: str, description: str, *, lower_is_better: bool = True) -> Callable[[MetricFn], MetricFn]:
    """Register a vectorised metric function under `name`."""

    def decorator(fn: MetricFn) -> MetricFn:
        METRICS.register(name)(Metric(name=name, fn=fn, description=description, lower_is_better=lower_is_better))
        return fn

    return decorator


@metric("rmax", "largest absolute error over the horizon (the paper's residual)")
def rmax(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
    return np.max(np.abs(truth - forecast), axis=1)


@metric("mae", "mean absolute error over the horizon")
def mae(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
    return np.mean(np.abs(truth - forecast), axis=1)


@metric("rmax_scaled", "rmax divided by the mean absolute clean input (comparable across price levels)")
def rmax_scaled(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
    return rmax(truth, forecast, clean_input) / np.mean(np.abs(clean_input), axis=1)


@metric("smape", "symmetric mean absolute percentage error, in [0, 2]")
def smape(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
    num = np.abs(truth - forecast)
    den = (np.abs(truth) + np.abs(forecast)) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(den == 0, 0.0, num / den)
    return terms.mean(axis=1)


@metric("mase", "mean absolute error scaled by the clean input's mean absolute one-step change")
def mase(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
    scale = np.mean(np.abs(np.diff(clean_input, axis=1)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, mae(truth, forecast, clean_input) / scale, np.nan)


@metric(
    "sign_accuracy", "share of horizon steps whose direction from the last input value is right", lower_is_better=False
)
def sign_accuracy(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
    last = clean_input[:, -1:]
    return np.mean(np.sign(forecast - last) == np.sign(truth - last), axis=1)
