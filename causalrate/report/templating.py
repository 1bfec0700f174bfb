"""The one Jinja environment of every page and Markdown file, and the number formats they share.

HTML pages escape every user-supplied string; Markdown templates (`*.md.j2`) are not HTML-escaped (an
entity such as `&#39;` would show as typed): where a user-supplied name could be read as Markdown or inline
HTML, the template passes it through the `md` filter, which backslash-escapes it.
"""

from __future__ import annotations

import hashlib
import math
from contextlib import suppress
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import Environment, FileSystemBytecodeCache, PackageLoader
from jinja2.bccache import Bucket

from causalrate.paths import cache_root
from causalrate.rate.headlines import percent


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


def level_class(rating: int | None, levels: int) -> str:
    """CSS class of a level: best, worst, middle (colour is never the only cue: the words say it too). The one
    place a level gets its colour: Python code and the templates (filter `level_class`) both call it."""
    if rating is None:
        return "lnone"
    return "lbest" if rating == 1 else ("lworst" if rating == levels else "lmid")


IMPUTATION_WORDS = {"ffill": "forward-fill", "linear": "linear-interpolation", "zero": "zero-fill"}
# a NaN-accepting system's policy (System.nan_policy) as a reader takes it; a plugin's own words are shown as given
NAN_POLICY_WORDS = {
    "own handling": "handled by the system itself (it accepts NaN)",
    "native mask": "handled by the model's own missing-value mask (it accepts NaN)",
}


def missing_values_text(system: Any, naive_error: float | None = None) -> str:
    """One line for the label, report and model card: the system's NaN policy and, for a NaN-accepting
    one, its `ape` through its own handling against after imputation and which it does better with, as a share
    of the naive reference's clean error (`naive_error`: the basis every other rise on the cards is said on; a
    label read "its error rises by 27097 % of the naive reference's clean error" in its headline and "rises by
    101" two lines below, for the same effect) or, without that basis (an older ratings.json), in the outcome's
    units."""
    if system.imputation:  # METHOD §2: the P3 rows rate the system together with this imputation
        way = IMPUTATION_WORDS.get(system.imputation, system.imputation)
        return f"rated with {way} imputation (the system does not accept NaN)"
    text = NAN_POLICY_WORDS.get(system.nan_policy, str(system.nan_policy))
    m = system.missing_values
    if m is None:
        return text

    # m.score is `ape`: the perturbation's harm to the error (APE, ≥ 0), in the outcome's units
    if naive_error:
        own, imputed = (percent(v / naive_error) for v in (m.own_value, m.imputed_value))
        return (
            f"{text}; its error rises by {own} of the naive reference's clean error under {m.own} with its own "
            f"handling, by {imputed} under {m.imputed} ({m.imputation}): better with {m.better}"
        )

    def rise(value: float) -> str:
        return "does not rise" if value == 0 else f"rises by {fmt(value, 3)}"

    return (
        f"{text}; under {m.own} with its own handling its error {rise(m.own_value)}, under {m.imputed} "
        f"({m.imputation}) it {rise(m.imputed_value)}: better with {m.better}"
    )


MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*[]<>|"})


def md(text: Any) -> str:
    """A user-supplied string as literal Markdown text: every character Markdown or inline HTML would
    interpret is backslash-escaped (CommonMark), never turned into an HTML entity."""
    return str(text).translate(MARKDOWN_SPECIAL)


def html_escaped(name: str | None) -> bool:
    """Every template but Markdown's is HTML-escaped (a string template too)."""
    return name is None or not name.endswith(".md.j2")


class TemplateCache(FileSystemBytecodeCache):
    """Compiled templates kept between runs (compiling them is most of a card command's template time). Jinja
    checks each entry against its template's source; the folder is named by this module's source and Jinja's
    version, which decide how the templates compile. A folder that cannot be written only costs the saving."""

    def __init__(self) -> None:
        digest = hashlib.sha256(Path(__file__).read_bytes() + jinja2.__version__.encode()).hexdigest()[:16]
        folder = cache_root() / "templates" / digest
        with suppress(OSError):  # then dump_bytecode fails, and is skipped
            folder.mkdir(parents=True, exist_ok=True)
        super().__init__(str(folder))

    def load_bytecode(self, bucket: Bucket) -> None:
        with suppress(OSError):
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket: Bucket) -> None:
        with suppress(OSError):
            super().dump_bytecode(bucket)


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("causalrate.report", "templates"),
        bytecode_cache=TemplateCache(),
        autoescape=html_escaped,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=fmt,
        rating_cell=rating_cell,
        headline_cell=headline_cell,
        missing_values=missing_values_text,
        md=md,
        level_class=level_class,
    )
    return env
