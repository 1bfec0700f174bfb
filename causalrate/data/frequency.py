"""Frequencies: inferred from the dates or declared, each with its usual seasonal period and its regular grid.

Any regular frequency pandas can name is accepted: the named ones below, and any fixed step pandas writes as
an alias (30min, 15min, 5min, 1min, 2h, 10s, 2D), whose usual season is the points in a day (48 for
half-hourly data, 96 for 15-minute data) for a step that divides a day, the points in a week for a step in
whole days that divides a week, else 1.

A series at a regular frequency is put on that frequency's grid, so a missing timestamp becomes a
missing value (rejected, or filled with data.fill: ffill, as any NaN). Business-daily data keep
their own calendar: an exchange holiday is not a gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalrate.errors import UserError

MINUTE, HOUR, DAY = pd.Timedelta(minutes=1), pd.Timedelta(hours=1), pd.Timedelta(days=1)


@dataclass(frozen=True)
class Frequency:
    name: str
    season: int  # the usual seasonal period, in points (hourly: a day; monthly: a year)
    months: int = 0  # calendar step in months (monthly, quarterly, yearly); 0: a fixed step
    step: pd.Timedelta | None = None  # fixed step (hourly, daily, weekly); None: calendar or business days
    pandas_alias: str = ""  # what pandas and the Nixtla libraries call it


FREQUENCIES = {
    f.name: f
    for f in (
        Frequency("minutely", 1440, step=MINUTE, pandas_alias="min"),
        Frequency("5-minutely", 288, step=5 * MINUTE, pandas_alias="5min"),
        Frequency("quarter-hourly", 96, step=15 * MINUTE, pandas_alias="15min"),
        Frequency("half-hourly", 48, step=30 * MINUTE, pandas_alias="30min"),
        Frequency("hourly", 24, step=HOUR, pandas_alias="h"),
        Frequency("daily", 7, step=DAY, pandas_alias="D"),
        Frequency("business-daily", 5, pandas_alias="B"),
        Frequency("weekly", 52, step=7 * DAY, pandas_alias="W"),
        Frequency("monthly", 12, months=1, pandas_alias="MS"),
        Frequency("quarterly", 4, months=3, pandas_alias="QS"),
        Frequency("yearly", 1, months=12, pandas_alias="YS"),
    )
}
NAMES = tuple(FREQUENCIES)
ALIAS_HINT = "or a pandas alias of a fixed step, e.g. 30min, 15min, 5min, 1min, 2h"


def usual_season(step: pd.Timedelta) -> int:
    """A fixed step's usual seasonal period: the points in a day (a step that divides a day), in a week (whole
    days that divide a week), else 1 (no season)."""
    if step < DAY and DAY % step == pd.Timedelta(0):
        return int(DAY // step)
    if step >= DAY and step % DAY == pd.Timedelta(0) and (7 * DAY) % step == pd.Timedelta(0):
        return int(7 * DAY // step)
    return 1


def fixed_step(step: pd.Timedelta) -> Frequency:
    """The frequency of a fixed step: a named one with that step, else one named by its pandas alias."""
    named = next((f for f in FREQUENCIES.values() if f.step == step), None)
    if named is not None:
        return named
    alias = pd.tseries.frequencies.to_offset(step).freqstr
    return Frequency(alias, usual_season(step), step=step, pandas_alias=alias)


def parse(name: str) -> Frequency:
    """A declared data.frequency: a name of FREQUENCIES or a pandas alias of a fixed step; else ValueError
    listing what is accepted."""
    if name in FREQUENCIES:
        return FREQUENCIES[name]
    aliased = next((f for f in FREQUENCIES.values() if name in (f.pandas_alias, f.pandas_alias.upper())), None)
    if aliased is not None:  # MS, W, QS, YS, B, h, D: a named one's pandas alias
        return aliased
    try:
        step = pd.Timedelta(pd.tseries.frequencies.to_offset(name))  # only a fixed step converts
    except (ValueError, TypeError):
        step = pd.Timedelta(0)
    if step <= pd.Timedelta(0):
        raise ValueError(f"unknown frequency {name!r}; expected auto, one of {list(NAMES)}, {ALIAS_HINT}")
    return fixed_step(step)


def fitting(dates: pd.DatetimeIndex) -> str:
    """What would fit dates that are not on one regular grid: the finest step all their gaps are whole
    multiples of (the missing points then gaps, data.fill: ffill), and the most common step."""
    gaps = pd.Series(dates.sort_values()).diff().dropna()
    if gaps.empty:
        return "no step (a single date)"
    nanos = gaps.to_numpy().astype("timedelta64[ns]").astype(np.int64)
    common = fixed_step(pd.Timedelta(int(pd.Series(nanos).mode().iloc[0]), "ns"))
    finest = fixed_step(pd.Timedelta(int(np.gcd.reduce(nanos)), "ns"))
    fit = f"data.frequency: {finest.name} (every date is on its grid; the points between are gaps: data.fill: ffill)"
    if common != finest:
        fit += f", or {common.name} (the most common step) after aligning the dates off its grid"
    return fit


def infer_frequency(dates: pd.DatetimeIndex, *, source: str) -> Frequency:
    """The frequency whose step is the most common gap between consecutive dates."""
    if len(dates) < 2:
        raise UserError(f"{source}: fewer than two dates; cannot infer the frequency (declare data.frequency)")
    gaps = pd.Series(dates.sort_values()).diff().dropna().value_counts(sort=True)
    step = pd.Timedelta(gaps.index[0])
    if step == DAY:
        weekend = (dates.dayofweek >= 5).any()
        return FREQUENCIES["daily" if weekend else "business-daily"]
    days = step / DAY
    for lo, hi, name in ((28, 31, "monthly"), (89, 92, "quarterly"), (365, 366, "yearly")):
        if lo <= days <= hi:
            return FREQUENCIES[name]
    if step > pd.Timedelta(0):
        return fixed_step(step)
    raise UserError(
        f"{source}: cannot infer the frequency: the most common step between dates is {step}; "
        f"declare data.frequency (one of {list(NAMES)}, {ALIAS_HINT})"
    )


def regular_grid(
    dates: pd.DatetimeIndex, frequency: Frequency, *, calendar: pd.DatetimeIndex, source: str
) -> pd.DatetimeIndex:
    """Every timestamp of the frequency from the first date to the last; business days: the data's own calendar
    (every date of any series) over that span, so a day another series trades on is a gap here as it always was.

    A date off that grid (a monthly series on the 1st and the 15th) is an error naming it.
    """
    first, last = dates.min(), dates.max()
    if frequency.step is None and not frequency.months:
        return calendar[(calendar >= first) & (calendar <= last)]
    if frequency.months:
        month_end = first.is_month_end and first.day > 28
        offset = pd.offsets.MonthEnd(frequency.months) if month_end else pd.DateOffset(months=frequency.months)
        grid = pd.date_range(first, last, freq=offset)
    else:
        grid = pd.date_range(first, last, freq=frequency.step)
    off = dates.difference(grid)
    if len(off):
        raise UserError(
            f"{source}: date {off[0]} is not on the {frequency.name} grid that starts at {first}; what would fit: "
            f"{fitting(dates)}"
        )
    return grid


def resolve(declared: str, dates: pd.DatetimeIndex, *, source: str) -> Frequency:
    """The declared frequency, or the one the dates show ("auto")."""
    return infer_frequency(dates, source=source) if declared == "auto" else parse(declared)


def date_unit(dates: pd.DatetimeIndex) -> str:
    """numpy unit for the dates: days when every timestamp is midnight (as daily data always were), else seconds."""
    return "D" if (dates.normalize() == dates).all() else "s"
