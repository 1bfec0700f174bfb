"""causalrate: causally grounded robustness ratings for forecasting systems."""

__version__ = "0.1.0"
