"""The scores that are a window mean of a per-forecast column (METHOD §3, §6): the accuracy metrics (SMAPE,
MASE, CRPS, WQL, coverage error, sign accuracy) and the failure rate."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd

from causalrate.score.contract import SCORES, SKILL_MARGIN, Margin, Score
from causalrate.score.evidence import Evidence, Unavailable


class MetricScore(Score):
    """Mean of a per-forecast metric over the successful forecasts of (system, perturbation)."""

    headline = "accuracy"
    rows = "clean"  # accuracy is rated on clean input
    coverage = "perturbed"
    on_control = True
    radar = True
    resampling = "windows"
    margin = SKILL_MARGIN
    metric: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        ok = evidence.forecasts[~evidence.forecasts["failed"]]
        means = ok.groupby(["system", "perturbation"], sort=True)[self.metric].mean()
        return _complete(evidence, means)


@SCORES.register("smape")
class Smape(MetricScore):
    metric = "smape"
    label = "SMAPE"
    description = "forecast error in relative terms (0 = perfect, 2 = worst)"


@SCORES.register("mase")
class Mase(MetricScore):
    metric = "mase"
    label = "MASE"
    description = (
        "error relative to the seasonal naive's in-sample error (below 1 beats it; season 1: the change from one "
        "point to the next)"
    )


@SCORES.register("crps")
class Crps(MetricScore):
    metric = "crps"
    label = "CRPS"
    description = "error of the forecast distribution, in the data's units (point forecasts: their MAE)"


@SCORES.register("wql")
class Wql(MetricScore):
    metric = "wql"
    radar = False
    point_forecasts = "not_applicable"  # a point forecast has no quantiles: its WQL would only be its WAPE
    label = "WQL"
    estimator = "mean WQL over forecasts"
    description = "weighted quantile loss of the forecast quantiles, relative to the truth's size"


@SCORES.register("coverage_error")
class CoverageError(MetricScore):
    metric = "coverage_error"
    radar = False
    margin = Margin("none", 0.01)  # one percentage point of coverage
    point_forecasts = "not_applicable"
    label = "Coverage error"
    estimator = "mean coverage error over forecasts"
    description = "how far the share of truths inside its widest interval is from that interval's level (0 = exact)"


@SCORES.register("sign_accuracy")
class SignAccuracy(MetricScore):
    metric = "sign_accuracy"
    higher_is_better = True
    margin = Margin("none", 0.01)
    label = "Sign accuracy"
    estimator = "mean sign accuracy over forecasts"
    description = "share of forecast steps that move in the right direction (higher is better)"


@SCORES.register("failure_rate")
class FailureRate(Score):
    headline = "robustness"
    rows = "all"  # the clean input's failure rate too
    coverage = "perturbed"  # over 20 % failed (default) is insufficient: worst level, never rewarded
    on_control = True
    radar = True
    resampling = "windows"
    metric = "failed"  # the per-forecast failure flag
    margin = Margin("percent", 1.0)  # one percentage point
    label = "Failure rate"
    estimator = "share of forecasts failed"
    description = "share of forecasts that failed (crashed, timed out, wrong length, NaN)"

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rates = evidence.forecasts.groupby(["system", "perturbation"], sort=True)["failed"].mean()
        return _complete(evidence, rates)


def _complete(evidence: Evidence, values: pd.Series) -> pd.DataFrame:
    """Every (system, perturbation) of the run, NaN where nothing was computed."""
    index = evidence.derived(
        ("run_pairs",),
        lambda: pd.MultiIndex.from_frame(
            evidence.forecasts[["system", "perturbation"]].drop_duplicates().sort_values(["system", "perturbation"])
        ),
    )
    return values.reindex(index).rename("raw").reset_index().astype({"raw": np.float64})
