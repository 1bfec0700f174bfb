"""Series of several domains and frequencies that ship inside statsmodels (a core dependency): no network.

All are in statsmodels' wheel under statsmodels/datasets/ and each module states its licence in its
COPYRIGHT ("public domain" for every one here). grunfeld is left out: 20 yearly points per firm are too
few for a window. Each series carries the attributes `domain`, `frequency` and `dataset`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Source:
    dataset: str  # module of statsmodels.datasets
    columns: tuple[str, ...]
    domain: str
    frequency: str


SOURCES = (
    Source("macrodata", ("realgdp", "realcons", "realinv", "cpi", "unemp"), "macroeconomics", "quarterly"),
    Source("co2", ("co2",), "atmosphere", "weekly"),
    Source("elnino", ("sst",), "ocean", "monthly"),
    Source("sunspots", ("SUNACTIVITY",), "astronomy", "yearly"),
    Source("nile", ("volume",), "hydrology", "yearly"),
)


def _dated(name: str) -> pd.DataFrame:
    """The dataset with a DatetimeIndex (each one stores its dates its own way)."""
    from importlib import import_module

    data = import_module(f"statsmodels.datasets.{name}").load_pandas().data
    if name == "macrodata":
        index = pd.PeriodIndex.from_fields(year=data["year"].astype(int), quarter=data["quarter"].astype(int), freq="Q")
        return data.set_index(index.to_timestamp())
    if name == "co2":
        return data
    if name == "elnino":
        months = data.drop(columns="YEAR").stack(future_stack=True)
        dates = [pd.Timestamp(int(year), m + 1, 1) for year in data["YEAR"] for m in range(12)]
        return pd.DataFrame({"sst": months.to_numpy()}, index=pd.DatetimeIndex(dates))
    year = "YEAR" if "YEAR" in data else "year"
    return data.set_index(pd.to_datetime(data[year].astype(int).astype(str), format="%Y"))


def statsmodels_series() -> tuple[pd.DataFrame, dict[str, dict[str, str]], str]:
    """(wide frame of every series, their attributes, the source's description)."""
    columns, attributes = {}, {}
    for source in SOURCES:
        data = _dated(source.dataset)
        for column in source.columns:
            sid = f"{source.dataset}.{column}"
            columns[sid] = data[column].astype(float)
            attributes[sid] = {"domain": source.domain, "frequency": source.frequency, "dataset": source.dataset}
    wide = pd.DataFrame(columns).sort_index()
    return wide, attributes, "statsmodels.datasets (public domain: macrodata, co2, elnino, sunspots, nile)"
