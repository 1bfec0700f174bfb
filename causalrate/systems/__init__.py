"""The systems under test: the system protocol, its registry and the built-in adapters.

Importing this package registers every built-in system type (reference, foundation models,
LLMs, remote APIs, statsforecast, the model zoo); plugins register theirs by subclassing `System` and
`SYSTEMS.register`.
"""

from causalrate.systems import (  # noqa: F401 - registers the built-in systems
    foundation,
    hf_llm,
    nixtla,
    python_system,
    reference,
    remote,
    zoo,
)
from causalrate.systems.base import SYSTEMS, Batch, Prediction, System

__all__ = ["SYSTEMS", "Batch", "Prediction", "System"]
