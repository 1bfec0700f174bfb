"""Labels that say which estimator and which aggregation each number is.

One quantity must never carry two labels (the detailed report used to show "APE_adj −0.003"
beside "APE, company-confounded 0.004", a mean vs a mean of absolute values). Every number the
report shows takes its label from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from causalrate.score.scores import SCORES


@dataclass(frozen=True)
class Facts:
    """What the pages need to know about a score, also for one this version has not registered."""

    label: str
    description: str
    robustness: bool
    higher_is_better: bool


def facts(score: str) -> Facts:
    """The score's registry facts; a score from a newer ratings.json is shown under its own name."""
    try:
        cls = SCORES.get(score)
    except KeyError:
        return Facts(score, "a score this version of causalrate does not describe", True, False)
    return Facts(cls.label or score, cls.description, cls.family != "accuracy", cls.higher_is_better)


# per-draw aggregations of the matching estimate, by the effects column a scheme score reads
_AGGREGATION = {
    "abs_mean_ape_adj": "|mean over draws of APE_adj|",
    "ape_adj": "mean over draws of APE_adj",
    "pie": "mean over draws of PIE%",
}
_FIXED = {
    "ape": "|APE_true| (all windows, randomized)",
    "ape_auc": "area under |APE_true| over severity",
    "ape_worst": "worst-placement |APE| (all windows)",
    "recency": "|APE| with the change among the last inputs",
    "ape_last": "|APE| with the newest input point changed",
    "smape": "mean SMAPE over forecasts",
    "mase": "mean MASE over forecasts",
    "crps": "mean CRPS over forecasts",
    "sign_accuracy": "mean sign accuracy over forecasts",
    "failure_rate": "share of forecasts failed",
    "fragility_spread": "spread of conditional effects",
    "bias_industry": "largest gap between one industry's mean outcome and the rest, / mean outcome",
    "bias_domain": "largest gap between one domain's mean outcome and the rest, / mean outcome",
    "bias_company": "largest gap between one company's mean outcome and its industry's others, / mean outcome",
}


def estimator(score: str, draws: int | None = None) -> str:
    """E.g. 'mean over 20 draws of |APE_adj|' for ape_company; the score's name when unknown."""
    if score in _FIXED:
        return _FIXED[score]
    if score.startswith("wrs_"):
        return f"WRS over {score.removeprefix('wrs_')} groups (Welch t, weighted pair count)"
    try:
        column = getattr(SCORES.get(score), "column", None)
    except KeyError:
        column = None
    if column in _AGGREGATION:
        text = _AGGREGATION[column]
        return text.replace("draws", f"{draws} draws") if draws else text
    return facts(score).label


def label(score: str) -> str:
    """The score's short human name from its registry entry (the name itself when unregistered)."""
    return facts(score).label


# the effects table's columns: one label each, aggregation included
EFFECT_COLUMNS = {
    "ape_true": "APE_true (all windows, randomized)",
    "ape_obs": "APE_obs (mean over {draws} draws)",
    "ape_adj": "APE_adj (mean over {draws} draws)",
    "pie": "PIE% (mean over {draws} draws)",
}
