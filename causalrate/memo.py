"""A content-addressed memo of the causal stage's costliest pure results, kept in the run's store.

`assess` fills it; `causalrate rate` reads it, so a re-rate with other levels, systems or scores does
not refit the fragility map, its meta-learners, dowhy's refuters or identification. A result is found
again only under the same key: the digest of every input the computation receives (arrays, frames,
settings, dataclasses: `fingerprint` refuses anything it cannot hash completely), the source of the
causalrate package and of the study's plugins, and the versions of the libraries that compute. Change
any of them and the memo misses, so it can never return a stale number; it only saves time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import sqlite3
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from pydantic import BaseModel

from causalrate.plugins import MODULE_PREFIX, source_digest
from causalrate.versions import installed

T = TypeVar("T")
TABLE = "CREATE TABLE IF NOT EXISTS analysis_memo (key TEXT PRIMARY KEY, kind TEXT NOT NULL, value TEXT NOT NULL)"
LIBRARIES = ("numpy", "pandas", "scipy", "scikit-learn", "statsmodels", "networkx", "dowhy", "causalml")


def _identity(value: Any) -> Any:
    """The default encode and decode: the value is stored as it is."""
    return value


class RunCache:
    """In-memory results of one run's analysis that cannot be stored (dowhy estimands, matching plans):
    `cache.get(kind, key, compute)` computes once per (kind, key) for as long as this object lives — one
    `assess` or `rate` (held by its Memo), never the process. The key is fingerprinted like the memo's, so it
    must hold every input that decides the value (`fingerprint` refuses a type it cannot hash completely).
    `limit` bounds a kind's entries (the oldest half is dropped when it is reached)."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[bytes, object]] = {}

    def get(self, kind: str, key: tuple, compute: Callable[[], T], *, limit: int | None = None) -> T:
        h = hashlib.sha256(kind.encode() + b"\x00")
        fingerprint(key, h)
        digest = h.digest()
        entries = self._entries.setdefault(kind, {})
        if digest not in entries:
            if limit is not None and len(entries) >= limit:
                for old in list(entries)[: max(len(entries) // 2, 1)]:
                    del entries[old]
            entries[digest] = compute()
        return entries[digest]  # type: ignore[return-value]

    def __len__(self) -> int:
        return sum(map(len, self._entries.values()))


class Memo:
    """`memo(kind, inputs, compute, encode, decode)`: compute() unless (kind, inputs, code, versions) was stored.

    `memo.run` is the run's in-memory RunCache (results that are not stored), created with the memo: one per
    `assess` or `rate`, passed down with it."""

    def __init__(
        self, conn: sqlite3.Connection | None, *, salt: bytes, writable: bool, run: RunCache | None = None
    ) -> None:
        self.conn, self.salt, self.writable = conn, salt, writable
        self.hits = self.misses = 0
        self.run = RunCache() if run is None else run

    @classmethod
    def off(cls) -> Memo:
        """Always computes, stores nothing: analyses without a run store (tests, benchmarks). Its RunCache
        lives as long as it does (one analysis)."""
        return cls(None, salt=b"", writable=False)

    @classmethod
    def open(cls, store: Path, *, plugins: Iterable[str] = (), writable: bool) -> Memo:
        """The memo inside a run's forecasts.sqlite; read-only leaves the file untouched (a re-rate in place)."""
        if writable:
            conn = sqlite3.connect(store)
            conn.execute(TABLE)
        else:
            conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'analysis_memo'").fetchone():
                conn.close()  # a run made before the memo existed: compute everything
                conn = None
        return cls(conn, salt=code_salt(tuple(plugins)), writable=writable)

    def __call__(
        self,
        kind: str,
        inputs: tuple,
        compute: Callable[[], T],
        *,
        encode: Callable[[T], Any] = _identity,
        decode: Callable[[Any], T] = _identity,
    ) -> T:
        if self.conn is None:
            return compute()
        h = hashlib.sha256(self.salt + kind.encode() + b"\x00")
        fingerprint(inputs, h)
        key = h.hexdigest()
        row = self.conn.execute("SELECT value FROM analysis_memo WHERE key = ?", (key,)).fetchone()
        if row is not None:
            self.hits += 1
            return decode(json.loads(row[0]))
        self.misses += 1
        value = compute()
        if self.writable:
            stored = json.dumps(encode(value), allow_nan=True, separators=(",", ":"), default=_plain)
            self.conn.execute("INSERT OR REPLACE INTO analysis_memo VALUES (?, ?, ?)", (key, kind, stored))
        return value

    def close(self) -> None:
        if self.conn is not None:
            if self.writable:
                self.conn.commit()
            self.conn.close()
            self.conn = None

    def __enter__(self) -> Memo:
        return self

    def __exit__(self, *_) -> None:
        self.close()


class _Nothing(RunCache):
    """A RunCache that keeps nothing: the default argument `OFF`'s, so no module-level object holds results."""

    def get(self, kind: str, key: tuple, compute: Callable[[], T], *, limit: int | None = None) -> T:
        return compute()


OFF = Memo(None, salt=b"", writable=False, run=_Nothing())  # a default argument: computes all, keeps nothing


def _plain(value: object) -> object:
    """numpy scalars and arrays as the Python values json writes (np.float64 already is a float)."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"memo: cannot store a {type(value).__name__}")


def code_salt(plugins: tuple[str, ...]) -> bytes:
    """The digest of what computes: causalrate's own source, the loaded plugins' source (plugin files and
    the study's plugin modules), Python and library versions."""
    h = hashlib.sha256(platform.python_version().encode())
    h.update(json.dumps(installed(LIBRARIES)).encode())
    package = Path(__file__).parent
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\x00")
        h.update(path.read_bytes())
    for name in sorted(m for m in sys.modules if m.startswith(MODULE_PREFIX) or m in plugins):
        h.update(name.encode() + b"\x00")  # a plugin file's digest is that of the bytes it ran
        h.update((source_digest(sys.modules[name]) or "missing").encode())
    return h.digest()


def fingerprint(obj: object, h: hashlib._Hash) -> None:
    """Feed `obj`'s complete content into `h`; a type it cannot hash completely is a TypeError, never a guess.

    The common leaves (None, bool, int, float, str, arrays) are told by their exact type first and a
    dataclass's fields are listed once per class: a re-rate's keys hold ~1,300 Estimates (~80,000 values),
    so how fast each value is recognised is most of the time; what is fed is the same either way.
    """
    kind = type(obj)
    if kind in _SCALARS:
        h.update(f"{kind.__name__}:{obj!r};".encode())
    elif kind is np.ndarray:
        _array(obj, h)  # type: ignore[arg-type]
    elif kind in _DATACLASSES or (dataclasses.is_dataclass(obj) and not isinstance(obj, type)):
        h.update(f"{kind.__module__}.{kind.__qualname__};".encode())
        for name in _DATACLASSES.get(kind) or _fields(kind):
            fingerprint(name, h)
            fingerprint(getattr(obj, name), h)
    elif obj is None or isinstance(obj, bool | int | float | str):
        h.update(f"{kind.__name__}:{obj!r};".encode())
    elif isinstance(obj, np.generic):
        fingerprint(obj.item(), h)
    elif isinstance(obj, np.ndarray):
        _array(obj, h)
    elif isinstance(obj, pd.DataFrame):
        h.update(f"df:{len(obj)};".encode())
        fingerprint(obj.index, h)
        for name in obj.columns:
            fingerprint(name, h)
            fingerprint(obj[name], h)
    elif isinstance(obj, pd.Series | pd.Index):
        h.update(f"{type(obj).__name__}:{obj.dtype};".encode())
        if obj.dtype.kind in "biufcmM":
            h.update(np.ascontiguousarray(obj.to_numpy()).tobytes())
            return
        # categorical or text: the sequence exactly, as codes into its categories / distinct values (-1: missing)
        if isinstance(obj.dtype, pd.CategoricalDtype):
            codes, uniques = (obj.array.codes if isinstance(obj, pd.Series) else obj.codes), obj.dtype.categories
        else:
            codes, uniques = pd.factorize(obj)
        h.update(np.asarray(codes, dtype=np.int64).tobytes() + b"\x1e")
        h.update("\x1f".join(repr(v) for v in uniques.tolist()).encode())
    elif isinstance(obj, list | tuple):
        h.update(f"{type(obj).__name__}:{len(obj)};".encode())
        for item in obj:
            fingerprint(item, h)
    elif isinstance(obj, dict):
        h.update(f"dict:{len(obj)};".encode())
        for key in sorted(obj, key=repr):
            fingerprint(key, h)
            fingerprint(obj[key], h)
    elif isinstance(obj, BaseModel):
        h.update(f"{type(obj).__qualname__}:{obj.model_dump_json()};".encode())
    else:
        raise TypeError(f"memo: cannot fingerprint a {type(obj).__name__}")


_SCALARS = frozenset({type(None), bool, int, float, str})
_DATACLASSES: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, listed once per class


def _fields(kind: type) -> tuple[str, ...]:
    names = _DATACLASSES[kind] = tuple(field.name for field in dataclasses.fields(kind))
    return names


def _array(obj: np.ndarray, h: hashlib._Hash) -> None:
    h.update(f"nd:{obj.dtype.str}:{obj.shape};".encode())
    if obj.dtype.kind == "O":
        fingerprint(obj.tolist(), h)
    else:
        h.update(np.ascontiguousarray(obj).tobytes())
