"""Stage 6 — rate: bin raw scores into L levels, 1 = best (METHOD §6)."""

from causalrate.rate.binning import bin_ratings
from causalrate.rate.ratings import rate_scores

__all__ = ["bin_ratings", "rate_scores"]
