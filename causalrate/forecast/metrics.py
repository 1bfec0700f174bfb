"""Per-forecast metrics (METHOD §3), vectorised over a batch; found by name in METRICS.

Each takes truth [b, d], forecast [b, d] and the clean input [b, n] and returns [b];
a metric registered with ``uses_samples`` also gets the rows' sample paths ([s, d] or None each),
and the keywords it names in ``context``: ``season`` (the study's seasonal period m, data.season) and
``levels`` (the quantile levels of a quantile system's samples, None for sample paths or points).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from causalrate.contracts import ContractError, describe, facts_of, guarded, violation
from causalrate.registry import Registry

MetricFn = Callable[..., np.ndarray]
Context = Literal["season", "levels"]  # the keywords a metric may ask for


@dataclass(frozen=True)
class Metric:
    name: str
    fn: MetricFn
    description: str
    lower_is_better: bool = True
    uses_samples: bool = False
    context: tuple[Context, ...] = ()  # keywords it takes: "season", "levels"

    def __call__(
        self,
        truth: np.ndarray,
        forecast: np.ndarray,
        clean_input: np.ndarray,
        samples: Sequence[np.ndarray | None] | None = None,
        *,
        season: int = 1,
        levels: Sequence[float] | None = None,
    ) -> np.ndarray:
        given = {"season": season, "levels": levels}
        extra = {k: given[k] for k in self.context}
        with guarded("metric", self.name, self, "computing it"):  # a plugin metric's exception names it
            if self.uses_samples:
                values = self.fn(truth, forecast, clean_input, samples or [None] * len(truth), **extra)
            else:
                values = self.fn(truth, forecast, clean_input, **extra)
        return self._checked(values, len(truth))

    def _checked(self, values: object, rows: int) -> np.ndarray:
        """One number per forecast, as floats: a generator, text, a scalar or an array of another length was a
        traceback after forecasting (or, a scalar, broadcast to every forecast)."""
        array = np.asarray(values) if isinstance(values, np.ndarray | list | tuple) else None
        if array is None or array.ndim != 1 or len(array) != rows or array.dtype.kind not in "biuf":
            got = (
                f"a {type(values).__name__}"
                if array is None
                else f"an array of shape {array.shape} and dtype {array.dtype}"
            )
            raise violation(
                "metric", self.name, self, f"returned {got}; expected {rows} numbers, one per forecast (NaN: undefined)"
            )
        return array.astype(float, copy=False)


METRICS: Registry[Metric] = Registry("metric")


def _fits(name: str, entry: Metric) -> None:
    """A Metric (see `metric`) of a callable, registered under its own name."""
    if not isinstance(entry, Metric) or not callable(entry.fn):
        raise ContractError(f"metric {name!r} ({describe(entry)}): expected a Metric of a function (use @metric)")
    if entry.name != name:
        raise ContractError(f"metric {name!r} ({describe(entry)}): registered under {name!r} but named {entry.name!r}")


METRICS.contract(facts_of(Metric, "name", "description", "lower_is_better", "uses_samples", "context"), _fits)


METRIC_ROWS = 256  # rows scored at a time: a job's 2,048 rows at once make large temporaries, 3-5x slower (wql)


def batch_metrics(
    truth: np.ndarray,
    forecasts: np.ndarray,
    clean_input: np.ndarray,
    samples: Sequence[np.ndarray | None],
    *,
    season: int,
    levels: Sequence[float] | None,
) -> dict[str, np.ndarray]:
    """Every registered metric of a batch's rows, by name (NaN where undefined: the store writes NULL): what the
    store records per forecast, computed in the worker that made them or, for cached rows, in the main process.
    Each row's values are computed alone (row-wise sums), so scoring METRIC_ROWS rows at a time changes no bit."""
    parts: list[dict[str, np.ndarray]] = [{name: np.zeros(0) for name in METRICS.names()}]  # no rows: no values
    with np.errstate(all="ignore"):
        for a in range(0, len(truth), METRIC_ROWS):
            b = a + METRIC_ROWS
            rows = (truth[a:b], forecasts[a:b], clean_input[a:b], list(samples[a:b]) if samples else None)
            parts.append({name: m(*rows, season=season, levels=levels) for name, m in METRICS.items()})
    return {name: np.concatenate([part[name] for part in parts]) for name in METRICS.names()}


def metric(
    name: str,
    description: str,
    *,
    lower_is_better: bool = True,
    uses_samples: bool = False,
    context: tuple[Context, ...] = (),
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
                context=context,
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
    context=("season",),
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
    """Per step 1 when the forecast moves from the last clean input value the way the truth does, ½ when it
    predicts no change (a flat forecast is not wrong by definition: the benchmark `naive` scores ½), else 0."""
    last = clean_input[:, -1:]
    called = np.sign(forecast - last)
    credit = np.where(called == 0, 0.5, (called == np.sign(truth - last)).astype(float))
    return np.mean(credit, axis=1)


def crps_samples(truth: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """CRPS of an ensemble per horizon step, sorted-sample estimator (O(m log m) instead of O(m²)).

    CRPS = mean_i |x_i − y| − (1 / 2m²) Σ_ij |x_i − x_j|, and with the samples sorted
    Σ_ij |x_i − x_j| = 2 Σ_i (2i − m − 1) x_(i) (i = 1..m). truth [..., d], samples [..., m, d] → [..., d].
    """
    m = samples.shape[-2]
    ordered = np.sort(samples, axis=-2)
    weights = 2 * np.arange(1, m + 1) - m - 1
    spread = 2 * (weights[:, None] * ordered).sum(axis=-2)
    return np.abs(samples - truth[..., None, :]).mean(axis=-2) - spread / (2 * m * m)


DEFAULT_LEVELS = tuple(round(0.1 * k, 1) for k in range(1, 10))  # a point forecast's degenerate quantiles


def quantile_loss(truth: np.ndarray, quantiles: np.ndarray, levels: Sequence[float]) -> np.ndarray:
    """Pinball loss ρ_q(y − ŷ_q) = max(q·(y − ŷ_q), (q − 1)·(y − ŷ_q)). truth [..., d], quantiles [..., q, d] →
    [..., q, d]."""
    q = np.asarray(levels, dtype=np.float64)[:, None]
    error = truth[..., None, :] - quantiles
    return np.maximum(q * error, (q - 1) * error)


@dataclass(frozen=True)
class Group:
    """Rows of a batch whose forecasts have the same form, stacked: `rows` [r]; `point` [r, d]; `paths` [r, s, d]
    (sample paths or quantiles), None for point forecasts; `levels`: the paths' quantile levels, None for samples."""

    rows: np.ndarray
    point: np.ndarray
    paths: np.ndarray | None
    levels: tuple[float, ...] | None

    def quantiles(self) -> tuple[np.ndarray, tuple[float, ...]]:
        """The rows' quantile grid [r, q, d] and its levels: the system's own; sample paths' empirical quantiles at
        the default levels; else the point as every default level."""
        if self.paths is not None and self.levels is not None:
            return self.paths, self.levels
        if self.paths is not None:
            grid = np.quantile(self.paths, DEFAULT_LEVELS, axis=1).transpose(1, 0, 2)
            return np.ascontiguousarray(grid), DEFAULT_LEVELS  # C order: each row's sums run as they do alone
        return np.repeat(self.point[:, None, :], len(DEFAULT_LEVELS), axis=1), DEFAULT_LEVELS


def groups(forecast: np.ndarray, samples: Sequence[np.ndarray | None], levels: Sequence[float] | None) -> list[Group]:
    """A batch split by the form of its rows (point, or paths of one shape), so each form is one array operation."""
    if all(paths is None for paths in samples):  # point forecasts only: one group, without a look at each row
        rows = np.arange(len(forecast))
        return [Group(rows=rows, point=forecast[rows], paths=None, levels=None)]
    arrays = [None if paths is None else np.asarray(paths) for paths in samples]
    forms: dict[tuple | None, list[int]] = {}  # (shape, dtype) of the paths; None: a point forecast
    for i, paths in enumerate(arrays):
        forms.setdefault(None if paths is None else (paths.shape, paths.dtype.str), []).append(i)
    kept = None if levels is None else tuple(levels)
    return [
        Group(
            rows=np.array(rows),
            point=forecast[rows],
            paths=None if form is None else np.stack([a for a in (arrays[i] for i in rows) if a is not None]),
            levels=None if form is None else kept,
        )
        for form, rows in forms.items()
    ]


@metric(
    "crps",
    "continuous ranked probability score, mean over the horizon (point forecasts: equals MAE; quantile "
    "forecasts: 2 × the mean pinball loss over their levels)",
    uses_samples=True,
    context=("levels",),
)
def crps(
    truth: np.ndarray,
    forecast: np.ndarray,
    clean_input: np.ndarray,
    samples: Sequence[np.ndarray | None],
    *,
    levels: Sequence[float] | None = None,
) -> np.ndarray:
    """A point forecast is a one-sample ensemble, so its CRPS is its MAE: every system gets a CRPS.
    Sample paths: the ensemble estimator; quantiles at stated levels: CRPS ≈ (2/|Q|) Σ_q ρ_q (the quantile
    decomposition of Gneiting & Raftery 2007, as GluonTS and fev compute it)."""
    out = np.abs(truth - forecast).mean(axis=1)
    for g in groups(forecast, samples, levels):
        if g.paths is not None and g.levels is not None:
            loss = quantile_loss(truth[g.rows], g.paths, g.levels)
            out[g.rows] = 2 * loss.reshape(len(g.rows), -1).mean(axis=1)
        elif g.paths is not None:
            out[g.rows] = crps_samples(truth[g.rows], g.paths).mean(axis=1)
    return out


@metric(
    "wql",
    "weighted quantile loss: 2 Σ_q Σ_t ρ_q / (|Q| Σ_t |y_t|) (GluonTS, fev); a point forecast counts as every "
    "quantile 0.1…0.9, which makes its WQL its WAPE",
    uses_samples=True,
    context=("levels",),
)
def wql(
    truth: np.ndarray,
    forecast: np.ndarray,
    clean_input: np.ndarray,
    samples: Sequence[np.ndarray | None],
    *,
    levels: Sequence[float] | None = None,
) -> np.ndarray:
    out = np.empty(len(truth))
    for g in groups(forecast, samples, levels):
        grid, kept = g.quantiles()
        y = truth[g.rows]
        scale = np.abs(y).sum(axis=1)
        loss = 2 * quantile_loss(y, grid, kept).sum(axis=2).mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[g.rows] = np.where(scale > 0, loss / scale, np.nan)
    return out


@metric(
    "coverage_error",
    "|share of the truth inside the widest central interval − its nominal level| (levels 0.1/0.9: the 80 % "
    "interval); a point forecast's interval is the point itself",
    uses_samples=True,
    context=("levels",),
)
def coverage_error(
    truth: np.ndarray,
    forecast: np.ndarray,
    clean_input: np.ndarray,
    samples: Sequence[np.ndarray | None],
    *,
    levels: Sequence[float] | None = None,
) -> np.ndarray:
    out = np.empty(len(truth))
    for g in groups(forecast, samples, levels):
        grid, kept = g.quantiles()
        lo, hi = int(np.argmin(kept)), int(np.argmax(kept))
        y = truth[g.rows]
        inside = (grid[:, lo] <= y) & (y <= grid[:, hi])
        out[g.rows] = np.abs(inside.mean(axis=1) - (kept[hi] - kept[lo]))
    return out
