"""Duration faults (METHOD §2): a fault lasts k input points and ends at each placed point.

A placed point is where the fault *ends*, so placement `last` means the fault is still on at the
newest input point. Each fault reads its duration `k` and a magnitude on the window's own scale
(σ = the clean window's standard deviation, as `level_shift` and `noise` use), and declares
`touches = "run"` (the k points ending at each placed point; `delay` touches every point up to it).
The severity table (ratings/severity.yaml, shipped as causalrate.scales) maps levels 1–5 to (k,
magnitude): `SeverityTable.params` resolves a level for the data's season when the suite is loaded, so the
params a run records are the ones applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import yaml

from causalrate.perturb.operators import OPERATORS, Operator, Touches

LEVELS = (1, 2, 3, 4, 5)


def until_end(mask: np.ndarray) -> np.ndarray:
    """int [batch, n]: per point, how many points until the next placed point at or after it (0 at a placed
    point; n or more where none follows). A fault of duration k covers the points with until_end < k."""
    n = mask.shape[1]
    position = np.arange(n)
    ends = np.where(mask, position, 2 * n)
    following = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
    return following - position


def duration(k: float) -> int:
    """The fault's duration in points (k is a float like every operator setting); at least 1."""
    if k < 1 or k != int(k):
        raise ValueError(f"a duration fault's k must be a whole number >= 1, got {k:g}")
    return int(k)


class Fault(Operator):
    """A duration fault: `k` points ending at each placed point. `fault` names it in plain words (the label's
    line per fault family)."""

    touches: ClassVar[Touches] = "run"
    fault: ClassVar[str] = ""
    ranges: ClassVar[dict[str, tuple[float, float]]] = {}  # setting → (low, high]: the values it may take

    def run(self, mask: np.ndarray, k: float) -> np.ndarray:
        """bool [batch, n]: the points the fault covers."""
        return until_end(mask) < duration(k)


def sigma(values: np.ndarray) -> np.ndarray:
    """[batch, 1]: the window's standard deviation, NaN-aware (the magnitudes' unit)."""
    return np.nanstd(values, axis=1, keepdims=True)


@OPERATORS.register("stuck")
class Stuck(Fault):
    fault = "stuck reading"
    description = "the reading sticks for {k:g} points at the last value before them (a stuck sensor, a frozen reading)"
    params: ClassVar[dict[str, float]] = {"k": 3.0}

    def apply(self, values, mask, *, seeds, k: float, **params):  # type: ignore[override]
        run = self.run(mask, k)
        # each covered point takes the last uncovered point before it; a fault from the oldest point holds that one
        source = np.maximum.accumulate(np.where(run, 0, np.arange(values.shape[1])[None, :]), axis=1)
        return np.take_along_axis(values, source, axis=1)


@OPERATORS.register("gap")
class Gap(Fault):
    kind = "syntactic"
    fault = "gap in the data"
    description = "{k:g} consecutive values are missing (an outage)"
    params: ClassVar[dict[str, float]] = {"k": 3.0}

    def apply(self, values, mask, *, seeds, k: float, **params):  # type: ignore[override]
        return np.where(self.run(mask, k), np.nan, values)


@OPERATORS.register("drift")
class Drift(Fault):
    fault = "drift"
    description = "the values drift away over {k:g} points, to {c:g} window standard deviations off (calibration drift)"
    params: ClassVar[dict[str, float]] = {"k": 3.0, "c": 1.0}

    def apply(self, values, mask, *, seeds, k: float, c: float, **params):  # type: ignore[override]
        steps = duration(k)
        ramp = np.clip((steps - until_end(mask)) / steps, 0.0, None)  # 1/k, 2/k, …, 1 at the fault's end
        return values + c * sigma(values) * ramp


@OPERATORS.register("gain")
class Gain(Fault):
    """× (1 + g) with g sized on the window's own scale: the gain that raises the window's mean absolute value
    by c standard deviations (g = c·σ / mean |x|), so that a level means the same harm on a series near 400 as
    on one near 1 (a fixed g of 5 % is six standard deviations of a CO2 record, a fraction of one of a price)."""

    fault = "gain error"
    description = (
        "for {k:g} points the values are scaled up, by {c:g} window standard deviations at a typical value (gain)"
    )
    params: ClassVar[dict[str, float]] = {"k": 3.0, "c": 1.0}

    def apply(self, values, mask, *, seeds, k: float, c: float, **params):  # type: ignore[override]
        size = np.nanmean(np.abs(values), axis=1, keepdims=True)
        gain = np.divide(c * sigma(values), size, out=np.zeros_like(size), where=size > 0)
        return np.where(self.run(mask, k), values * (1.0 + gain), values)


@OPERATORS.register("offset")
class Offset(Fault):
    fault = "offset"
    description = "for {k:g} points the values read {c:g} window standard deviations high, then recover (offset error)"
    params: ClassVar[dict[str, float]] = {"k": 3.0, "c": 1.0}

    def apply(self, values, mask, *, seeds, k: float, c: float, **params):  # type: ignore[override]
        return np.where(self.run(mask, k), values + c * sigma(values), values)


@OPERATORS.register("delay")
class Delay(Fault):
    """The input runs k points late up to the placed point: it shows the value k points earlier (the oldest
    value repeated where the window holds none that early), so the newest k values of the fault are never seen.
    Padding at the end with the last-known value instead would be `stuck` ending at the same point."""

    touches = "up_to_mask"
    fault = "delayed feed"
    description = (
        "the values arrive {k:g} points late: the input ends {k:g} points early, its start padded with its oldest "
        "value (late data)"
    )
    params: ClassVar[dict[str, float]] = {"k": 3.0}

    def apply(self, values, mask, *, seeds, k: float, **params):  # type: ignore[override]
        lag = duration(k)
        position = np.arange(values.shape[1])
        late = until_end(mask) < values.shape[1]  # at or before a placed point
        source = np.where(late, np.maximum(position - lag, 0)[None, :], position[None, :])
        return np.take_along_axis(values, source, axis=1)


@OPERATORS.register("clip")
class Clip(Fault):
    fault = "clipped readings"
    description = "for {k:g} points the values above the window's {q:g} quantile are cut to it (saturation)"
    params: ClassVar[dict[str, float]] = {"k": 3.0, "q": 0.8}
    ranges: ClassVar[dict[str, tuple[float, float]]] = {"q": (0.0, 1.0)}

    def apply(self, values, mask, *, seeds, k: float, q: float, **params):  # type: ignore[override]
        ceiling = np.nanquantile(values, q, axis=1, keepdims=True)
        return np.where(self.run(mask, k) & (values > ceiling), ceiling, values)


# --- the severity table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeverityTable:
    """Levels 1–5 of every fault: k for a season of `base` points (scaled to the data's season), and each
    fault's magnitude per level (faults graded by k alone have none)."""

    base: int
    k: tuple[int, ...]
    magnitudes: dict[str, dict[str, tuple[float, ...]]]

    def params(self, fault: str, level: int, *, season: int, input_length: int) -> dict[str, float]:
        """The fault's settings at `level` for data of this season (see `points`)."""
        if fault not in self.magnitudes:
            raise ValueError(f"the severity table grades {sorted(self.magnitudes)}, not {fault!r}")
        if level not in LEVELS:
            raise ValueError(f"severity levels are {list(LEVELS)}, got {level}")
        settings = {name: values[level - 1] for name, values in self.magnitudes[fault].items()}
        return {"k": float(self.points(level, season=season, input_length=input_length)), **settings}

    def points(self, level: int, *, season: int, input_length: int) -> int:
        """k at `level`: the table's k for a season of `base` points, times season / base (unscaled for data
        without a season, season 1); at least the level itself, so the levels stay distinct; below the
        input's length, so a delay keeps one observed point."""
        k = self.k[level - 1]
        if season > 1:
            k = max(level, round(k * season / self.base))
        return max(1, min(k, input_length - 1))


def severity_path() -> Path:
    """The checkout's ratings/severity.yaml or, installed, the copy shipped as causalrate.scales."""
    checkout = Path(__file__).resolve().parents[2] / "ratings" / "severity.yaml"
    if checkout.is_file():
        return checkout
    return Path(str(resources.files("causalrate.scales") / "severity.yaml"))


@cache
def severity_table() -> SeverityTable:
    raw: dict[str, Any] = yaml.safe_load(severity_path().read_text(encoding="utf-8"))
    k = tuple(int(v) for v in raw["k"]["points"])
    magnitudes = {
        fault: {name: tuple(float(v) for v in values) for name, values in (settings or {}).items()}
        for fault, settings in raw["faults"].items()
    }
    for fault, settings in magnitudes.items():
        cls = OPERATORS.get(fault)
        wrong = [n for n, v in settings.items() if n not in cls.params or len(v) != len(LEVELS)]
        if not issubclass(cls, Fault) or wrong or len(k) != len(LEVELS):
            raise ValueError(f"severity.yaml: {fault}: expected a duration fault and {len(LEVELS)} values per setting")
    return SeverityTable(base=int(raw["k"]["season"]), k=k, magnitudes=magnitudes)
