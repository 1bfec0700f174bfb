"""How a forecast row's values are written in the run's store and the forecast cache: the point forecast and
its sample paths as float64 bytes (store schema v4; the JSON text of stores v1–v3 is still read), the cache's
point forecast as JSON text. NumPy and json only: the cache and the export read these without the store."""

from __future__ import annotations

import json

import numpy as np

FLOAT64 = "<f8"  # little-endian float64: the same bytes on every machine


def forecast_bytes(forecasts: np.ndarray) -> list[bytes]:
    """Per row [d] its float64 bytes, as the store (schema v4) keeps a point forecast."""
    rows = np.ascontiguousarray(forecasts, dtype=FLOAT64)
    return [row.tobytes() for row in rows]


def forecast_values(stored: bytes | str) -> np.ndarray:
    """A stored point forecast's values [d]: its float64 bytes (schema v4) or the JSON text of a v1–v3 store."""
    if isinstance(stored, str):
        return np.array(json.loads(stored), dtype=np.float64)
    return np.frombuffer(stored, dtype=FLOAT64).astype(np.float64)


def samples_to_bytes(samples: np.ndarray) -> bytes:
    return np.ascontiguousarray(samples, dtype=FLOAT64).tobytes()


def samples_from_bytes(blob: bytes, horizon: int) -> np.ndarray:
    return np.frombuffer(blob, dtype=FLOAT64).reshape(-1, horizon)
