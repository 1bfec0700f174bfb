"""The run's SQLite store: every forecast row is written soon after its batch completes.

WAL journal. Outside `buffered()` each batch is one transaction; inside it (the forecast stage) finished
batches are gathered and written together, one transaction per FLUSH_ROWS rows or FLUSH_SECONDS, so a
crash loses at most those and the batches in flight (a resumed run forecasts them again).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from causalrate.errors import UserError
from causalrate.forecast.encoding import forecast_bytes, forecast_values, samples_from_bytes, samples_to_bytes
from causalrate.redact import scrub, scrub_optional

SCHEMA_VERSION = "causalrate/forecasts-v4"  # v2: paths and per-row info; v3: perturbed offsets; v4: forecast bytes
FLUSH_ROWS = 4096  # buffered rows written in one transaction
FLUSH_SECONDS = 0.5  # at most this long between a batch's end and its rows' transaction (while batches come)
TABLES = ("meta", "series", "windows", "forecasts")  # every schema's (analysis_memo is made when missing)
READ_ONLY_SCHEMAS = (
    "causalrate/forecasts-v1",
    "causalrate/forecasts-v2",
    "causalrate/forecasts-v3",
)  # older runs can still be re-rated and exported (their forecasts are JSON text: encoding.forecast_values)


@dataclass(frozen=True)
class StoredWindow:
    """One stored window: its clean input and the truth it is scored against."""

    id: int
    series: str
    start: int
    first_forecast_date: str
    input: np.ndarray
    truth: np.ndarray


class ForecastStore:
    """forecasts.sqlite: meta, series (with attributes), windows (with truth) and forecasts.

    Metric columns are stored as `m_<metric>`; only this class knows that: its read methods
    take and return metrics by name.
    """

    def __init__(self, path: Path, *, metrics: Sequence[str], readonly: bool = False) -> None:
        self.path = path
        self.metrics = list(metrics)
        self.readonly = readonly
        if readonly:  # re-rating and export must not touch the run's file
            self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        else:
            self.conn = sqlite3.connect(path)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self._rows: list[tuple] | None = None  # inside buffered(): rows not yet written
        self._since = 0.0

    @classmethod
    def open(cls, path: Path, *, metrics: Sequence[str], readonly: bool = False) -> ForecastStore:
        """An existing run's store; a corrupt or foreign file is a clear UserError."""
        if not path.is_file():
            raise UserError(f"{path}: no forecast store here")
        try:
            store = cls(path, metrics=metrics, readonly=readonly)
            (schema,) = store.conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            tables = {name for (name,) in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except (sqlite3.DatabaseError, TypeError) as exc:
            raise UserError(f"{path}: not a causalrate forecast store ({exc})") from None
        lost = sorted(set(TABLES) - tables)
        if lost:  # a file edited or damaged by hand: every reader's query would be a traceback
            store.conn.close()
            raise UserError(f"{path}: not a whole causalrate forecast store (no table {', '.join(lost)})")
        readable = (SCHEMA_VERSION, *READ_ONLY_SCHEMAS) if readonly else (SCHEMA_VERSION,)
        if schema not in readable:
            raise UserError(f"{path}: store schema {schema!r}; this causalrate reads {SCHEMA_VERSION!r}")
        return store

    def get_meta(self, key: str) -> object:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def done(self) -> set[tuple[str, int, str]]:
        """(system, window, perturbation) of every stored forecast row: what a resumed run skips."""
        return {(s, int(w), p) for s, w, p in self.conn.execute("SELECT system, window, perturbation FROM forecasts")}

    @classmethod
    def create(cls, path: Path, *, metrics: Sequence[str]) -> ForecastStore:
        store = cls(path, metrics=metrics)
        metric_cols = "".join(f", {_col(m)} REAL" for m in store.metrics)
        with store.conn:
            store.conn.executescript(
                f"""
                CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE series (id TEXT PRIMARY KEY, attributes TEXT NOT NULL);
                CREATE TABLE windows (
                    window INTEGER PRIMARY KEY, series TEXT NOT NULL, start INTEGER NOT NULL,
                    first_forecast_date TEXT NOT NULL, input TEXT NOT NULL, truth TEXT NOT NULL);
                CREATE TABLE forecasts (
                    system TEXT NOT NULL, window INTEGER NOT NULL, perturbation TEXT NOT NULL,
                    forecast BLOB, error TEXT, seconds REAL NOT NULL, samples BLOB, info TEXT,
                    offsets TEXT{metric_cols},
                    PRIMARY KEY (system, window, perturbation));
                """
            )
            store.conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        return store

    def put_meta(self, key: str, value: object) -> None:
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value, sort_keys=True)))

    def put_windows(self, rows: Iterable[tuple[int, str, int, str, list[float], list[float]]]) -> None:
        """(window id, series, start, first forecast date, clean input, truth) per window."""
        with self.conn:
            self.conn.executemany(
                "INSERT INTO windows VALUES (?, ?, ?, ?, ?, ?)",
                [(w, s, st, d, json.dumps(x), json.dumps(t)) for w, s, st, d, x, t in rows],
            )

    def put_series(self, rows: Iterable[tuple[str, dict[str, str]]]) -> None:
        with self.conn:
            self.conn.executemany(
                "INSERT INTO series VALUES (?, ?)", [(s, json.dumps(a, sort_keys=True)) for s, a in rows]
            )

    def put_forecasts(
        self,
        *,
        system: str,
        window_ids: np.ndarray,
        perturbations: Sequence[str],
        forecasts: np.ndarray,
        errors: Sequence[str | None],
        seconds: np.ndarray,
        metrics: dict[str, np.ndarray],
        samples: Sequence[np.ndarray | None],
        info: Sequence[dict | None],
        offsets: Sequence[list[int]],
    ) -> None:
        """Write one batch in one transaction (inside `buffered()`: with the batches before it), all of it or
        none of it. `seconds`: per row.

        The point forecast ([d]) and sample paths ([s, d], C order) are stored as float64 bytes;
        `offsets`: per row the perturbed input offsets (0 = oldest; [] for the control).
        """
        n = len(window_ids)
        failed = np.array([e is not None for e in errors], dtype=bool)
        values = np.empty((n, len(self.metrics)))
        for j, m in enumerate(self.metrics):
            values[:, j] = metrics[m]
        cells = values.tolist()  # the metric columns, NULL where not finite or the row failed
        for i, j in zip(*np.nonzero(~np.isfinite(values) | failed[:, None]), strict=True):
            cells[i][j] = None
        points = [None if bad else point for point, bad in zip(forecast_bytes(forecasts), failed.tolist(), strict=True)]
        paths = [None if failed[i] or s is None else samples_to_bytes(s) for i, s in enumerate(samples)]
        written: dict[int, str] = {}  # rows often share one offsets list (placement.offsets_of): its text once
        offset_texts = [
            written.get(id(o)) or written.setdefault(id(o), "[" + ", ".join(map(str, map(int, o))) + "]")
            for o in offsets
        ]  # as json.dumps writes each list
        facts = [None if i is None else scrub(json.dumps(i, sort_keys=True)) for i in info]
        columns = zip(
            np.asarray(window_ids, dtype=np.int64).tolist(),
            perturbations,
            points,
            map(scrub_optional, errors),  # the boundary every stored error text crosses
            np.asarray(seconds, dtype=np.float64).tolist(),
            paths,
            facts,
            offset_texts,
            cells,
            strict=True,
        )
        rows = [(system, w, p, f, e, t, s, i, o, *c) for w, p, f, e, t, s, i, o, c in columns]
        if self._rows is None:
            self._write(rows)
            return
        self._rows.extend(rows)
        if len(self._rows) >= FLUSH_ROWS or time.monotonic() - self._since >= FLUSH_SECONDS:
            self.flush()

    def _write(self, rows: list[tuple]) -> None:
        marks = ", ".join("?" * (9 + len(self.metrics)))
        with self.conn:
            self.conn.executemany(f"INSERT INTO forecasts VALUES ({marks})", rows)

    def flush(self) -> None:
        """Write the buffered rows now (one transaction)."""
        if self._rows:
            self._write(self._rows)
            self._rows.clear()
        self._since = time.monotonic()

    @contextlib.contextmanager
    def buffered(self) -> Iterator[None]:
        """Gather put_forecasts' rows and write them in bulk (see the module); all written on leaving, also on
        an error or Ctrl-C (the finished batches are kept)."""
        self._rows, self._since = [], time.monotonic()
        try:
            yield
        finally:
            self.flush()
            self._rows = None

    def failed_systems(self) -> dict[str, str]:
        """Systems none of whose forecasts succeeded, each with its first error (in the order rows were written)."""
        query = """
            SELECT system, (SELECT error FROM forecasts AS f WHERE f.system = g.system ORDER BY rowid LIMIT 1)
            FROM forecasts AS g GROUP BY system HAVING SUM(error IS NULL) = 0 ORDER BY system
        """
        return dict(self.conn.execute(query).fetchall())

    def forecasts(self, *, samples: bool = False) -> pd.DataFrame:
        """All forecast rows joined with their window's series and start, sorted for determinism.

        Sample paths (large) are read only when asked for, as [s][d] lists; without them `distribution`
        says which rows have paths or quantiles (a point forecast has neither). Runs before v3 have no
        `offsets`: the column is there, empty (None).
        """
        names = [r[1] for r in self.conn.execute("PRAGMA table_info(forecasts)") if samples or r[1] != "samples"]
        flag = "" if samples else ", f.samples IS NOT NULL AS distribution"
        query = (
            f"SELECT {', '.join(f'f.[{n}]' for n in names)}{flag}, w.series, w.start "
            "FROM forecasts f JOIN windows w USING (window) ORDER BY f.system, f.perturbation, f.window"
        )
        metric_columns = {n: "float64" for n in names if n.startswith("m_")}  # all-NULL columns would be objects
        frame = pd.read_sql_query(query, self.conn, dtype=metric_columns)
        if "offsets" not in frame:
            frame["offsets"] = None
        if not samples:
            frame["distribution"] = frame["distribution"].astype(bool)
        if samples:
            frame["samples"] = [
                None if blob is None else samples_from_bytes(blob, forecast_values(fc).size).tolist()
                for blob, fc in zip(frame["samples"], frame["forecast"], strict=True)
            ]
        return frame.rename(columns={f"m_{m}": m for m in self.metrics})

    @property
    def has_offsets(self) -> bool:
        """Runs before forecasts-v3 stored no perturbed offsets."""
        return "offsets" in {r[1] for r in self.conn.execute("PRAGMA table_info(forecasts)")}

    def largest_harm(self, *, system: str, control: str, metric: str, among: Sequence[str]) -> pd.Series | None:
        """The (window, perturbation), perturbation among `among`, that raised `metric` most over the clean
        forecast, as window, perturbation, harm (and offsets); None when no perturbation raised it."""
        col = _col(metric)
        marks = ", ".join("?" * len(among))
        offsets = ", p.offsets" if self.has_offsets else ""
        rows = self._query(  # the ranking first, without the forecast texts: sorting them would copy every one
            f"SELECT p.window, p.perturbation, p.{col} - c.{col} AS harm{offsets} "
            "FROM forecasts p JOIN forecasts c ON c.system = p.system AND c.window = p.window AND c.perturbation = ? "
            f"WHERE p.system = ? AND p.perturbation IN ({marks}) AND p.{col} IS NOT NULL AND c.{col} IS NOT NULL "
            "ORDER BY harm DESC, p.perturbation, p.window LIMIT 1",
            (control, system, *among),
        )
        if rows.empty or not rows.iloc[0].harm > 0:
            return None
        return rows.iloc[0]

    def forecast_values(self, *, system: str, window: int, perturbations: Sequence[str]) -> dict[str, np.ndarray]:
        """Per perturbation: the system's point forecast of one window (successful forecasts only)."""
        marks = ", ".join("?" * len(perturbations))
        rows = self.conn.execute(
            f"SELECT perturbation, forecast FROM forecasts WHERE system = ? AND window = ? AND perturbation IN "
            f"({marks}) AND forecast IS NOT NULL",
            (system, int(window), *perturbations),
        )
        return {p: forecast_values(f) for p, f in rows}

    def window(self, window: int) -> StoredWindow:
        series, start, first, inputs, truth = self.conn.execute(
            "SELECT series, start, first_forecast_date, input, truth FROM windows WHERE window = ?", (int(window),)
        ).fetchone()
        return StoredWindow(
            int(window), series, int(start), first, np.array(json.loads(inputs), float), np.array(json.loads(truth))
        )

    def windows_table(self) -> pd.DataFrame:
        """Per window id: first_forecast_date, input and truth (as lists)."""
        frame = self._query("SELECT window, first_forecast_date, input, truth FROM windows")
        for col in ("input", "truth"):
            frame[col] = frame[col].map(json.loads)
        return frame

    def series_attributes(self) -> pd.DataFrame:
        """Per series id: its attributes, one column each."""
        frame = self._query("SELECT id AS series, attributes FROM series")
        attributes = pd.DataFrame([json.loads(a) for a in frame.pop("attributes")], index=frame.index)
        return pd.concat([frame, attributes], axis=1)

    def failures(self, system: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Per perturbation: total and failed forecasts; and the 5 most frequent error texts with their counts."""
        per = self._query(
            "SELECT perturbation, count(*) AS total, sum(error IS NOT NULL) AS failed FROM forecasts "
            "WHERE system = ? GROUP BY perturbation ORDER BY perturbation",
            (system,),
        )
        examples = self._query(
            "SELECT error, count(*) AS n FROM forecasts WHERE system = ? AND error IS NOT NULL "
            "GROUP BY error ORDER BY n DESC, error LIMIT 5",
            (system,),
        )
        return per, examples

    def copy_to(self, path: Path) -> None:
        """The whole store into a new file (SQLite's online backup): a re-rated copy keeps its own forecasts."""
        with contextlib.closing(sqlite3.connect(path)) as target:
            self.conn.backup(target)

    def _query(self, sql: str, params: tuple = ()) -> pd.DataFrame:
        return pd.read_sql_query(sql, self.conn, params=params)

    def close(self) -> None:
        """Checkpoint and leave WAL mode, so a closed run is one self-contained file (no -wal/-shm)."""
        if self.readonly:
            self.conn.close()
            return
        with contextlib.suppress(sqlite3.OperationalError):  # another process still reads it: SQLite tidies later
            self.conn.execute("PRAGMA journal_mode=DELETE")
        self.conn.close()


def _col(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise UserError(f"metric name {name!r} must be letters, digits and underscores to be stored")
    return f'"m_{name}"'
