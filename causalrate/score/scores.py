"""Raw scores (METHOD §6): one number per (system, perturbation), found by name in SCORES; score_all runs them.

The scores' public names, for plugins and the other stages, in one place; each lives in the module of its
responsibility: the contract (contract.py: Score, its facts, SCORES and the checks), what a score reads and
returns (evidence.py), the bias scores (bias_scores.py), the effect scores (effects.py), the deconfounded scores
(confounding.py) and the window means of a per-forecast column (metric_scores.py). Importing this module
registers the built-ins in that order (the order of every table): bias, effects, confounding, metric means.
"""

from __future__ import annotations

import pandas as pd

from causalrate.causal.schemes import SCHEMES
from causalrate.contracts import guarded
from causalrate.score.bias_scores import (
    BiasScore,
    WrsScore,
    bias_attributes,
    differ_by,
    perturbed_groups,
    rated_dimension,
    register_dimension,
)
from causalrate.score.confounding import PieScore, SchemeScore
from causalrate.score.contract import (
    APE_MARGIN,
    HEADLINE_NAMES,
    SCORES,
    SKILL_MARGIN,
    Basis,
    Headline,
    Margin,
    Rows,
    Scale,
    Score,
    check_frame,
    check_metric,
    estimator_text,
    joins_headline,
)
from causalrate.score.effects import Ape, dose_auc, every_system
from causalrate.score.evidence import (
    Evidence,
    Resampler,
    RowReplicates,
    Unavailable,
    absolute_mean,
    dimensions_of,
    harm_of,
    percentile,
    wide_column,
)
from causalrate.score.metric_scores import Mase, MetricScore

__all__ = [
    "APE_MARGIN",
    "HEADLINE_NAMES",
    "SCORES",
    "SKILL_MARGIN",
    "Ape",
    "Basis",
    "BiasScore",
    "Evidence",
    "Headline",
    "Margin",
    "Mase",
    "MetricScore",
    "PieScore",
    "Resampler",
    "RowReplicates",
    "Rows",
    "Scale",
    "SchemeScore",
    "Score",
    "Unavailable",
    "WrsScore",
    "absolute_mean",
    "bias_attributes",
    "check_frame",
    "check_metric",
    "differ_by",
    "dimensions_of",
    "dose_auc",
    "estimator_text",
    "every_system",
    "harm_of",
    "joins_headline",
    "percentile",
    "perturbed_groups",
    "rated_dimension",
    "register_dimension",
    "score_all",
    "wide_column",
]


def _about(cls: type[Score]) -> tuple[str, ...]:
    """The data attributes a score needs: its attribute's, or its scheme's confounders (none for a plugin scheme
    that confounds with nothing in the data: its ape_/pie_ scores were dropped unsaid when its name was taken for
    an attribute)."""
    attribute = getattr(cls, "attribute", None)
    if attribute is not None:
        return (attribute,)
    if cls.scheme is None:
        return ()
    return SCHEMES.get(cls.scheme).confounders if cls.scheme in SCHEMES else (cls.scheme,)


def score_all(evidence: Evidence, names: list[str] | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every score's raw rows (column `score` added; the control's only for on_control scores), and why
    each score the run cannot provide is unavailable. `names` defaults to every registered score; then a score
    of a data attribute (a bias or confounding score) the window table has no column for is left out, not
    listed as unavailable (named in `names`, it is listed with its reason)."""
    raw, unavailable = [], {}
    rated = {d.attribute for d in dimensions_of(evidence)}
    columns = set() if evidence.table is None else set(evidence.table.columns)
    for name in names or SCORES.names():
        cls = SCORES.get(name)
        generated_for = getattr(cls, "generated_for", None)
        if generated_for is not None and generated_for not in rated:
            continue  # another data's attribute (registered earlier in this process): not a score of this run
        score = cls()
        with guarded("score", name, cls, "compute(evidence)"):
            values = score.compute(evidence)
        if isinstance(values, Unavailable):
            if names is None and not set(_about(cls)) <= columns | rated:
                continue  # of an attribute this data never has (industry on sensor data): not "not rated"
            unavailable[name] = values.reason
            continue
        check_frame(name, type(score), values, evidence)
        if not score.on_control:
            values = values[values["perturbation"] != evidence.control]
        if values.empty:  # was dropped without a word: in neither the ratings nor not_rated
            unavailable[name] = "its compute() returned no rows for this run's systems and perturbations"
            continue
        raw.append(values.assign(score=name))
    return pd.concat(raw, ignore_index=True), unavailable
