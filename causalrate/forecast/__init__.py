"""Stage 3 — forecast: systems under test, imputation, the process pool and the SQLite store."""

from causalrate.forecast import (  # noqa: F401 - registers the built-in systems
    foundation,
    hf_llm,
    python_system,
    reference,
    remote,
    zoo,
)
from causalrate.forecast.systems import SYSTEMS, Batch, Prediction, System

__all__ = ["SYSTEMS", "Batch", "Prediction", "System"]
