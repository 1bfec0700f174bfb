"""Installed versions of the packages that compute: the provenance in ratings.json and the forecast
cache's and the analysis memo's keys all read them here."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version


def installed(names: Iterable[str], *, missing: str = "absent") -> dict[str, str]:
    """{distribution name: its installed version, or `missing`}, in the order given."""
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = missing
    return out
