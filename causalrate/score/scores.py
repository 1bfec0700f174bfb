"""Raw scores (METHOD §6): one number per (system, perturbation), found by name in SCORES.

A score reads the Evidence (forecast rows, WRS table, effect summaries) and returns a
frame with columns system, perturbation, raw — or None when the run cannot provide
it (e.g. the data has no `industry` attribute), with the reason in `unavailable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from causalrate.registry import Registry


@dataclass(frozen=True)
class Evidence:
    forecasts: pd.DataFrame  # one row per forecast: system, perturbation, window, failed, outcome, metrics
    wrs: pd.DataFrame  # system, perturbation, attribute, wrs, pairs
    effects: pd.DataFrame  # summarise_effects(): system, perturbation, scheme, ape_true, abs_ape_adj, pie, ...
    control: str


class Score:
    """A raw score. Lower is better unless higher_is_better."""

    higher_is_better: ClassVar[bool] = False
    robustness: ClassVar[bool] = True  # counts towards the overall robustness rating
    on_control: ClassVar[bool] = False  # also computed for the clean input (P0)
    description: ClassVar[str] = ""
    unavailable: str = ""

    def compute(self, evidence: Evidence) -> pd.DataFrame | None:
        raise NotImplementedError


SCORES: Registry[type[Score]] = Registry("score")


class WrsScore(Score):
    attribute: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | None:
        rows = evidence.wrs[evidence.wrs["attribute"] == self.attribute]
        if rows.empty:
            self.unavailable = f"the data has no {self.attribute!r} attribute"
            return None
        return rows[["system", "perturbation"]].assign(raw=rows["wrs"].to_numpy())


@SCORES.register("wrs_industry")
class WrsIndustry(WrsScore):
    attribute = "industry"
    description = "statistical bias across industries: weighted count of significant Welch t-tests"


@SCORES.register("wrs_company")
class WrsCompany(WrsScore):
    attribute = "company"
    description = "statistical bias across companies of the same industry (weighted rejections)"


@SCORES.register("ape")
class Ape(Score):
    description = "|APE|: how much the perturbation changes the error, from the randomized full factorial"

    def compute(self, evidence: Evidence) -> pd.DataFrame | None:
        first = evidence.effects.drop_duplicates(["system", "perturbation"])
        return first[["system", "perturbation"]].assign(raw=first["ape_true"].abs().to_numpy())


class SchemeScore(Score):
    scheme: ClassVar[str]
    column: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | None:
        rows = evidence.effects[evidence.effects["scheme"] == self.scheme]
        if rows.empty:
            self.unavailable = f"the run has no {self.scheme!r} assignment scheme (causal.schemes)"
            return None
        return rows[["system", "perturbation"]].assign(raw=rows[self.column].to_numpy())


@SCORES.register("ape_industry")
class ApeIndustry(SchemeScore):
    scheme, column = "industry", "abs_ape_adj"
    description = "|APE| deconfounded by matching when industry drives which windows are perturbed"


@SCORES.register("ape_company")
class ApeCompany(SchemeScore):
    scheme, column = "company", "abs_ape_adj"
    description = "|APE| deconfounded by matching when company drives which windows are perturbed"


@SCORES.register("pie_industry")
class PieIndustry(SchemeScore):
    scheme, column = "industry", "pie"
    description = "PIE%: share of the apparent effect that is due to industry confounding"


@SCORES.register("pie_company")
class PieCompany(SchemeScore):
    scheme, column = "company", "pie"
    description = "PIE%: share of the apparent effect that is due to company confounding"


class MetricScore(Score):
    """Mean of a per-forecast metric over the successful forecasts of (system, perturbation)."""

    robustness = False
    on_control = True
    metric: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | None:
        ok = evidence.forecasts[~evidence.forecasts["failed"]]
        means = ok.groupby(["system", "perturbation"], sort=True)[self.metric].mean()
        return _complete(evidence, means)


@SCORES.register("smape")
class Smape(MetricScore):
    metric = "smape"
    description = "accuracy: symmetric mean absolute percentage error (0 = perfect, 2 = worst)"


@SCORES.register("mase")
class Mase(MetricScore):
    metric = "mase"
    description = "accuracy: error relative to the in-sample one-step naive change (1 = as good as that)"


@SCORES.register("sign_accuracy")
class SignAccuracy(MetricScore):
    metric = "sign_accuracy"
    higher_is_better = True
    description = "accuracy: share of forecast steps moving in the right direction (higher is better)"


@SCORES.register("failure_rate")
class FailureRate(Score):
    robustness = False
    on_control = True
    description = "share of forecasts that failed (raised, timed out, wrong shape, NaN/inf)"

    def compute(self, evidence: Evidence) -> pd.DataFrame | None:
        rates = evidence.forecasts.groupby(["system", "perturbation"], sort=True)["failed"].mean()
        return _complete(evidence, rates)


def _complete(evidence: Evidence, values: pd.Series) -> pd.DataFrame:
    """Every (system, perturbation) of the run, NaN where nothing was computed."""
    index = pd.MultiIndex.from_frame(
        evidence.forecasts[["system", "perturbation"]].drop_duplicates().sort_values(["system", "perturbation"])
    )
    return values.reindex(index).rename("raw").reset_index().astype({"raw": np.float64})
