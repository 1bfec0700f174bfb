"""Stage 2 — perturb: operators applied to the input window only (METHOD §2)."""

from causalrate.perturb import faults  # noqa: F401 - registers the duration faults
from causalrate.perturb.operators import OPERATORS, Operator
from causalrate.perturb.suite import Perturbation, load_suite

__all__ = ["OPERATORS", "Operator", "Perturbation", "load_suite"]
