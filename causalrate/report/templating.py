"""The one Jinja environment of every page and Markdown file, and the number formats they share.

HTML and card pages escape every user-supplied string; the run's report.md turns escaping off in
its template (`{% autoescape false %}`), as plain Markdown wants.
"""

from __future__ import annotations

import math
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape


def fmt(x: Any, digits: int = 4) -> str:
    """A number in `digits` significant digits; '—' for a missing one (None, NaN, inf)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{float(x):.{digits}g}"


def rating_cell(row: Any) -> str:
    """A Markdown table cell: 'rating (raw)', '≥ k' when inconclusive, 'insufficient', ⚠ when unstable."""
    shown = row.display if row.display is not None else str(row.rating)
    text = f"{shown} ({fmt(row.raw)})" + (" insufficient" if row.insufficient else "")
    return text + (" ⚠" if row.stable is False else "")


def headline_cell(h: Any) -> str:
    """'relative (absolute)' of one headline rating; '—' when the run has none."""
    if h is None:
        return "—"
    return f"{h.rating}" + (f" ({h.absolute_rating})" if h.absolute_rating is not None else "")


IMPUTATION_WORDS = {"ffill": "forward-fill", "linear": "linear-interpolation", "zero": "zero-fill"}


def missing_values_text(system: Any) -> str:
    """One line for the label, report and model card: the system's NaN policy and, for a NaN-accepting
    one, its `ape` through its own handling against after imputation and which it does better with."""
    if system.imputation:  # METHOD §2: the P3 rows rate the system together with this imputation
        way = IMPUTATION_WORDS.get(system.imputation, system.imputation)
        return f"rated with {way} imputation (the system does not accept NaN)"
    text = str(system.nan_policy)
    m = system.missing_values
    if m is None:
        return text
    return (
        f"{text}; {m.score} under {m.own} (own handling) {fmt(m.own_value, 3)} vs {m.imputed} ({m.imputation}) "
        f"{fmt(m.imputed_value, 3)}: better with {m.better}"
    )


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("causalrate.report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=fmt, rating_cell=rating_cell, headline_cell=headline_cell, missing_values=missing_values_text
    )
    return env
