"""Labels that say which estimator and which aggregation each number is.

One quantity must never carry two labels (the detailed report used to show "APE_adj −0.003"
beside "APE, company-confounded 0.004", a mean vs a mean of absolute values). Every number the
report shows takes its label from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from causalrate.score.scores import SCORES, Headline, estimator_text


@dataclass(frozen=True)
class Facts:
    """What the pages need to know about a score, also for one this version has not registered."""

    label: str
    description: str
    headline: Headline | None  # the headline its rows join (Score.headline); None: in no headline
    table: str  # the report's table that shows it: its headline's, "confounding" (a scheme's scores) or "other"
    higher_is_better: bool


def facts(score: str) -> Facts:
    """The score's registry facts; a score from a newer ratings.json is shown under its own name."""
    try:
        cls = SCORES.get(score)
    except KeyError:
        return Facts(score, "a score this version of causalrate does not describe", None, "other", False)
    table = cls.headline or ("confounding" if cls.scheme is not None else "other")
    return Facts(cls.label or score, cls.description, cls.headline, table, cls.higher_is_better)


def estimator(score: str, draws: int | None = None) -> str:
    """The score's estimator text (Score.estimator), e.g. 'mean over 20 draws of PIE%'; its name when unknown."""
    try:
        return estimator_text(SCORES.get(score), draws)
    except KeyError:
        return score


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
