"""The study's derived parameters, resolved once (study.prepare → `Study.parameters`) and read by every stage.

Each is a value the config leaves to the data or to a rule (the season, the bootstrap's block length, the
naive reference's errors that the minimal effect and the margins δ are shares of, ...). Computing one again
where it is used could give a stage another value than the one recorded; so the stages read this object, and
ratings.json's provenance records it (`provenance.parameters`, docs/reference.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RatingSettings:
    """How the rate stage bins (rating.levels, rule, scale, min_coverage as resolved for the study)."""

    levels: int
    rule: str = "tiers"
    scale: str = "both"
    min_coverage: float = 0.8


@dataclass(frozen=True)
class Parameters:
    """Every derived parameter of one study, as its stages use them."""

    season: int  # the seasonal period of every MASE, seasonal system and naive basis: data.season, else the usual
    block_length: int  # windows per bootstrap block: rigor.block_length, else ⌈(n + d) / stride⌉ (§6.6)
    wrs_bandwidth: int  # windows WRS's tests take as dependent (block means): block_length, 0 under rule: paper
    rating: RatingSettings  # levels, rule, scale and min_coverage the ratings and headlines are made with
    naive_error: float  # the naive reference's mean clean outcome: APE's basis (scale, minimal effect, δ)
    min_effect: float  # the minimal APE of interest in the outcome's units: rigor.min_effect × naive_error
    timeout: float  # seconds per forecast (forecast.timeout): a batch of b forecasts may take b × this
    # score on the naive_ratio basis → the naive reference's value of its metric on the clean windows (skill ratio)
    naive_scores: Mapping[str, float] = field(default_factory=dict)

    def batch_timeout(self, forecasts: int) -> float:
        """The time limit of a batch of `forecasts` forecasts."""
        return self.timeout * forecasts

    def record(self) -> dict[str, Any]:
        """The provenance record: every parameter by name (floats as they are; the report stage cleans them)."""
        return {
            "season": self.season,
            "block_length": self.block_length,
            "wrs_bandwidth": self.wrs_bandwidth,
            "levels": self.rating.levels,
            "rule": self.rating.rule,
            "scale": self.rating.scale,
            "min_coverage": self.rating.min_coverage,
            "naive_error": self.naive_error,
            "min_effect": self.min_effect,
            "naive_scores": dict(sorted(self.naive_scores.items())),
            "timeout": self.timeout,
        }
