"""Perturbation operators (METHOD §2), found by name in OPERATORS.

An operator changes an input window at its perturbed positions (the mask). Operators
with settings declare them in `params` with defaults; random ones draw from the
per-window seeds, so a perturbation is the same on every run. Operators calibrated on the
whole series (tail_spike) say so with `calibrated = True` and receive one `calibration` value
per row. Add your own with ``@OPERATORS.register("name")`` on an Operator subclass.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from causalrate.contracts import ContractError, describe, facts_of, violation
from causalrate.registry import Registry

Kind = Literal["semantic", "syntactic", "control"]
# which input points apply() may change: the masked ones, the masked ones and their two neighbours (a swap),
# the masked ones and every later one (a level shift), all of them (a change of units), the `k` points ending
# at each masked one (a duration fault: its param k), or every point up to a masked one (a delayed feed)
Touches = Literal["mask", "neighbours", "mask_onwards", "window", "run", "up_to_mask"]


class Operator:
    """Maps input windows to perturbed input windows at the masked positions."""

    kind: ClassVar[Kind] = "semantic"  # semantic | syntactic | control
    description: ClassVar[str] = ""  # plain language, shown on cards; may use {param} placeholders
    params: ClassVar[dict[str, float]] = {}  # settings and their defaults
    positional: ClassVar[bool] = True  # False: the placed offset does not matter (whole-window operators)
    calibrated: ClassVar[bool] = False  # True: calibrate() on the series gives apply() a per-row `calibration`
    touches: ClassVar[Touches] = "mask"  # the points apply() may change; the others are checked to be unchanged

    # Subclasses name the params they read as keyword arguments (the suite passes exactly `params`, with the
    # values the entry set); mypy cannot see that contract, hence `type: ignore[override]` on those overrides.
    def calibrate(self, series: np.ndarray, **params: Any) -> float:
        """A per-series constant the operator needs (e.g. a tail quantile), from the series' values."""
        raise NotImplementedError

    def apply(self, values: np.ndarray, mask: np.ndarray, *, seeds: np.ndarray, **params: Any) -> np.ndarray:
        """values: float [batch, n] (a copy the operator may modify); mask: bool [batch, n]; seeds: [batch]."""
        raise NotImplementedError

    def apply_dates(self, dates: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The input timestamps a context-aware system sees; unchanged unless the operator corrupts them."""
        return dates


OPERATORS: Registry[type[Operator]] = Registry("perturbation operator")


def _fits(name: str, cls: type[Operator]) -> None:
    """An Operator subclass with apply(); its description's {placeholders} are its params."""
    if not (isinstance(cls, type) and issubclass(cls, Operator)):
        raise ContractError(f"perturbation operator {name!r} ({describe(cls)}): expected a subclass of Operator")
    if cls.apply is Operator.apply:
        raise violation("perturbation operator", name, cls, "it does not implement apply(values, mask, *, seeds)")
    fields = {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(cls.description) if f}
    if fields - set(cls.params):
        raise violation(
            "perturbation operator",
            name,
            cls,
            f"its description names {sorted(fields - set(cls.params))}, which are not among its params "
            f"{sorted(cls.params)}",
        )
    if cls.touches == "run" and "k" not in cls.params:
        raise violation("perturbation operator", name, cls, "it touches a run of k points but has no param 'k'")


OPERATORS.contract(facts_of(Operator, "kind", "description", "params", "positional", "calibrated", "touches"), _fits)


def reach(operator: Operator, mask: np.ndarray, params: Mapping[str, Any] | None = None) -> np.ndarray:
    """bool [batch, n]: the points `operator` may change at `mask` (its `touches`; a run's k from `params`,
    else the operator's default)."""
    if operator.touches == "window":
        return np.ones_like(mask, dtype=bool)
    if operator.touches == "mask_onwards":
        return np.maximum.accumulate(mask, axis=1)
    if operator.touches == "up_to_mask":
        return np.maximum.accumulate(mask[:, ::-1], axis=1)[:, ::-1]
    if operator.touches == "run":
        k = int({**operator.params, **(params or {})}["k"])
        covered = mask.copy()
        for lag in range(1, min(k, mask.shape[1])):
            covered[:, :-lag] |= mask[:, lag:]
        return covered
    if operator.touches == "neighbours":
        near = mask.copy()
        near[:, 1:] |= mask[:, :-1]
        near[:, :-1] |= mask[:, 1:]
        return near
    return mask


def checked_output(operator: Operator, inputs: np.ndarray, out: object, allowed: np.ndarray) -> np.ndarray:
    """apply()'s result, checked at the boundary: the input's shape, floats, and the points outside `allowed`
    unchanged (NaN stays NaN). Else ContractError naming the operator: a wrong array must not be forecast."""
    cls = type(operator)
    name = next((n for n, entry in OPERATORS.items() if entry is cls), cls.__qualname__)

    def wrong(problem: str) -> ContractError:
        return violation("perturbation operator", name, cls, f"apply() returned {problem}")

    if not isinstance(out, np.ndarray):
        raise wrong(f"a {type(out).__name__}; expected a numpy array of the input's shape {inputs.shape}")
    if out.shape != inputs.shape:
        raise wrong(f"shape {out.shape} for input of shape {inputs.shape}; expected the input's shape")
    if out.dtype.kind != "f":
        raise wrong(f"dtype {out.dtype}; expected floats (NaN marks a missing value)")
    with np.errstate(invalid="ignore"):
        kept = (out == inputs) | (np.isnan(out) & np.isnan(inputs))  # per point: unchanged (NaN stays NaN)
    if not (kept | allowed).all():  # the whole arrays at once: gathering the points outside first was 5x slower
        rows, cols = np.nonzero(~allowed & ~kept)
        raise wrong(
            f"changed points it may not touch (e.g. row {rows[0]}, offset {cols[0]}; {rows.size} in all): it declares "
            f"touches = {operator.touches!r} (declare 'neighbours', 'mask_onwards' or 'window' if it changes more)"
        )
    return out


@OPERATORS.register("none")
class Identity(Operator):
    kind = "control"
    description = "no change: the clean input (control)"

    def apply(self, values, mask, *, seeds, **params):
        return values


@OPERATORS.register("drop_to_zero")
class DropToZero(Operator):
    description = "a value is recorded as 0"

    def apply(self, values, mask, *, seeds, **params):
        values[mask] = 0.0
        return values


@OPERATORS.register("halve")
class Halve(Operator):
    description = "a value is halved"

    def apply(self, values, mask, *, seeds, **params):
        values[mask] = values[mask] / 2.0
        return values


@OPERATORS.register("missing")
class Missing(Operator):
    kind = "syntactic"
    description = "a value is missing (NaN)"

    def apply(self, values, mask, *, seeds, **params):
        values[mask] = np.nan
        return values


@OPERATORS.register("double")
class Double(Operator):
    description = "a value is doubled"

    def apply(self, values, mask, *, seeds, **params):
        values[mask] = values[mask] * 2.0
        return values


@OPERATORS.register("spike")
class Spike(Operator):
    description = "a value is multiplied by {factor:g}"
    params: ClassVar[dict[str, float]] = {"factor": 3.0}

    def apply(self, values, mask, *, seeds, factor: float, **params):  # type: ignore[override]
        values[mask] = values[mask] * factor
        return values


@OPERATORS.register("noise")
class Noise(Operator):
    description = "Gaussian noise of {sigma:g} times the window's standard deviation is added to a value"
    params: ClassVar[dict[str, float]] = {"sigma": 0.5}

    def apply(self, values, mask, *, seeds, sigma: float, **params):  # type: ignore[override]
        scale = sigma * np.nanstd(values, axis=1, keepdims=True)
        noise = np.stack([np.random.default_rng(int(s)).standard_normal(values.shape[1]) for s in seeds])
        return np.where(mask, values + scale * noise, values)


@OPERATORS.register("stale")
class Stale(Operator):
    description = "a value repeats the previous one"

    def apply(self, values, mask, *, seeds, **params):
        previous = np.concatenate([values[:, :1], values[:, :-1]], axis=1)  # the first point has no predecessor
        return np.where(mask, previous, values)


@OPERATORS.register("unit_change")
class UnitChange(Operator):
    positional = False
    touches = "window"
    description = "every input value is multiplied by {factor:g} (the whole input in other units)"
    params: ClassVar[dict[str, float]] = {"factor": 100.0}

    def apply(self, values, mask, *, seeds, factor: float, **params):  # type: ignore[override]
        return values * factor  # the whole window, whatever the mask


@OPERATORS.register("precision")
class Precision(Operator):
    description = "a value is rounded to {digits:g} decimal digits"
    params: ClassVar[dict[str, float]] = {"digits": 0.0}

    def apply(self, values, mask, *, seeds, digits: float, **params):  # type: ignore[override]
        return np.where(mask, np.round(values, int(digits)), values)


@OPERATORS.register("duplicate_timestamp")
class DuplicateTimestamp(Operator):
    kind = "syntactic"
    description = "a timestamp repeats the previous one (only systems that read timestamps see it)"

    def apply(self, values, mask, *, seeds, **params):
        return values

    def apply_dates(self, dates, mask):
        previous = np.concatenate([dates[:, :1], dates[:, :-1]], axis=1)
        return np.where(mask, previous, dates)


@OPERATORS.register("level_shift")
class LevelShift(Operator):
    touches = "mask_onwards"
    description = "from a value to the input's end, every value rises by {c:g} times the window's standard deviation"
    params: ClassVar[dict[str, float]] = {"c": 1.0}

    def apply(self, values, mask, *, seeds, c: float, **params):  # type: ignore[override]
        after = np.maximum.accumulate(mask, axis=1)  # from the first placed offset to the last input point
        return np.where(after, values + c * np.nanstd(values, axis=1, keepdims=True), values)


@OPERATORS.register("tail_spike")
class TailSpike(Operator):
    """A one-point jump as large as a once-in-N-days move of the series (peaks over threshold, GPD fit)."""

    description = "a value changes by the relative move its series exceeds once in {return_period:g} points"
    params: ClassVar[dict[str, float]] = {"return_period": 250.0, "threshold": 0.9, "sign": 1.0}
    calibrated = True

    def calibrate(self, series, *, return_period: float, threshold: float, **params):  # type: ignore[override]
        return tail_return_level(series, return_period=return_period, threshold=threshold)

    def apply(self, values, mask, *, seeds, calibration: np.ndarray, sign: float, **params):  # type: ignore[override]
        factor = 1.0 + np.sign(sign or 1.0) * np.asarray(calibration, dtype=float)[:, None]
        return np.where(mask, values * np.maximum(factor, 0.0), values)


def tail_return_level(series: np.ndarray, *, return_period: float, threshold: float) -> float:
    """The absolute return exceeded once in `return_period` points: POT + generalised Pareto (Coles 2001, 4.3.3).

    u = the `threshold` quantile of |r| (r = simple returns); the exceedances |r| − u get a GPD fit (location 0);
    with ζ = the share of returns above u, the level is u + GPD.ppf(1 − 1 / (return_period · ζ)).
    """
    values = np.asarray(series, dtype=float)
    returns = np.abs(np.diff(values) / values[:-1])
    returns = returns[np.isfinite(returns)]
    u = float(np.quantile(returns, threshold))
    excess = returns[returns > u] - u
    rate = excess.size / returns.size
    if excess.size < 10 or return_period * rate <= 1:
        raise ValueError(
            f"tail_spike: {excess.size} exceedances of {returns.size} returns cannot calibrate a "
            f"once-in-{return_period:g} move (need >= 10 and return_period x rate > 1)"
        )
    from scipy import stats  # here, not at the top: loading a study (and every re-rate) would import it

    shape, _, scale = stats.genpareto.fit(excess, floc=0)
    return u + float(stats.genpareto.ppf(1 - 1 / (return_period * rate), shape, loc=0, scale=scale))


@OPERATORS.register("combined")
class Combined(Operator):
    """Two or more operators at once, each at its own mask (the suite entry's `combine:` list), in order."""

    description = "several operators at once"

    def apply(self, values, mask, *, seeds, parts, **params):  # type: ignore[override]
        for operator, part_mask, part_params in parts:
            out = operator.apply(values.copy(), part_mask, seeds=seeds, **part_params)
            values = checked_output(operator, values, out, reach(operator, part_mask, part_params))
        return values
