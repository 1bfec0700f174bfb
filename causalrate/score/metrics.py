"""Per-forecast metrics (METHOD §3), vectorised over a batch; found by name in METRICS.

Each takes truth [b, d], forecast [b, d] and the clean input [b, n] and returns [b];
a metric registered with ``uses_samples`` also gets the rows' sample paths ([s, d] or None each),
one registered with ``uses_season`` the study's seasonal period m (``season=m``, data.season).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from causalrate.registry import Registry

MetricFn = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Metric:
    name: str
    fn: MetricFn
    description: str
    lower_is_better: bool = True
    uses_samples: bool = False
    uses_season: bool = False

    def __call__(
        self,
        truth: np.ndarray,
        forecast: np.ndarray,
        clean_input: np.ndarray,
        samples: Sequence[np.ndarray | None] | None = None,
        *,
        season: int = 1,
    ) -> np.ndarray:
        extra = {"season": season} if self.uses_season else {}
        if self.uses_samples:
            return self.fn(truth, forecast, clean_input, samples or [None] * len(truth), **extra)
        return self.fn(truth, forecast, clean_input, **extra)


METRICS: Registry[Metric] = Registry("metric")


def metric(
    name: str, description: str, *, lower_is_better: bool = True, uses_samples: bool = False, uses_season: bool = False
) -> Callable[[MetricFn], MetricFn]:
    """Register a vectorised metric function under `name`."""

    def decorator(fn: MetricFn) -> MetricFn:
        METRICS.register(name)(
            Metric(
                name=name,
                fn=fn,
                description=description,
                lower_is_better=lower_is_better,
                uses_samples=uses_samples,
                uses_season=uses_season,
            )
        )
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


@metric(
    "mase",
    "mean absolute error scaled by the seasonal naive's in-sample error: the clean input's mean absolute change "
    "over one season (data.season = m; m = 1 is the paper's one-step MASE)",
    uses_season=True,
)
def mase(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray, *, season: int = 1) -> np.ndarray:
    """Hyndman & Koehler (2006): MAE / mean_t |x_t − x_{t−m}| over the n clean input points (n > m)."""
    scale = np.mean(np.abs(clean_input[:, season:] - clean_input[:, :-season]), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, mae(truth, forecast, clean_input) / scale, np.nan)


@metric(
    "sign_accuracy", "share of horizon steps whose direction from the last input value is right", lower_is_better=False
)
def sign_accuracy(truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray) -> np.ndarray:
    last = clean_input[:, -1:]
    return np.mean(np.sign(forecast - last) == np.sign(truth - last), axis=1)


def crps_samples(truth: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """CRPS of an ensemble per horizon step, sorted-sample estimator (O(m log m) instead of O(m²)).

    CRPS = mean_i |x_i − y| − (1 / 2m²) Σ_ij |x_i − x_j|, and with the samples sorted
    Σ_ij |x_i − x_j| = 2 Σ_i (2i − m − 1) x_(i) (i = 1..m). truth [d], samples [m, d] → [d].
    """
    m = samples.shape[0]
    ordered = np.sort(samples, axis=0)
    weights = 2 * np.arange(1, m + 1) - m - 1
    spread = 2 * (weights[:, None] * ordered).sum(axis=0)
    return np.abs(samples - truth).mean(axis=0) - spread / (2 * m * m)


@metric(
    "crps",
    "continuous ranked probability score, mean over the horizon (point forecasts: equals MAE)",
    uses_samples=True,
)
def crps(
    truth: np.ndarray, forecast: np.ndarray, clean_input: np.ndarray, samples: Sequence[np.ndarray | None]
) -> np.ndarray:
    """A point forecast is a one-sample ensemble, so its CRPS is its MAE: every system gets a CRPS."""
    out = np.abs(truth - forecast).mean(axis=1)
    for i, paths in enumerate(samples):
        if paths is not None:
            out[i] = crps_samples(truth[i], paths).mean()
    return out
