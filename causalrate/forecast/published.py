"""Published reference forecasts (METHOD §7): the reference systems' forecasts on the shipped studies, shipped
with the package like a leaderboard's baseline results, so their ratings are the same on every machine.

Each `published/<study>.npz` holds forecast-cache entries made by `python -m tests.make_reference --forecasts`:
the sha256 cache keys (as 32 bytes, sorted), the point forecasts and the seconds each took, plus the versions
of every library that entered a key. A lookup keys a run's rows as the forecast cache does (`forecast_keys`),
with one substitution: a system's library versions are those the forecasts were published with. ARIMA's
optimiser lands differently per CPU and per statsmodels/scipy release in the 5th digit; the published
forecasts are the reference on every installation, so those versions are held fixed, while everything that
defines the forecast — the system's type, its code `version`, its settings, the exact input after
perturbation and imputation, the horizon, and for the systems that read them the seed, calendar and
attributes — stays in the key (a change misses, and the forecast is made locally). CI recomputes the
published forecasts with the installed libraries (tests/test_published.py) and fails when the ratings move,
so a library release that changes them is caught and the files regenerated. `--no-cache` recomputes them.

`random` is not published: its 32 sample paths per forecast would be ~20 MB per study, and it is reproduced
bit for bit from its seeds on every machine (numpy's PCG64).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

from causalrate.forecast.cache import Cached, forecast_keys
from causalrate.versions import installed

FOLDER = Path(__file__).parent / "published"
# the system classes (identity "type") whose forecasts are published: point forecasts, no samples or info
PUBLISHED_TYPES = ("Naive", "Arima", "Biased", "SeasonalNaive")


class Table:
    """One published file: sorted keys → forecast rows, and the libraries the entries were keyed with."""

    def __init__(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as npz:
            self.keys = npz["keys"]  # [n] S32, sorted
            self.forecasts = npz["forecasts"]  # [n, horizon] float64
            self.seconds = npz["seconds"]  # [n] float32
            self.libraries: dict[str, dict[str, str]] = json.loads(str(npz["libraries"]))  # type → name → version

    def find(self, keys: list[bytes]) -> dict[int, int]:
        """{position in `keys`: row} for the keys this table holds."""
        wanted = np.array(keys, dtype="S32")
        at = np.searchsorted(self.keys, wanted).clip(max=max(len(self.keys) - 1, 0))
        hit = np.flatnonzero(self.keys[at] == wanted) if len(self.keys) else np.array([], dtype=int)
        return {int(i): int(at[i]) for i in hit}


@cache
def tables() -> tuple[Table, ...]:
    """Every published file of the package, read once per process."""
    return tuple(Table(path) for path in sorted(FOLDER.glob("*.npz")))


def published_forecasts(
    identity: dict,
    inputs: np.ndarray,
    horizon: int,
    keys: list[str],
    *,
    seeds: np.ndarray | None = None,
    context: list | None = None,
) -> dict[str, Cached]:
    """The published forecasts among a system's rows, by the rows' own cache `keys` (as a cache lookup returns
    them); `identity`, `inputs`, `seeds` and `context` as given to `forecast_keys` for those keys."""
    if identity.get("type") not in PUBLISHED_TYPES:
        return {}
    found: dict[str, Cached] = {}
    for table in tables():
        if table.forecasts.shape[1] != horizon or identity["type"] not in table.libraries:
            continue
        versions = table.libraries[identity["type"]]
        ours = keys
        if versions != identity.get("libraries", {}):
            ours = forecast_keys(identity | {"libraries": versions}, inputs, horizon, seeds=seeds, context=context)
        for i, row in table.find([bytes.fromhex(k) for k in ours]).items():
            found[keys[i]] = Cached(table.forecasts[row].tolist(), float(table.seconds[row]), None, None)
    return found


def write_table(path: Path, entries: dict[str, Cached], libraries: dict[str, dict[str, str]]) -> int:
    """Write cache entries (point forecasts of one horizon) as a published file; returns its size in bytes."""
    if any(c.samples is not None or c.info is not None for c in entries.values()):
        raise ValueError("published forecasts are point forecasts: an entry has samples or info")
    order = sorted(entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        keys=np.array([bytes.fromhex(k) for k in order], dtype="S32"),
        forecasts=np.array([entries[k].forecast for k in order], dtype=np.float64),
        seconds=np.array([entries[k].seconds for k in order], dtype=np.float32),
        libraries=np.array(json.dumps(libraries, sort_keys=True)),
    )
    return path.stat().st_size


def libraries_of(system_class: type) -> dict[str, str]:
    """The installed versions of the libraries a system class keys its forecasts with."""
    return installed(getattr(system_class, "libraries", ()))
