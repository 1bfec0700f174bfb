"""Issue 43: the engine's faster paths write exactly what the plain ones did (seeds, store texts, offsets)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from causalrate.forecast.encoding import forecast_bytes, forecast_values
from causalrate.forecast.store import ForecastStore
from causalrate.perturb.placement import offsets_mask, offsets_of
from causalrate.seeding import row_seeds, stable_seed


def plain_seed(*parts: object) -> int:
    """The seed as first defined: blake2b of json.dumps(parts, default=str)."""
    digest = hashlib.blake2b(json.dumps(parts, default=str).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def test_row_seeds_equal_one_seed_per_row_from_the_whole_parts():
    keys = [("AAPL", 12, "P1"), ('é"x', -3, "P3+ffill"), (), (1.5, None, True, np.int64(4), "a"), ("\n\x00", 2**70)]
    keys += [(True, 1), (False,), (np.str_("AAPL"), 3), ("a", np.int64(5))]  # look like str/int, are written otherwise
    for prefix in [(), (0,), (7, "naive"), (0, "perturb", "P1"), (np.int64(3),)]:
        want = [plain_seed(*prefix, *key) for key in keys]
        assert row_seeds(*prefix, keys=keys).tolist() == want
        assert [stable_seed(*prefix, *key) for key in keys] == want


def test_forecast_bytes_give_back_every_bit_and_v3_texts_read_alike():
    """Schema v4 keeps a point forecast as float64 bytes; a v1–v3 store's JSON text reads as the same values."""
    rows = np.array([[1.0, -0.0, 1e-300, 123456.789, 1 / 3], [np.nan, np.inf, 2.0, 0.1, 5e22]])
    stored = forecast_bytes(rows)
    assert stored == [np.asarray(row, dtype="<f8").tobytes() for row in rows]
    for row, blob in zip(rows, stored, strict=True):
        back = forecast_values(blob)
        assert back.dtype == np.float64 and back.tobytes() == row.tobytes()  # -0.0 and NaN's bits too
        assert forecast_values(json.dumps(row.tolist())).tobytes() == row.tobytes()
    assert forecast_bytes(rows[:, :0]) == [b"", b""] and forecast_values(b"").size == 0


def test_offsets_of_lists_each_rows_marked_offsets():
    mask = offsets_mask(np.array([0, 3, 9, 1]), period=4, input_length=10)
    mask[2] = False
    assert offsets_of(mask) == [np.flatnonzero(row).tolist() for row in mask]
    assert offsets_of(mask[:0]) == []


def test_buffered_store_writes_every_row_on_leaving_even_after_an_error(tmp_path):
    store = ForecastStore.create(tmp_path / "f.sqlite", metrics=["mae", "rmax"])

    def put(window: int, error: str | None) -> None:
        store.put_forecasts(
            system="s",
            window_ids=np.array([window]),
            perturbations=["P1"],
            forecasts=np.array([[1.5, 0.1]]),
            errors=[error],
            seconds=np.array([0.25]),
            metrics={"mae": np.array([0.5]), "rmax": np.array([np.inf])},
            samples=[None],
            info=[None],
            offsets=[[3, np.int64(7)]],
        )

    with pytest.raises(RuntimeError), store.buffered():
        put(0, None)
        put(1, "boom")
        raise RuntimeError
    rows = store.conn.execute("SELECT window, forecast, error, m_mae, m_rmax, offsets FROM forecasts ORDER BY window")
    stored = forecast_bytes(np.array([[1.5, 0.1]]))[0]
    assert rows.fetchall() == [(0, stored, None, 0.5, None, "[3, 7]"), (1, None, "boom", None, None, "[3, 7]")]
    put(2, None)  # outside buffered(): written at once
    assert store.done() == {("s", 0, "P1"), ("s", 1, "P1"), ("s", 2, "P1")}
