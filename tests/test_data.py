"""Loaders and windows: embedded data, CSV wide + YAML attributes, parquet long, windows arithmetic."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.config import DataConfig, default_data
from causalrate.data import make_windows
from causalrate.data.loaders import load_dataset
from causalrate.errors import UserError
from tests.conftest import synthetic_long_csv


def test_embedded_quickstart_data():
    ds = load_dataset(default_data(), base_dir=Path("."), min_length=100)
    assert [s.id for s in ds.series] == ["AAPL", "MSFT", "MRK", "PFE", "JPM", "BAC"]
    aapl = ds.series[0]
    assert aapl.attributes == {"company": "Apple Inc.", "industry": "Technology", "sector": "Information Technology"}
    assert str(aapl.dates[0]) == "2022-01-03" and str(aapl.dates[-1]) == "2022-12-28"
    assert aapl.values.size == 249 and np.isfinite(aapl.values).all()
    assert {s.attributes["industry"] for s in ds.series} == {"Technology", "Pharmaceuticals", "Banking"}
    assert ds.content_hash() == load_dataset(default_data(), base_dir=Path("."), min_length=100).content_hash()


def test_wide_csv_with_attribute_mapping(tmp_path):
    dates = pd.bdate_range("2022-01-03", periods=30)
    pd.DataFrame({"day": dates, "X": np.arange(30.0) + 1, "Y": np.arange(30.0) * 2 + 5}).to_csv(
        tmp_path / "w.csv", index=False
    )
    cfg = DataConfig(
        source="csv",
        path="w.csv",
        date_column="day",
        start="2022-01-10",
        attributes={"X": {"industry": "I", "company": "x"}, "Y": {"industry": "J", "company": "y"}},
    )
    ds = load_dataset(cfg, base_dir=tmp_path, min_length=10)
    assert [s.id for s in ds.series] == ["X", "Y"]
    assert ds.series[0].values[0] == 6.0  # 2022-01-10 is the 6th business day
    assert ds.series[1].attributes == {"industry": "J", "company": "y"}


def test_parquet_long_layout(tmp_path):
    synthetic_long_csv(tmp_path / "p.csv")
    pd.read_csv(tmp_path / "p.csv", parse_dates=["date"]).to_parquet(tmp_path / "p.parquet")
    cfg = DataConfig(source="parquet", path="p.parquet", layout="long", attribute_columns=["industry", "company"])
    ds = load_dataset(cfg, base_dir=tmp_path, min_length=50)
    assert len(ds.series) == 6 and ds.series[0].attributes == {"industry": "Alpha", "company": "A1"}
    assert ds.attribute_names == ["company", "industry"]


def test_windows_slice_input_and_truth(tmp_path):
    ds = load_dataset(default_data(), base_dir=Path("."), min_length=100)
    w = make_windows(ds, input_length=80, horizon=20, stride=2)
    assert len(w) == 6 * 75  # (249 - 100) // 2 + 1 per series
    i = 7  # AAPL, start 14
    assert w.start[i] == 14
    np.testing.assert_array_equal(w.inputs[i], ds.series[0].values[14:94])
    np.testing.assert_array_equal(w.truth[i], ds.series[0].values[94:114])
    assert w.truth_dates[i, 0] == ds.series[0].dates[94]


@pytest.mark.parametrize("command", ["systems", "perturbations"])
def test_listing_commands(cli, command):
    code, out, _ = cli(command)
    assert code == 0
    expected = (
        ["naive", "arima", "random", "biased", "python"]
        if command == "systems"
        else ["none", "drop_to_zero", "halve", "missing"]
    )
    assert all(name in out for name in expected)


# --- files as users write them (sweep 3): each read right, or refused naming the file and what to do ----------

DATES = pd.bdate_range("2022-01-03", periods=30)
WIDE = pd.DataFrame({"date": DATES.strftime("%Y-%m-%d"), "X": np.arange(30.0) + 1, "Y": np.arange(30.0) * 2 + 5})


def _load(tmp_path: Path, content: bytes, **config) -> list:
    (tmp_path / "w.csv").write_bytes(content)
    ds = load_dataset(DataConfig(source="csv", path="w.csv", **config), base_dir=tmp_path, min_length=10)
    return [(s.id, str(s.dates[0]), float(s.values[-1])) for s in ds.series]


def _with_dates(dates: list[str]) -> bytes:
    return WIDE.assign(date=dates).to_csv(index=False).encode()


EXPECTED = [("X", "2022-01-03", 30.0), ("Y", "2022-01-03", 63.0)]
OFFSETS = [f"{d}T00:00:00{'+01:00' if i < 10 else '+02:00'}" for i, d in enumerate(WIDE["date"])]  # summer time


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (WIDE.to_csv(index=False).encode("utf-16"), "UTF-16 with its mark (Excel's Unicode text): was a decode error"),
        (b"\xef\xbb\xbf" + WIDE.to_csv(index=False).encode(), "UTF-8 with a byte-order mark"),
        (WIDE.rename(columns={"X": "NA", "Y": "nan"}).to_csv(index=False).encode(), "series named NA and nan"),
        (  # Excel's export of a wider sheet: "the header repeats column(s) ['nan']"
            "".join(f"{line},,\n" for line in WIDE.to_csv(index=False).splitlines()).encode(),
            "trailing separators: empty columns without a name",
        ),
        (_with_dates(OFFSETS), "offsets that change with summer time: was pandas' 'Mixed timezones' error"),
        (_with_dates([f"{d}T00:00:00+01:00" for d in WIDE["date"]]), "one offset: was read in UTC, a day early"),
        (_with_dates(list(DATES.strftime("%d/%m/%Y"))), "day first, told by days past 12"),
        (_with_dates(list(DATES.strftime("%m/%d/%Y"))), "month first, told by days past 12"),
    ],
)
def test_files_written_in_other_conventions_are_read_as_meant(tmp_path, content, why):
    names = {"series named NA and nan": ["NA", "nan"]}.get(why, ["X", "Y"])
    assert _load(tmp_path, content) == [(name, *row[1:]) for name, row in zip(names, EXPECTED, strict=True)], why


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("date,Café\n2022-01-03,1\n".encode("latin-1"), "not UTF-8 text: byte 0xe9 on line 1"),
        (WIDE.to_csv(index=False, sep=";").encode(), "the columns are separated by semicolons (';'), not commas"),
        (WIDE.to_csv(index=False, sep="\t").encode(), "the columns are separated by tabs, not commas"),
        (b"date,X,Y\n", "the file holds no rows (only a header)"),
        (b"", "the file is empty; expected a header"),
        (b"date,X,\n2022-01-03,1,2\n", "column(s) [3] hold values but have no name in the header"),
        (b"PAR1\x15\x04" + bytes(50), "this is a parquet file, not CSV text; set data.source: parquet"),
        (  # monthly on the 1st: 01/02/2022 is 1 February or 2 January; read month first: daily, with gaps
            _with_dates([f"01/{m % 12 + 1:02d}/{2020 + m // 12}" for m in range(30)]),
            "dates such as '01/01/2020' read both as day/month and as month/day",
        ),
        (
            _with_dates(["03/01/2022", *WIDE["date"][1:]]),
            "dates written in more than one way, '03/01/2022' (row 2)",
        ),
    ],
)
def test_files_that_cannot_be_read_as_meant_are_refused_saying_why(tmp_path, content, expected):
    with pytest.raises(UserError, match=re.escape(expected)) as refused:
        _load(tmp_path, content)
    assert str(tmp_path / "w.csv") in str(refused.value)


def test_a_bad_byte_past_the_first_mib_is_named_by_its_line_and_offset(tmp_path):
    """The encoding is told from the first MiB: a Latin-1 byte after it ended in the codec's own text ("'utf-8'
    codec can't decode byte 0xe9 in position 5321"); it is named like one in the first MiB, with its offset. A
    UTF-8 character cut by the first MiB's end is no bad byte."""
    rows = [f"{day:%Y-%m-%d},{i % 97}.5\n" for i, day in enumerate(pd.date_range("1800-01-01", periods=105_000))]
    content = ("date,X\n" + "".join(rows)).encode()
    cut = (1 << 20) - 1  # "é" in UTF-8 is two bytes: the first is the MiB's last
    content = content[:cut] + "é".encode() + content[cut + 2 :]
    content += b"2088-01-01,caf\xe9\n"  # a Latin-1 byte at 1.5 MB
    assert len(content) > 1_500_000
    offset = content.index(b"\xe9")
    line = content[:offset].count(b"\n") + 1
    with pytest.raises(UserError) as refused:
        _load(tmp_path, content)
    said = str(refused.value)
    expected = f"{tmp_path / 'w.csv'}: not UTF-8 text: byte 0xe9 on line {line:,} (byte {offset:,} of the file"
    assert said.startswith(expected), said
    assert "codec" not in said and "save the file as UTF-8" in said


@pytest.mark.parametrize(
    "dates",
    [
        [f"2022-01-03 {h:02d}:00:00" + ("+01:00" if h >= 12 else "") for h in range(20)],
        [f"2022-01-03T{h:02d}:00:00" + ("Z" if h < 12 else "") for h in range(20)],
    ],
)
def test_dates_with_and_without_a_time_zone_in_one_column_are_refused_naming_one_of_each(tmp_path, dates):
    """pandas' own text ("unconverted data remains when parsing with format ...", "dates written in more than one
    way") said neither what is mixed nor what to write: one row of each kind and what is expected."""
    frame = pd.DataFrame({"date": dates, "X": np.arange(len(dates)) + 1.0})
    with pytest.raises(UserError) as refused:
        _load(tmp_path, frame.to_csv(index=False).encode())
    said = str(refused.value)
    aware = next(i for i, d in enumerate(dates) if d.endswith(("Z", "+01:00")))
    naive = next(i for i, d in enumerate(dates) if not d.endswith(("Z", "+01:00")))
    assert said.startswith(f"{tmp_path / 'w.csv'}: column 'date' mixes dates with a time zone"), said
    assert f"{dates[aware]!r} (row {aware + 2})" in said and f"{dates[naive]!r} (row {naive + 2})" in said
    assert "unconverted" not in said and "all with their offset or all without" in said


def test_long_layout_ids_and_attributes_are_kept_as_written(tmp_path):
    """NA (North America), NULL, 007 and 7: pandas read the first two as missing (a traceback, or the series
    dropped) and 007 as the number 7 (merged with '7': 'duplicate dates' of series np.float64(7.0))."""
    ids = {"NA": "NA", "NULL": "EU", "007": "NA", "7": ""}
    rows = [
        pd.DataFrame({"unique_id": sid, "ds": DATES, "y": np.arange(30.0) + k, "region": region})
        for k, (sid, region) in enumerate(ids.items())
    ]
    frame = pd.concat(rows).astype({"region": object})
    frame.loc[frame["unique_id"] == "7", "region"] = ["EU"] + [""] * 29  # an attribute given once is enough
    content = frame.to_csv(index=False).encode()
    (tmp_path / "w.csv").write_bytes(content)
    ds = load_dataset(DataConfig(source="csv", path="w.csv", layout="long"), base_dir=tmp_path, min_length=10)
    assert sorted((s.id, s.attributes["region"], s.values[0]) for s in ds.series) == [
        ("007", "NA", 2.0), ("7", "EU", 3.0), ("NA", "NA", 0.0), ("NULL", "EU", 1.0)
    ]  # fmt: skip
    (tmp_path / "w.csv").write_bytes(content.replace(b"\n007,", b"\n,", 1))
    with pytest.raises(UserError, match=r"column 'unique_id' is empty at row \d+; every row names its series"):
        load_dataset(DataConfig(source="csv", path="w.csv", layout="long"), base_dir=tmp_path, min_length=10)
