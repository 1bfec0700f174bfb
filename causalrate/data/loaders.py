"""Loaders: the embedded S&P 500 prices, CSV/parquet (wide or long: unique_id, ds, y + attributes), and yfinance
with a disk cache; every source at any regular frequency (data/frequency.py)."""

from __future__ import annotations

import codecs
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from causalrate.data.dataset import Dataset, Series, validate_series
from causalrate.data.domains import electricity_series, statsmodels_series
from causalrate.data.frequency import Frequency, date_unit, regular_grid, resolve
from causalrate.data.spec import DataConfig
from causalrate.errors import UserError
from causalrate.paths import cache_root

EMBEDDED = resources.files("causalrate.data") / "embedded"


def load_dataset(cfg: DataConfig, *, base_dir: Path, min_length: int) -> Dataset:
    """Load, select, clip to [start, end] and validate the series a study uses."""
    if cfg.source == "embedded":
        wide, attributes, source = _embedded()
    elif cfg.source == "statsmodels":
        wide, attributes, source = statsmodels_series()
    elif cfg.source == "electricity":
        wide, attributes, source = electricity_series()
    elif cfg.source == "yfinance":
        wide, source = _yfinance(cfg, base_dir)
        attributes = {}
    else:
        wide, attributes, source = _table(cfg, base_dir)
    absent = [sid for sid in cfg.attributes if sid not in wide.columns]
    if absent:  # a typo in a series id would silently give its attributes to nobody
        raise UserError(
            f"{source}: data.attributes names series {absent} not in the data; available: {list(wide.columns)}"
        )
    for sid, attrs in cfg.attributes.items():  # the YAML mapping wins over the file's attributes
        attributes[sid] = {**attributes.get(sid, {}), **attrs}

    wanted = cfg.series or list(wide.columns)
    missing = [s for s in wanted if s not in wide.columns]
    if missing:
        raise UserError(f"{source}: data.series names {missing}, not in the data; available: {list(wide.columns)}")
    start = pd.Timestamp(cfg.start) if cfg.start else None
    end = pd.Timestamp(cfg.end) + pd.Timedelta(days=1) - pd.Timedelta(1, "ns") if cfg.end else None  # the whole day
    frame = wide.loc[start:end, wanted]
    if frame.empty:
        covered = f"{wide.index.min().date()} to {wide.index.max().date()}" if len(wide) else "no dates"
        raise UserError(
            f"{source}: no data between data.start {cfg.start or '(first date)'} and data.end "
            f"{cfg.end or '(last date)'}; the data cover {covered}"
        )
    unit = date_unit(frame.index)
    series, frequencies = [], {}
    for sid in wanted:
        column = frame[sid].dropna()
        if len(column) >= 2:  # each series on its own frequency's grid: a missing timestamp becomes a NaN
            frequencies[sid] = _series_frequency(cfg.frequency, column.index, frame.index, f"{source}: series {sid!r}")
            grid = regular_grid(
                column.index, frequencies[sid], calendar=frame.index, source=f"{source}: series {sid!r}"
            )
            column = column.reindex(grid)
        values = _numeric(column, source=source, series_id=sid)
        if cfg.fill == "ffill":
            values = pd.Series(values).ffill().to_numpy()
        dates = column.index.to_numpy().astype(f"datetime64[{unit}]")
        validate_series(series_id=sid, dates=dates, values=values, min_length=min_length, source=source)
        series.append(Series(id=sid, dates=dates, values=values.astype(np.float64), attributes=attributes.get(sid, {})))
    _check_attributes(series, source)
    return Dataset(series=tuple(series), source=source, **_frequency_and_season(frequencies, cfg.season, source))


def _series_frequency(declared: str, dates: pd.DatetimeIndex, calendar: pd.DatetimeIndex, where: str) -> Frequency:
    """Declared, or inferred from the dates that hold a value; when those show no known step (a value every
    other day), from the data's dates over the series' span."""
    try:
        return resolve(declared, dates, source=where)
    except UserError:
        span = calendar[(calendar >= dates.min()) & (calendar <= dates.max())]
        return resolve(declared, span, source=where)


def _frequency_and_season(frequencies: dict[str, Frequency], declared: int | None, source: str) -> dict:
    """The data's one frequency and its season (declared or usual); series of several frequencies need a
    declared season ("mixed": MASE and seasonal_naive use one period for every series)."""
    names = sorted({f.name for f in frequencies.values()})
    if len(names) == 1:
        (frequency,) = set(frequencies.values())
        return {"frequency": frequency.name, "season": declared or frequency.season}
    if declared is None:
        per = {f: [sid for sid, g in frequencies.items() if g.name == f][:3] for f in names}
        raise UserError(f"{source}: the series have different frequencies ({per}); declare data.season")
    return {"frequency": "mixed", "season": declared}


def _embedded() -> tuple[pd.DataFrame, dict[str, dict[str, str]], str]:
    with resources.as_file(EMBEDDED / "sp500_dataset.csv.gz") as path:
        wide = pd.read_csv(path, parse_dates=["Date"], index_col="Date")
    with resources.as_file(EMBEDDED / "attributes.csv") as path:
        table = pd.read_csv(path, dtype=str, index_col="ticker")
    return wide, table.to_dict(orient="index"), "embedded S&P 500 data (skfolio, BSD-3-Clause)"


def _table(cfg: DataConfig, base_dir: Path) -> tuple[pd.DataFrame, dict[str, dict[str, str]], str]:
    assert cfg.path is not None  # DataConfig requires it for csv and parquet
    path = (base_dir / cfg.path).resolve()
    source = str(path)
    encoding = "utf-8"
    try:
        if cfg.source == "csv":
            encoding = _csv_encoding(path, source)
            frame = pd.read_csv(path, encoding=encoding)
            header = list(  # as written: a series named NA or nan is a name, an empty cell is ""
                pd.read_csv(path, nrows=1, header=None, dtype=str, keep_default_na=False, encoding=encoding).iloc[0]
            )
        else:
            frame, header = pd.read_parquet(path), []
    except FileNotFoundError:
        raise UserError(f"data.path: no such file {path}") from None
    except UserError:
        raise
    except UnicodeDecodeError:  # a bad byte past the part the encoding was told from
        raise not_text(path, source, encoding) from None
    except Exception as exc:
        raise UserError(f"{source}: cannot read as {cfg.source}: {exc}") from None
    unnamed = [i for i, name in enumerate(header) if not name.strip()]
    if unnamed:  # trailing separators (Excel's export of a wider sheet) give empty columns: nothing to lose
        holding = [i + 1 for i in unnamed if frame.iloc[:, i].notna().any()]
        if holding:
            raise UserError(
                f"{source}: column(s) {holding} hold values but have no name in the header; name them (series ids)"
            )
        frame = frame.drop(columns=frame.columns[unnamed])
        header = [name for i, name in enumerate(header) if i not in unnamed]
    repeated = sorted({str(c) for c in header if header.count(c) > 1})
    if repeated:  # pandas would rename the second to "name.1": a series or attribute silently lost
        raise UserError(f"{source}: the header repeats column(s) {repeated}; give every column its own name")
    if len(frame.columns) == 1 and cfg.source == "csv":
        separator = next((name for char, name in SEPARATORS.items() if char in str(frame.columns[0])), None)
        if separator:  # Excel in many countries writes ';' (and decimal commas): the whole row is one column
            raise UserError(
                f"{source}: the columns are separated by {separator}, not commas (the header reads one column, "
                f"{str(frame.columns[0])[:80]!r}); save the file as comma-separated CSV with '.' decimals"
            )
    if frame.empty:
        raise UserError(f"{source}: the file holds no rows (only a header); expected one row per date")
    columns = _columns(cfg, frame, source)
    date_column = columns["date"]
    frame[date_column] = _dates(frame[date_column], f"{source}: column {date_column!r}")

    attributes: dict[str, dict[str, str]] = {}
    if cfg.layout == "long":
        series_column, value_column = columns["series"], columns["value"]
        named = [series_column, *columns["attributes"]]
        if cfg.source == "csv":  # as written: pandas reads NA (North America), NULL or nan as missing and 007 as 7
            written = pd.read_csv(path, usecols=named, dtype=str, keep_default_na=False, encoding=encoding)
            frame[named] = written[named].replace("", np.nan)
        unnamed = frame[series_column].isna()
        if unnamed.any():
            raise UserError(
                f"{source}: column {series_column!r} is empty at row {int(np.argmax(unnamed)) + 2}; every row names "
                "its series"
            )
        frame[series_column] = frame[series_column].astype(str)
        for sid, group in frame.groupby(series_column, sort=False):
            attrs = {}
            for col in columns["attributes"]:
                values = group[col].dropna().astype(str).unique()
                if len(values) != 1:
                    raise UserError(
                        f"{source}: attribute {col!r} of series {sid!r} must have one value, got {list(values)[:5]}"
                        + (
                            ""
                            if cfg.attribute_columns is not None
                            else "; list the attributes in data.attribute_columns"
                        )
                    )
                attrs[col] = values[0]
            attributes[str(sid)] = attrs
        dup = frame[frame.duplicated([date_column, series_column])]
        if len(dup):
            row = dup.iloc[0]
            raise UserError(f"{source}: series {row[series_column]!r}: duplicate dates, e.g. {row[date_column]}")
        wide = frame.pivot(index=date_column, columns=series_column, values=value_column)
    else:
        dup = frame[frame[date_column].duplicated()]
        if len(dup):
            raise UserError(f"{source}: duplicate dates, e.g. {dup[date_column].iloc[0]}; each date once")
        wide = frame.set_index(date_column)
        wide.columns = [str(c) for c in wide.columns]
    return wide.sort_index(), attributes, source


def _columns(cfg: DataConfig, frame: pd.DataFrame, source: str) -> dict:
    """The date, series, value and attribute columns: as configured, else the Nixtla names (ds, unique_id, y) if
    the file has them, else the classic ones (date, series, value); long-layout attributes: every other column."""

    def pick(given: str | None, nixtla: str, classic: str) -> str:
        return given or (nixtla if nixtla in frame.columns else classic)

    columns: dict[str, str | list[str]] = {"date": pick(cfg.date_column, "ds", "date")}
    if cfg.layout == "long":
        columns |= {
            "series": pick(cfg.series_column, "unique_id", "series"),
            "value": pick(cfg.value_column, "y", "value"),
        }
    named = list(columns.values())
    absent = [c for c in named + list(cfg.attribute_columns or []) if c not in frame.columns]
    if absent:
        raise UserError(
            f"{source}: missing column(s) {absent} (layout {cfg.layout}); columns are {list(frame.columns)}"
        )
    if cfg.layout == "long":
        others = [c for c in frame.columns if c not in named]
        columns["attributes"] = others if cfg.attribute_columns is None else cfg.attribute_columns
    return columns


def _yfinance(cfg: DataConfig, base_dir: Path) -> tuple[pd.DataFrame, str]:
    """Prices from the on-disk cache (`cache_dir`, relative to the YAML's folder like every path; default
    yfinance/ in the user's cache folder), else downloaded."""
    default = cache_root() / "yfinance"
    cache_dir = base_dir / Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default
    assert cfg.series is not None  # DataConfig requires it for yfinance
    cache = cache_dir / f"{'_'.join(cfg.series)}_{cfg.start}_{cfg.end}.csv"
    if not cache.exists():
        _download_yfinance(cfg, cache)
    wide = pd.read_csv(cache, parse_dates=["Date"], index_col="Date")
    return wide, f"yfinance cache {cache}"


def _download_yfinance(cfg: DataConfig, cache: Path) -> None:
    hint = (
        f"no cached prices at {cache}. Connect to the internet once (pip install 'causalrate[yfinance]'), "
        "or put the prices in a CSV and use data.source: csv"
    )
    try:
        import yfinance
    except ImportError:
        raise UserError(f"yfinance is not installed and there are {hint}") from None
    try:
        prices = yfinance.download(cfg.series, start=cfg.start, end=cfg.end, auto_adjust=True, progress=False)
    except Exception as exc:
        raise UserError(f"yfinance download failed ({exc}); {hint}") from None
    if prices is None or prices.empty:
        raise UserError(f"yfinance returned no data (offline?); {hint}")
    close = prices.get("Close", prices)
    cache.parent.mkdir(parents=True, exist_ok=True)
    close.rename_axis("Date").to_csv(cache)


def _numeric(column: pd.Series, *, source: str, series_id: str) -> np.ndarray:
    if column.dtype.kind in "fiu":
        return column.to_numpy(dtype=np.float64)
    converted = pd.to_numeric(column, errors="coerce")
    # True/False are no measurements: pandas would read them as 1 and 0 and the series would be rated as one
    bad = column[(converted.isna() & column.notna()) | column.map(lambda v: isinstance(v, (bool, np.bool_)))]
    if len(bad):
        first = bad.iloc[0].item() if isinstance(bad.iloc[0], np.generic) else bad.iloc[0]  # True, not np.True_
        raise UserError(f"{source}: series {series_id!r}: non-numeric value {first!r} at {pd.Timestamp(bad.index[0])}")
    return converted.to_numpy(dtype=np.float64)


def _check_attributes(series: list[Series], source: str) -> None:
    names = {frozenset(s.attributes) for s in series}
    if len(names) > 1:
        raise UserError(f"{source}: every series needs the same attributes; got {sorted(map(sorted, names))}")


SEPARATORS = {";": "semicolons (';')", "\t": "tabs", "|": "bars ('|')"}
HEAD_BYTES = 1 << 20  # the start of a CSV file read to tell its encoding
UTF16 = (b"\xff\xfe", b"\xfe\xff")  # the byte-order marks of UTF-16 text (Excel's "Unicode text")
ENCODINGS = {"utf-8": "UTF-8", "utf-16": "UTF-16"}  # what _csv_encoding finds, in a reader's words


def _csv_encoding(path: Path, source: str) -> str:
    """UTF-8 (a byte-order mark allowed), or UTF-16 where its mark says so; anything else is a UserError saying
    what the file is: a parquet file under a .csv name, or text in another encoding (Windows' cp1252...)."""
    with open(path, "rb") as file:
        head = file.read(HEAD_BYTES)
    if not head.strip():
        raise UserError(f"{source}: the file is empty; expected a header (date and series columns) and a row per date")
    if head.startswith(UTF16):
        return "utf-16"
    if head.startswith(b"PAR1"):
        raise UserError(f"{source}: this is a parquet file, not CSV text; set data.source: parquet")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(head) < HEAD_BYTES or exc.start < len(head) - 4:  # not a character cut where the reading stopped
            raise not_text(path, source, "utf-8") from None
    return "utf-8"


def not_text(path: Path, source: str, encoding: str) -> UserError:
    """The error for a file that is not `encoding` text: its first byte that does not decode, by line and offset
    (read through to it, MiB by MiB: the encoding is told from the first MiB, a bad byte may come later)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    offset = lines = 0  # the bytes and line breaks decoded before the current chunk
    with open(path, "rb") as file:
        while True:
            chunk = file.read(HEAD_BYTES)
            try:
                lines += decoder.decode(chunk, final=not chunk).count("\n")
            except UnicodeDecodeError as exc:  # exc.object: the bytes held back from the last chunk, then this one
                start = offset - (len(exc.object) - len(chunk)) + exc.start
                line = lines + exc.object[: exc.start].decode(exc.encoding, "replace").count("\n") + 1
                return UserError(
                    f"{source}: not {ENCODINGS[encoding]} text: byte {exc.object[exc.start]:#04x} on line {line:,} "
                    f"(byte {start:,} of the file; another encoding, such as Windows' cp1252 or latin-1); save the "
                    "file as UTF-8 (Excel: 'CSV UTF-8')"
                )
            if not chunk:
                return UserError(f"{source}: cannot read as {ENCODINGS[encoding]} text")
            offset += len(chunk)


def _dates(column: pd.Series, where: str) -> pd.Series:
    """The column as dates without a time zone: a date written with an offset (2022-03-28T00:00+02:00) keeps
    the clock time written (2022-03-28 00:00), so offsets that change with summer time, or a zone, shift no date;
    dates written NN/NN/YYYY are read in the one order (day first or month first) that every value allows."""
    dayfirst = False
    if not pd.api.types.is_datetime64_any_dtype(column) and not pd.api.types.is_numeric_dtype(column):  # text
        parts = column.dropna().astype(str).str.extract(r"^\s*(\d{1,2})[/.-](\d{1,2})[/.-]\d{4}\b")
        if len(parts) and parts.notna().all().all():
            first, second = parts[0].astype(int), parts[1].astype(int)
            if not (first > 12).any() and not (second > 12).any():
                example = column.dropna().iloc[0]
                raise UserError(
                    f"{where}: dates such as {example!r} read both as day/month and as month/day, and no value "
                    "tells which; write them as YYYY-MM-DD"
                )
            dayfirst = bool((first > 12).any())
    try:
        try:
            dates = pd.to_datetime(column, dayfirst=dayfirst)
        except ValueError as exc:
            if "mixed timezones" not in str(exc).lower():
                raise
            _one_kind(column, where)
            return pd.to_datetime(column.map(lambda v: v if pd.isna(v) else pd.Timestamp(v).tz_localize(None)))
    except (ValueError, TypeError) as exc:
        _one_kind(column, where)
        raise UserError(f"{where} does not hold dates: {_first_bad_date(column, exc)}") from None
    return dates.dt.tz_localize(None) if isinstance(dates.dtype, pd.DatetimeTZDtype) else dates


def _one_kind(column: pd.Series, where: str) -> None:
    """Raise a UserError naming a row of each where the column mixes dates with a time zone or offset and dates
    without one (pandas' own text named a format string); the clock time of the one and local time of the other
    need not agree. Values that are no date are left to _first_bad_date."""
    first: dict[bool, tuple[int, object]] = {}  # zoned or not → the first (row, value) of that kind
    for row, value in enumerate(column, start=2):  # row 1 is the header
        if pd.isna(value):
            continue
        try:
            zoned = pd.Timestamp(value).tzinfo is not None
        except (ValueError, TypeError):
            continue
        first.setdefault(zoned, (row, value))
        if len(first) == 2:
            (zoned_row, with_zone), (plain_row, without) = first[True], first[False]
            raise UserError(
                f"{where} mixes dates with a time zone or offset, {with_zone!r} (row {zoned_row}), and dates "
                f"without one, {without!r} (row {plain_row}); expected every date written one way: all with their "
                "offset or all without"
            )


def _first_bad_date(column: pd.Series, exc: Exception) -> str:
    """The first value of `column` that is no date, with its row (pandas' own text suggests arguments of its
    to_datetime, which the user cannot pass), e.g. "'2022-02-31' (row 32): day is out of range for month"."""
    for row, value in enumerate(column, start=2):  # row 1 is the header
        if pd.isna(value):
            continue
        try:
            pd.to_datetime(value)
        except (ValueError, TypeError) as one:
            reason = str(one).split(". You might want")[0].split("\n")[0]
            return f"{value!r} (row {row}) is not a date ({reason}); expected dates such as 2022-01-31"
    quoted = re.match(r'time data "(.*?)" doesn', str(exc))
    found = np.flatnonzero((column.astype(str) == quoted[1]).to_numpy()) if quoted else np.array([], dtype=int)
    if quoted and len(found):  # every value a date alone: written in more than one way
        row = int(found[0]) + 2
        return (
            f"dates written in more than one way, {column.iloc[0]!r} (row 2) and {quoted[1]!r} (row {row}); "
            "write every date one way, best YYYY-MM-DD"
        )
    return str(exc).split(". You might want")[0]
