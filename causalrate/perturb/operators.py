"""Perturbation operators (METHOD §2), found by name in OPERATORS.

An operator changes the values at the perturbed positions of an input window.
Add your own with ``@OPERATORS.register("name")`` on an Operator subclass.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from causalrate.registry import Registry


class Operator:
    """Maps input windows to perturbed input windows at the masked positions."""

    kind: ClassVar[str] = "semantic"  # semantic | syntactic | control
    description: ClassVar[str] = ""

    def apply(self, values: np.ndarray, mask: np.ndarray, **params: float) -> np.ndarray:
        """values: float [batch, n] (a copy the operator may modify); mask: bool [batch, n]."""
        raise NotImplementedError


OPERATORS: Registry[type[Operator]] = Registry("perturbation operator")


@OPERATORS.register("none")
class Identity(Operator):
    kind = "control"
    description = "no change: the clean input (control)"

    def apply(self, values: np.ndarray, mask: np.ndarray, **params: float) -> np.ndarray:
        return values


@OPERATORS.register("drop_to_zero")
class DropToZero(Operator):
    description = "a value is recorded as 0 (data-entry error)"

    def apply(self, values: np.ndarray, mask: np.ndarray, **params: float) -> np.ndarray:
        values[mask] = 0.0
        return values


@OPERATORS.register("halve")
class Halve(Operator):
    description = "a value is halved (split- or dividend-like adjustment applied by mistake)"

    def apply(self, values: np.ndarray, mask: np.ndarray, **params: float) -> np.ndarray:
        values[mask] = values[mask] / 2.0
        return values


@OPERATORS.register("missing")
class Missing(Operator):
    kind = "syntactic"
    description = "a value is lost in transmission (missing, NaN)"

    def apply(self, values: np.ndarray, mask: np.ndarray, **params: float) -> np.ndarray:
        values[mask] = np.nan
        return values
