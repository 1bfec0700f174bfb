"""The Series and Dataset objects of METHOD §1, and their validation."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from causalrate.errors import UserError


@dataclass(frozen=True)
class Series:
    """One univariate series with its attributes (the confounders Z)."""

    id: str
    dates: np.ndarray  # datetime64[D] (daily or coarser) or datetime64[s] (hourly), strictly increasing
    values: np.ndarray  # float64, finite
    attributes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The values and dates are read-only: nothing (a plugin's calibrate() included) changes the data rated."""
        for array in (self.values, self.dates):
            if isinstance(array, np.ndarray):
                array.setflags(write=False)


@dataclass(frozen=True)
class Dataset:
    series: tuple[Series, ...]
    source: str  # where it came from, for error messages and provenance
    frequency: str = "business-daily"  # a name of data.frequency.FREQUENCIES
    season: int = 1  # seasonal period in points: MASE's scale and seasonal_naive's lag

    @property
    def attribute_names(self) -> list[str]:
        return sorted({k for s in self.series for k in s.attributes})

    def content_hash(self) -> str:
        """sha256 over ids, dates, values and attributes: the run's data hash."""
        h = hashlib.sha256()
        for s in self.series:
            h.update(s.id.encode())
            unit = np.datetime_data(s.dates.dtype)[0]
            if unit != "D":  # daily dates hash as they always did
                h.update(unit.encode())
            h.update(s.dates.astype(np.int64).tobytes())
            h.update(np.ascontiguousarray(s.values, dtype=np.float64).tobytes())
            h.update(json.dumps(s.attributes, sort_keys=True).encode())
        return h.hexdigest()


MAX_ABS_VALUE = 1e150  # its square, a squared error's order, still fits in float64 (≈ 1.8e308)


def validate_series(*, series_id: str, dates: np.ndarray, values: np.ndarray, min_length: int, source: str) -> None:
    """Reject series the method cannot use, naming the source, the series and the problem."""
    where = f"{source}: series {series_id!r}"
    if values.dtype.kind not in "fiu":
        raise UserError(f"{where}: values must be numeric, got dtype {values.dtype}")
    dup = dates[1:][dates[1:] == dates[:-1]]
    if dup.size:
        raise UserError(f"{where}: duplicate dates, e.g. {dup[0]}; each date must appear once")
    finite = np.isfinite(values)
    if not finite.any():
        raise UserError(f"{where}: all values are missing (NaN)")
    if not finite.all():
        bad = dates[~finite]
        raise UserError(
            f"{where}: {bad.size} missing or infinite values (first at {bad[0]}); clean them or set data.fill: ffill"
        )
    if np.abs(values).max() > MAX_ABS_VALUE:
        k = int(np.argmax(np.abs(values)))
        raise UserError(
            f"{where}: a value of {float(values[k]):.3g} (at {dates[k]}) is beyond ±{MAX_ABS_VALUE:g}: "
            "errors' squares would overflow float64 and every score with them; rescale the series (e.g. divide it "
            "by a power of ten) and rate that"
        )
    if values.size < min_length:
        raise UserError(
            f"{where}: {values.size} points is too short for one window (input_length + horizon = {min_length})"
        )
    if np.ptp(values) == 0:
        raise UserError(f"{where}: the series is constant ({float(values[0]):g}); nothing to forecast")
