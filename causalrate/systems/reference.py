"""Reference systems of METHOD §7: naive, arima, random, biased; and seasonal_naive (the seasonal reference)."""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from causalrate.data.dataset import Dataset
from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, Batch, Prediction, System


def last_observed(inputs: np.ndarray) -> np.ndarray:
    """The last non-NaN value of each row."""
    finite = ~np.isnan(inputs)
    last = inputs.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    return inputs[np.arange(inputs.shape[0]), last]


@SYSTEMS.register("naive")
class Naive(System):
    """Repeats the last observed value."""

    quick = True

    def forecast(self, batch: Batch) -> np.ndarray:
        return np.repeat(last_observed(batch.inputs)[:, None], batch.horizon, axis=1)


class SeasonalNaiveSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    season: int | None = Field(None, ge=1, description="null: the study's seasonal period (data.season)")


@SYSTEMS.register("seasonal_naive")
class SeasonalNaive(System):
    """Repeats the last season: the forecast h steps ahead is the input value m·ceil(h/m) steps before it.

    MASE's scale is this forecaster's in-sample error, so on a clean series whose seasonal differences are
    constant its MASE is 1. Missing inputs are imputed by causalrate first.
    """

    Settings = SeasonalNaiveSettings
    settings: SeasonalNaiveSettings
    accepts_nan = False
    seasonal = True
    quick = True

    def forecast(self, batch: Batch) -> np.ndarray:
        season = self.settings.season or batch.season
        n = batch.inputs.shape[1]
        if season > n:
            raise ValueError(f"season {season} is longer than the input window ({n} points)")
        last = batch.inputs[:, n - season :]
        return last[:, np.arange(batch.horizon) % season]


class ArimaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order: tuple[int, int, int] = Field((1, 1, 1), description="(p, d, q)")
    trend: Literal["n", "c", "t", "ct"] | None = None


@SYSTEMS.register("arima")
class Arima(System):
    """statsmodels ARIMA fitted on each input window; its Kalman filter handles NaN natively.

    The fit skips the parameters' covariance (cov_type="none"): a forecast does not use it, and its numerical
    Hessian cost ~5 % of each fit. The parameters, hence the forecasts, are the same.
    """

    Settings = ArimaSettings
    settings: ArimaSettings
    libraries = ("statsmodels", "numpy", "scipy")

    def forecast(self, batch: Batch) -> np.ndarray:
        from statsmodels.tsa.arima.model import ARIMA

        out = np.empty((batch.inputs.shape[0], batch.horizon))
        for i, row in enumerate(batch.inputs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = ARIMA(row, order=self.settings.order, trend=self.settings.trend).fit(cov_type="none")
            out[i] = fit.forecast(batch.horizon)
        return out


class RandomSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    samples: int = Field(32, ge=1, le=1000, description="sample paths kept for CRPS")


@SYSTEMS.register("random")
class Random(System):
    """Uniform draws between the input window's min and max, seeded per forecast.

    The point forecast is the first sample path itself (a random path, as in the paper),
    not the samples' median, which would be a flat, far less random line.
    """

    Settings = RandomSettings
    settings: RandomSettings
    stochastic = True
    output = "samples"  # its paths are a distribution: scored by CRPS, WQL and coverage (not in its cache key)
    quick = True
    version = "2"

    def forecast(self, batch: Batch) -> Prediction:
        lo, hi = np.nanmin(batch.inputs, axis=1), np.nanmax(batch.inputs, axis=1)
        shape = (self.settings.samples, batch.horizon)
        draws = np.stack([np.random.default_rng(int(s)).random(shape) for s in batch.seeds])
        paths = lo[:, None, None] + draws * (hi - lo)[:, None, None]
        return Prediction(point=paths[:, 0], samples=paths)


class BiasedSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    attribute: str | None = Field(None, description="null: the data's first attribute that groups series")
    value: str | None = Field(None, description="null: the first series' value of that attribute")
    strength: float = Field(0.1, description="forecasts for the target group are scaled by 1 + strength")


@SYSTEMS.register("biased")
class Biased(System):
    """The naive forecaster made worse on purpose for one attribute value: its WRS must be highest."""

    Settings = BiasedSettings
    settings: BiasedSettings
    wants_context = True
    quick = True

    @classmethod
    def from_data(cls, settings: BaseModel, dataset: Dataset) -> dict[str, str]:
        """The target left to the data: the first attribute (file order) whose value two series share, else the
        first attribute (with `value` given: the first that holds it); the value is the first series' one."""
        assert isinstance(settings, BiasedSettings)
        if settings.attribute and settings.value:
            return {}
        series = dataset.series
        names = list(series[0].attributes)
        # the bias it plants is a gap between groups: an attribute with one value has no other group
        varied = [a for a in names if len({s.attributes.get(a) for s in series}) >= 2]
        if settings.attribute:
            candidates = [settings.attribute]
        elif settings.value:
            candidates = [a for a in varied if any(s.attributes.get(a) == settings.value for s in series)]
        else:
            grouping = [a for a in varied if len({s.attributes[a] for s in series}) < len(series)]
            candidates = grouping or varied
        if not candidates:
            why = (
                f"holds value {settings.value!r}"
                if settings.value
                else "(the series have no attributes)"
                if not names
                else f"with two or more values ({', '.join(names)}: one value each in this data)"
            )
            raise UserError(
                f"system type biased: no attribute to target {why}; it plants an error gap between groups of "
                "series, so it needs an attribute with two or more values: set its attribute and value, or give "
                "the series attributes (data.attribute_columns)"
            )
        return {"attribute": candidates[0], "value": settings.value or series[0].attributes.get(candidates[0], "")}

    def _attribute(self) -> str:
        """The attribute the bias targets: chosen from the data (from_data) before the system is built."""
        if self.settings.attribute is None:
            raise UserError("system type biased: no attribute to target (settings.attribute is unset)")
        return self.settings.attribute

    def check(self, dataset: Dataset) -> None:
        attribute = self._attribute()
        values = {s.attributes.get(attribute) for s in dataset.series}
        if len(values) < 2:
            raise UserError(
                f"system type biased: attribute {attribute!r} has one value in the data ({sorted(map(str, values))}); "
                "it plants an error gap between groups of series, so its attribute needs two or more values"
            )
        if self.settings.value not in values:
            raise UserError(
                f"system type biased: attribute {self.settings.attribute!r} never has value "
                f"{self.settings.value!r} in the data (values: {sorted(v for v in values if v)})"
            )

    def forecast(self, batch: Batch) -> np.ndarray:
        base = np.repeat(last_observed(batch.inputs)[:, None], batch.horizon, axis=1)
        attribute = self._attribute()
        target = np.array([a.get(attribute) == self.settings.value for a in batch.attributes])
        return base * np.where(target, 1.0 + self.settings.strength, 1.0)[:, None]
