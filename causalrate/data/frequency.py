"""Frequencies: inferred from the dates or declared, each with its usual seasonal period and its regular grid.

A series at a regular frequency is put on that frequency's grid, so a missing timestamp becomes a
missing value (rejected, or filled with data.fill: ffill, as any NaN). Business-daily data keep
their own calendar: an exchange holiday is not a gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from causalrate.errors import UserError

HOUR, DAY = pd.Timedelta(hours=1), pd.Timedelta(days=1)


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


def infer_frequency(dates: pd.DatetimeIndex, *, source: str) -> Frequency:
    """The frequency whose step is the most common gap between consecutive dates."""
    if len(dates) < 2:
        raise UserError(f"{source}: fewer than two dates; cannot infer the frequency (declare data.frequency)")
    gaps = pd.Series(dates.sort_values()).diff().dropna().value_counts(sort=True)
    step = pd.Timedelta(gaps.index[0])
    if step == DAY:
        weekend = (dates.dayofweek >= 5).any()
        return FREQUENCIES["daily" if weekend else "business-daily"]
    for f in FREQUENCIES.values():
        if f.step is not None and step == f.step:
            return f
    days = step / DAY
    for lo, hi, name in ((28, 31, "monthly"), (89, 92, "quarterly"), (365, 366, "yearly")):
        if lo <= days <= hi:
            return FREQUENCIES[name]
    raise UserError(
        f"{source}: cannot infer the frequency: the most common step between dates is {step}; "
        f"declare data.frequency (one of {list(NAMES)})"
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
            f"{source}: date {off[0]} is not on the {frequency.name} grid that starts at {first}; "
            f"declare data.frequency if it is not {frequency.name}, or align the dates"
        )
    return grid


def resolve(declared: str, dates: pd.DatetimeIndex, *, source: str) -> Frequency:
    """The declared frequency, or the one the dates show ("auto")."""
    return infer_frequency(dates, source=source) if declared == "auto" else FREQUENCIES[declared]


def date_unit(dates: pd.DatetimeIndex) -> str:
    """numpy unit for the dates: days when every timestamp is midnight (as daily data always were), else seconds."""
    return "D" if (dates.normalize() == dates).all() else "s"
