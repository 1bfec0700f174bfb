"""Refuting the deconfounded APE with dowhy's refuters (placebo treatment, random common cause, data subset).

dowhy's shape: `refute(data, estimand, estimate)`. The estimate is the causal stage's own
`Estimate` (causal.estimate); its estimator (`Matching`) is wrapped as a dowhy CausalEstimator,
so dowhy's own refuters re-run exactly the estimator that produced APE_adj on their modified data.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from causalrate.causal.graph import OUTCOME, TREATMENT, causal_graph
from causalrate.causal.matching import MatchPlan
from causalrate.logs import quieter
from causalrate.memo import RunCache

if TYPE_CHECKING:
    from causalrate.causal.estimate import Estimate, Matching


def _estimator_class():
    from dowhy.causal_estimator import CausalEstimate, CausalEstimator

    class TieSafeMatching(CausalEstimator):
        """causalrate's APE_adj estimator (a `Matching`) as a dowhy estimator, on the estimand's backdoor set."""

        def __init__(self, identified_estimand, *, matching: Matching, cache: RunCache, seed: int = 0, **kwargs):
            super().__init__(identified_estimand=identified_estimand, **kwargs)
            self.matching, self.cache, self.seed = matching, cache, seed

        def get_new_estimator_object(self, identified_estimand, **_):
            """A fresh estimator for a refuter's simulation; dowhy's default deep-copies this one (and the
            whole estimand) every time, which was a third of the refuters' cost. Nothing here is mutated."""
            return type(self)(identified_estimand, matching=self.matching, cache=self.cache, seed=self.seed)

        def fit(self, data: pd.DataFrame, effect_modifier_names=None):
            self._set_effect_modifiers(data, effect_modifier_names)
            return self

        def estimate_effect(self, data: pd.DataFrame, treatment_value=1, control_value=0, target_units=None, **_):
            self._target_units, self._treatment_value, self._control_value = (
                target_units,
                treatment_value,
                control_value,
            )
            estimand = self._target_estimand
            adjust = tuple(sorted(estimand.get_backdoor_variables()))
            treated = data[estimand.treatment_variable[0]].to_numpy(dtype=bool)
            outcome = data[estimand.outcome_variable[0]].to_numpy(dtype=float)
            value = _plan(data, adjust, treated, self.matching, self.seed, self.cache).apply(outcome).ate
            estimate = CausalEstimate(
                data=data,
                treatment_name=estimand.treatment_variable,
                outcome_name=estimand.outcome_variable,
                estimate=value,
                control_value=control_value,
                treatment_value=treatment_value,
                target_estimand=estimand,
                realized_estimand_expr="tie-safe matching",
            )
            estimate.add_estimator(self)
            return estimate

    return TieSafeMatching


PLANS_KEPT = 20_000  # matching plans a run keeps in memory (a bound on its RunCache's "refuter plan" entries)


def _plan(
    data: pd.DataFrame, adjust: tuple[str, ...], treated: np.ndarray, matching: Matching, seed: int, cache: RunCache
) -> MatchPlan:
    """The matched pairs of a refuter's sample, kept in the run's cache on the confounders' and treatment's content.

    Refuters use one seed for every system: their permuted treatments, added random causes and
    subsets repeat across systems (only the outcomes differ), so each is matched once, not per system.
    """
    from causalrate.causal.effects import design_matrix

    def compute() -> MatchPlan:
        features, _, strata = design_matrix(data, adjust)
        return matching.plan(features, treated, rng=np.random.default_rng(seed), strata=strata)

    key = (treated, matching, seed, adjust, [data[col] for col in adjust])
    return cache.get("refuter plan", key, compute, limit=PLANS_KEPT)


def backdoor_estimand(frame: pd.DataFrame, confounders: tuple[str, ...], cache: RunCache | None = None):
    """dowhy's backdoor estimand for the graph over these confounders (it does not depend on the data's values,
    and the refuters copy it before changing it: identified once per graph in a run's `cache`)."""
    from dowhy import CausalModel

    def compute():
        graph = causal_graph(list(confounders))
        with warnings.catch_warnings(), quieter("dowhy", logging.ERROR):
            warnings.simplefilter("ignore")
            model = CausalModel(data=frame, treatment=TREATMENT, outcome=OUTCOME, graph=graph)
            estimand = model.identify_effect(proceed_when_unidentifiable=True)
        estimand.set_identifier_method("backdoor")
        return estimand

    if cache is None:
        return compute()
    # the graph (its edges: the confounders, treatment and outcome) and the frame's columns decide the estimand
    return cache.get("backdoor estimand", (TREATMENT, OUTCOME, confounders, [str(c) for c in frame.columns]), compute)


@dataclass(frozen=True)
class Refutation:
    refuter: str
    new_effect: float
    passed: bool
    rule: str


def refute(
    data: pd.DataFrame,
    estimand,
    estimate: Estimate,
    *,
    interval: tuple[float, float],
    seed: int,
    simulations: int,
    cache: RunCache | None = None,
) -> tuple[float, list[Refutation]]:
    """Refute one Estimate three ways on its sample `data` (columns P, R and the estimand's confounders:
    `estimate.sample(...)`) and dowhy's backdoor `estimand` (backdoor_estimand). Returns the value dowhy's
    wrapped estimator finds on the sample (seeded with `seed`, as are its re-runs) and the refutations.

    `cache`: the run's RunCache (memo.run), where the refuters' matching plans are kept across systems; without
    one, they are kept for this call only.

    Placebo passes when dowhy's significance test finds 0 inside the distribution of the permuted-treatment
    estimates (its normal test below 100 simulations, one-sided 5 %): the band is the placebo's own noise, so a
    correct estimator fails it rarely (with S simulations, when |mean| / sd > 1.645: P(|t_{S−1}| > 1.645·√(S−1)),
    ≈ 3 % for the default 5; tests/test_rigor.py measures it). Random common cause and data subset pass when
    their new estimate stays inside the APE_adj interval.
    """
    from dowhy.causal_refuters.data_subset_refuter import refute_data_subset
    from dowhy.causal_refuters.placebo_treatment_refuter import PlaceboType, refute_placebo_treatment
    from dowhy.causal_refuters.random_common_cause import refute_random_common_cause

    lo, hi = interval
    cache = RunCache() if cache is None else cache
    with warnings.catch_warnings(), quieter("dowhy", logging.ERROR):
        warnings.simplefilter("ignore")
        estimator = _estimator_class()(estimand, matching=estimate.estimator, cache=cache, seed=seed).fit(data)
        found = estimator.estimate_effect(data)
        common = {
            "data": data,
            "target_estimand": estimand,
            "estimate": found,
            "num_simulations": simulations,
            "random_state": np.random.RandomState(seed),
        }
        placebo = refute_placebo_treatment(treatment_names=[TREATMENT], placebo_type=PlaceboType.PERMUTE, **common)
        random_cause = refute_random_common_cause(**common)
        subset = refute_data_subset(subset_fraction=0.8, **common)
    return float(found.value), [
        Refutation(
            "placebo_treatment",
            float(placebo.new_effect),
            not placebo.refutation_result["is_statistically_significant"],
            "permuted treatment: 0 lies within the placebo estimates' own spread (dowhy's significance test, 5 %)",
        ),
        Refutation(
            "random_common_cause",
            float(random_cause.new_effect),
            lo <= random_cause.new_effect <= hi,
            "an added random confounder leaves the estimate inside the APE_adj interval",
        ),
        Refutation(
            "data_subset",
            float(subset.new_effect),
            lo <= subset.new_effect <= hi,
            "80 % subsets leave the estimate inside the APE_adj interval",
        ),
    ]
