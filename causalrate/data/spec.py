"""A study's `data:` entry: where the series come from and which part of them is used.

The data layer owns this shape (as systems/spec.py owns a system entry); the config layer composes it,
so the loaders read a typed entry without importing the study's config.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from causalrate.data.frequency import parse as parse_frequency

QUICKSTART_SERIES = ["AAPL", "MSFT", "MRK", "PFE", "JPM", "BAC"]
QUICKSTART_DESCRIPTION = "daily closing prices of six S&P 500 stocks, two per industry"


class DataConfig(BaseModel):
    """Where the series come from and which part of them is used."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(
        None, max_length=300, description="what the data are, in the words of the people who know them (cards)"
    )
    source: Literal["embedded", "csv", "parquet", "yfinance", "statsmodels", "electricity"] = Field(
        "embedded",
        description="statsmodels: series of five domains and four frequencies shipped in statsmodels; electricity: "
        "Victoria's hourly demand in ten fortnights (attributes month, season), shipped in statsmodels",
    )
    series: list[str] | None = Field(None, description="series ids / tickers to keep; null = all")
    start: date | None = None
    end: date | None = None
    path: str | None = Field(None, description="csv/parquet file, relative to the YAML file")
    layout: Literal["wide", "long"] = "wide"
    date_column: str | None = Field(None, description="null: 'ds' if the file has it, else 'date'")
    series_column: str | None = Field(None, description="long layout; null: 'unique_id' if present, else 'series'")
    value_column: str | None = Field(None, description="long layout; null: 'y' if present, else 'value'")
    attribute_columns: list[str] | None = Field(None, description="long layout; null: every other column")
    attributes: dict[str, dict[str, str]] = Field(default_factory=dict)
    nesting: dict[str, str] | None = Field(
        None,
        description="attribute → the attribute it is nested in (e.g. {company: industry}: companies compared "
        "within their industry); null: detected (each value within one value of a coarser attribute); {}: none",
    )
    cache_dir: str | None = None
    fill: Literal["none", "ffill"] = "none"
    frequency: str = Field(
        "auto",
        description="auto: inferred from the dates (the most common step between them); else a name (hourly, "
        "half-hourly, monthly, ...) or a pandas alias of a fixed step (30min, 15min, 5min, 1min, 2h)",
    )
    season: PositiveInt | None = Field(
        None, description="seasonal period in points (MASE, seasonal_naive); null: the frequency's usual one"
    )

    @field_validator("frequency")
    @classmethod
    def _frequency(cls, name: str) -> str:
        if name != "auto":
            parse_frequency(name)  # ValueError listing the accepted names
        return name

    @field_validator("series")
    @classmethod
    def _series(cls, names: list[str] | None) -> list[str] | None:
        if names == []:
            raise ValueError("an empty list keeps no series; leave data.series out to use every series")
        given = names or []
        dup = sorted({n for n in given if given.count(n) > 1})
        if dup:
            raise ValueError(f"each series once; repeated: {dup}")
        return names

    @model_validator(mode="after")
    def _check(self) -> DataConfig:
        if self.source in ("csv", "parquet") and not self.path:
            raise ValueError(f"data.path is required when data.source is {self.source!r}")
        if self.source == "yfinance" and not self.series:
            raise ValueError("data.series (the tickers) is required when data.source is 'yfinance'")
        if self.start and self.end and self.start >= self.end:
            raise ValueError(f"data.start ({self.start}) must be before data.end ({self.end})")
        return self


def default_data() -> DataConfig:
    """The quickstart data: six S&P 500 stocks in three industries, calendar year 2022; the paper's MASE (season 1)."""
    return DataConfig(
        description=QUICKSTART_DESCRIPTION,
        series=QUICKSTART_SERIES,
        start=date(2022, 1, 1),
        end=date(2022, 12, 31),
        season=1,
    )
