"""Assignment schemes (METHOD §5.1): P(window is perturbed | its attributes), and the draw itself.

Drawing treatment with these probabilities from the full factorial gives observational
samples in which the confounder drives both perturbation and error. Add your own with
``@SCHEMES.register("name")``: give it `probabilities`, and override `draw` when its
assignment is not one independent coin per window (e.g. whole series at once).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import ClassVar

import numpy as np
import pandas as pd

from causalrate.contracts import ContractError, describe, facts_of, guarded, violation
from causalrate.data.characteristics import attribute_columns
from causalrate.errors import UserError
from causalrate.registry import Registry


class Scheme:
    """Maps a per-window table (attributes + covariates) to treatment probabilities."""

    confounders: ClassVar[tuple[str, ...]] = ()  # columns that drive assignment
    description: ClassVar[str] = ""
    rated: ClassVar[bool] = True  # its ape_<name> and pie_<name> scores are registered and rated

    def check(self, table: pd.DataFrame) -> None:
        missing = [c for c in self.confounders if c not in table.columns]
        if missing:
            attributes = sorted(attribute_columns(table))
            raise UserError(
                f"causal.schemes: scheme {SCHEMES.name_of(type(self))!r} needs attribute(s) {missing}; the series "
                f"have {attributes or 'no attributes'} (give them with data.attributes or data.attribute_columns)"
            )

    def probabilities(self, table: pd.DataFrame, *, high: float, low: float) -> np.ndarray:
        raise NotImplementedError

    def draw(self, table: pd.DataFrame, *, high: float, low: float, rng: np.random.Generator) -> np.ndarray:
        """One observational assignment: which windows are perturbed (bool per row of `table`).

        The causal stage calls it once per (scheme, perturbation, draw) with that triple's own
        seeded stream and shares the result with every system (causal.estimate).
        """
        return coins(checked_probabilities(self, table, high=high, low=low), rng)


def coins(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One independent coin per window, perturbed with its probability: the default draw."""
    return rng.random(len(probabilities)) < probabilities


def _named(scheme: Scheme) -> str:
    return next((n for n, entry in SCHEMES.items() if entry is type(scheme)), type(scheme).__qualname__)


def checked_probabilities(scheme: Scheme, table: pd.DataFrame, *, high: float, low: float) -> np.ndarray:
    """probabilities(), checked: one finite probability in [0, 1] per row of `table`; else ContractError naming
    the scheme (a wrong probability must not silently drop the scheme or bias its draws)."""
    cls = type(scheme)
    with guarded("assignment scheme", _named(scheme), cls, "probabilities()"):
        values = scheme.probabilities(table, high=high, low=low)
    out = np.asarray(values, dtype=float) if isinstance(values, np.ndarray | list | pd.Series) else None
    if out is None or out.shape != (len(table),):
        shape = getattr(values, "shape", type(values).__name__)
        raise violation(
            "assignment scheme", _named(scheme), cls, f"probabilities() returned {shape}; expected {len(table)} values"
        )
    bad = ~((out >= 0) & (out <= 1))
    if bad.any():
        raise violation(
            "assignment scheme",
            _named(scheme),
            cls,
            f"probabilities() returned {int(bad.sum())} value(s) outside [0, 1], e.g. {float(out[bad][0]):g}",
        )
    if len(out) and ((out == 0).all() or (out == 1).all()):  # was listed as "the run has no such scheme"
        raise violation(
            "assignment scheme",
            _named(scheme),
            cls,
            f"probabilities() returned {out[0]:g} for every window: it perturbs {'every' if out[0] else 'no'} "
            "window, so none is left to compare with; expected probabilities inside (0, 1) (e.g. causal.high/low)",
        )
    return out


def checked_draw(
    scheme: Scheme, table: pd.DataFrame, *, high: float, low: float, rng: np.random.Generator
) -> np.ndarray:
    """draw(), checked: one bool per row of `table`; else ContractError naming the scheme."""
    cls = type(scheme)
    with guarded("assignment scheme", _named(scheme), cls, "draw()"):
        drawn = scheme.draw(table, high=high, low=low, rng=rng)
    if not isinstance(drawn, np.ndarray) or drawn.dtype != bool or drawn.shape != (len(table),):
        got = f"{type(drawn).__name__} {getattr(drawn, 'dtype', '')} {getattr(drawn, 'shape', '')}".strip()
        raise violation(
            "assignment scheme",
            _named(scheme),
            cls,
            f"draw() returned {got}; expected {len(table)} bools (a numpy "
            "array of dtype bool: which windows are perturbed)",
        )
    return drawn


def drawer(
    scheme: Scheme, table: pd.DataFrame, *, high: float, low: float
) -> Callable[[np.random.Generator], np.ndarray]:
    """checked_draw as a function of the stream, for many draws of one scheme on one table: a scheme that keeps
    the default draw has its probabilities computed and checked once (at the first draw), not once per draw."""
    if type(scheme).draw is not Scheme.draw:
        return lambda rng: checked_draw(scheme, table, high=high, low=low, rng=rng)
    probabilities = cache(lambda: checked_probabilities(scheme, table, high=high, low=low))
    return lambda rng: coins(probabilities(), rng)


SCHEMES: Registry[type[Scheme]] = Registry("assignment scheme")


def _fits(name: str, cls: type[Scheme]) -> None:
    """A Scheme subclass that gives probabilities() or draw(); a rated scheme has a confounder to explain."""
    if not (isinstance(cls, type) and issubclass(cls, Scheme)):
        raise ContractError(f"assignment scheme {name!r} ({describe(cls)}): expected a subclass of Scheme")
    if cls.probabilities is Scheme.probabilities and cls.draw is Scheme.draw:
        raise violation("assignment scheme", name, cls, "it implements neither probabilities() nor draw()")


SCHEMES.contract(facts_of(Scheme, "confounders", "description", "rated"), _fits)


@SCHEMES.register("uniform")
class Uniform(Scheme):
    rated = False  # no confounder: APE_adj is APE itself, nothing to explain
    description = "perturbation independent of every attribute (P = 0.5): the RQ1 setting"

    def probabilities(self, table: pd.DataFrame, *, high: float, low: float) -> np.ndarray:
        return np.full(len(table), 0.5)


class ByAttribute(Scheme):
    """P = high for the first half of the attribute's sorted values (at least one), low for the rest."""

    def probabilities(self, table: pd.DataFrame, *, high: float, low: float) -> np.ndarray:
        (column,) = self.confounders
        values = sorted(table[column].unique())
        favoured = values[: max(1, len(values) // 2)]
        return np.where(table[column].isin(favoured), high, low)


@SCHEMES.register("industry")
class Industry(ByAttribute):
    confounders = ("industry",)
    description = "windows of the first half of the industries (sorted) are perturbed with P = high, others low"


@SCHEMES.register("company")
class Company(ByAttribute):
    confounders = ("company",)
    description = "windows of the first half of the companies (sorted) are perturbed with P = high, others low"


@SCHEMES.register("domain")
class Domain(ByAttribute):
    confounders = ("domain",)
    description = "windows of the first half of the domains (sorted) are perturbed with P = high, others low"


def attribute_scheme(attribute: str) -> str | None:
    """The scheme `<attribute>` (P = high for the first half of its values): registered for a data attribute that
    has none (its ape_ and pie_ scores come with it), so every attribute can drive an assignment. Its name, or
    None where a scheme of that name is another kind (a characteristic's ranked scheme)."""
    if attribute not in SCHEMES:
        SCHEMES.register(attribute)(
            type(
                f"ByAttribute_{attribute}",
                (ByAttribute,),
                {
                    "confounders": (attribute,),
                    "description": f"windows of the first half of the {attribute} values (sorted) are perturbed "
                    "with P = high, others low",
                    "generated_for": attribute,
                },
            )
        )
    return attribute if SCHEMES.get(attribute).confounders == (attribute,) else None


class Ranked(Scheme):
    """P rises linearly from low to high with the rank of a window characteristic (a continuous confounder)."""

    rated = False  # reported in the effects table and the self-check, not rated

    def probabilities(self, table: pd.DataFrame, *, high: float, low: float) -> np.ndarray:
        (column,) = self.confounders
        rank = table[column].rank(method="average").to_numpy()
        span = max(len(table) - 1, 1)
        return low + (high - low) * (rank - 1) / span


@SCHEMES.register("level")
class Level(Ranked):
    confounders = ("level",)
    description = "P rises from low to high with the rank of the window's mean price"


@SCHEMES.register("volatility")
class Volatility(Ranked):
    confounders = ("volatility",)
    description = "P rises from low to high with the rank of the window's volatility (std of returns)"


@SCHEMES.register("trend_strength")
class TrendStrength(Ranked):
    confounders = ("trend_strength",)
    description = "P rises from low to high with the rank of the window's STL trend strength"
