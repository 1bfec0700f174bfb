"""Series that ship inside statsmodels (a core dependency): no network.

`statsmodels`: several domains and frequencies, all in statsmodels' wheel under statsmodels/datasets/, each
module stating its licence in its COPYRIGHT ("public domain" for every one here). grunfeld is left out: 20
yearly points per firm are too few for a window. Each series carries `domain`, `frequency` and `dataset`.

`electricity`: the hourly electricity demand of Victoria, Australia (MW), 1 January to 29 May 2012, that
statsmodels ships as its MSTL test data (tsa/stl/tests/results/mstl_elec_vic.csv: the first 3,600 hours of
the vic_elec data of R's tsibbledata, Australian Energy Market Operator via O'Hara-Wild et al., GPL-3),
cut into ten fortnights, each a series with the `month` it starts in and its austral `season` (the same
use of one long series as a practitioner's: does a model's error depend on the time of year?).
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
    return wide, attributes, "statsmodels.datasets (public domain)"


ELECTRICITY = "tsa/stl/tests/results/mstl_elec_vic.csv"  # inside the statsmodels package
FORTNIGHT = 14 * 24  # hours
AUSTRAL_SEASONS = {12: "summer", 1: "summer", 2: "summer", 3: "autumn", 4: "autumn", 5: "autumn"}


def electricity_series() -> tuple[pd.DataFrame, dict[str, dict[str, str]], str]:
    """(wide frame of the ten fortnights of Victoria's hourly demand, their attributes, the description)."""
    from importlib import resources

    with resources.as_file(resources.files("statsmodels") / ELECTRICITY) as path:
        demand = pd.read_csv(path, parse_dates=["ds"], index_col="ds")["y"].astype(float)
    columns, attributes = {}, {}
    for k in range(len(demand) // FORTNIGHT):
        part = demand.iloc[k * FORTNIGHT : (k + 1) * FORTNIGHT]
        start = part.index[0]
        sid = f"fortnight-{start:%m-%d}"
        columns[sid] = part
        attributes[sid] = {"month": f"{start:%B}", "season": AUSTRAL_SEASONS[start.month]}
    source = (
        "statsmodels' copy of Victoria's hourly electricity demand, Jan-May 2012 (tsibbledata vic_elec, AEMO; GPL-3)"
    )
    return pd.DataFrame(columns).sort_index(), attributes, source
