"""Stage 3 — forecast: systems under test, imputation, the process pool and the SQLite store."""

from causalrate.forecast import python_system, reference  # noqa: F401 - registers the built-in systems
from causalrate.forecast.systems import SYSTEMS, Batch, System

__all__ = ["SYSTEMS", "Batch", "System"]
