"""The content-addressed forecast cache, shared between runs and studies.

A forecast's key is the hash of the system's identity (type, settings, code and library
versions), the exact input it saw (after perturbation and imputation), the horizon, and —
only for systems that use them — the per-forecast seed and the context (attributes, dates).
Only successful forecasts are cached: a failure may be transient and is tried again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from causalrate.errors import UserError
from causalrate.forecast.encoding import samples_from_bytes, samples_to_bytes
from causalrate.paths import cache_root


def default_cache_path() -> Path:
    """forecasts.sqlite in the user's cache folder (`paths.cache_root`)."""
    return cache_root() / "forecasts.sqlite"


def forecast_keys(
    identity: dict,
    inputs: np.ndarray,
    horizon: int,
    *,
    seeds: np.ndarray | None = None,
    context: Sequence[object] | None = None,
) -> list[str]:
    """One sha256 key per row of inputs [b, n]."""
    head = hashlib.sha256(json.dumps(identity, sort_keys=True).encode() + f"|h={horizon}".encode()).digest()
    keys = []
    for i, row in enumerate(np.ascontiguousarray(inputs, dtype=np.float64)):
        h = hashlib.sha256(head)
        h.update(row.tobytes())
        if seeds is not None:
            h.update(int(seeds[i]).to_bytes(8, "little"))
        if context is not None:
            h.update(json.dumps(context[i], sort_keys=True, default=str).encode())
        keys.append(h.hexdigest())
    return keys


@dataclass(frozen=True)
class Cached:
    forecast: list[float]
    seconds: float
    samples: np.ndarray | None  # [s, d]
    info: dict | None


class ForecastCache:
    """cache key → forecast, its sample paths and facts, in one SQLite file (WAL: several runs may share it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(path, timeout=60)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, forecast TEXT NOT NULL, "
                "seconds REAL NOT NULL, samples BLOB, info TEXT)"
            )
        except sqlite3.DatabaseError as exc:
            raise UserError(
                f"forecast.cache: {path} is not a usable causalrate cache ({exc}); "
                "delete it or point forecast.cache elsewhere"
            ) from None

    def get(self, keys: list[str]) -> dict[str, Cached]:
        found = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, forecast, seconds, samples, info in self.conn.execute(
                f"SELECT key, forecast, seconds, samples, info FROM entries WHERE key IN ({marks})", chunk
            ):
                point = json.loads(forecast)
                found[key] = Cached(
                    forecast=point,
                    seconds=seconds,
                    samples=None if samples is None else samples_from_bytes(samples, len(point)),
                    info=None if info is None else json.loads(info),
                )
        return found

    def put(self, rows: Iterable[tuple[str, Cached]], *, replace: bool = False) -> None:
        """Store forecasts; an entry already there is kept, or with `replace` (a refresh) overwritten."""
        with self.conn:
            self.conn.executemany(
                f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO entries VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        key,
                        json.dumps(c.forecast),
                        c.seconds,
                        None if c.samples is None else samples_to_bytes(c.samples),
                        None if c.info is None else json.dumps(c.info, sort_keys=True),
                    )
                    for key, c in rows
                ],
            )

    def close(self) -> None:
        self.conn.close()
