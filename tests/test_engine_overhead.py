"""Issue 43: the engine's faster paths write exactly what the plain ones did (seeds, stored forecasts, offsets,
metrics made in the worker and a chunk at a time), and the store's schema v4 reads v3 runs."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.errors import UserError
from causalrate.forecast.encoding import forecast_bytes, forecast_values
from causalrate.forecast.jobs import BatchResult, Job, Scoring
from causalrate.forecast.metrics import METRIC_ROWS, METRICS, batch_metrics
from causalrate.forecast.store import ForecastStore
from causalrate.forecast.worker import scored
from causalrate.perturb.placement import offsets_mask, offsets_of
from causalrate.seeding import KeyTexts, row_seeds, stable_seed


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


def test_window_keys_written_once_give_the_same_seeds_for_every_prefix_suffix_and_rows():
    keys = [("AAPL", 12), ('é"x', -3), (), ("MSFT", 2**70), (np.str_("A"), 3), (True, 1)]
    texts = KeyTexts(keys)
    for prefix in [(), (7, "naive"), (0, "perturb", "P1"), (np.int64(3),)]:
        for suffix in [(), ("P3+ffill",), (1.5, None)]:
            want = [plain_seed(*prefix, *key, *suffix) for key in keys]
            assert texts.seeds(*prefix, suffix=suffix).tolist() == want
            rows = np.array([4, 0, 2, 2])
            assert texts.seeds(*prefix, suffix=suffix, rows=rows).tolist() == [want[i] for i in rows]


def planted_batch(rows: int = 600, horizon: int = 6):
    """Point rows, failed rows (NaN forecasts), NaN truth, sample paths of two shapes, a constant input: the forms
    a batch's metrics meet, more rows than one METRIC_ROWS chunk."""
    rng = np.random.default_rng(5)
    clean = rng.normal(50, 5, (rows, 12))
    clean[3] = 7.0  # no change in the input: mase and rmax_scaled undefined or inf
    truth = rng.normal(50, 5, (rows, horizon))
    truth[10, 2] = np.nan
    forecasts = truth + rng.normal(0, 2, (rows, horizon))
    forecasts[[1, rows // 2, rows - 1]] = np.nan  # failed rows
    samples: list[np.ndarray | None] = [None] * rows
    for i in range(0, rows, 3):
        samples[i] = forecasts[i] + rng.normal(0, 1, (8, horizon))
    for i in range(1, rows, 7):
        samples[i] = forecasts[i] + rng.normal(0, 1, (5, horizon))
    return truth, forecasts, clean, samples


@pytest.mark.parametrize("levels", [None, (0.1, 0.5, 0.9)])
def test_batch_metrics_scored_a_chunk_at_a_time_equal_every_metric_over_the_whole_batch(levels):
    truth, forecasts, clean, samples = planted_batch()
    if levels:  # a quantile system: its paths are its grid at the levels
        samples = [None if s is None else np.sort(s[:3], axis=0) for s in samples]
    assert len(truth) > 2 * METRIC_ROWS
    got = batch_metrics(truth, forecasts, clean, samples, season=2, levels=levels)
    with np.errstate(all="ignore"):
        for name, m in METRICS.items():
            want = m(truth, forecasts, clean, samples, season=2, levels=levels)
            assert got[name].tobytes() == want.tobytes(), name  # every bit, NaN where undefined
    empty = batch_metrics(truth[:0], forecasts[:0], clean[:0], [], season=2, levels=levels)
    assert list(empty) == METRICS.names() and all(v.shape == (0,) for v in empty.values())


def test_metrics_made_in_the_worker_equal_those_of_the_main_process():
    """The worker scores its job (Job.scoring) exactly as the main process scores a cached batch; a metric that
    raises leaves it to the main process, which then stops the run with that metric's error."""
    truth, forecasts, clean, samples = planted_batch(40)
    errors = [None if np.isfinite(row).all() else "failed" for row in forecasts]
    result = BatchResult(forecasts, errors, 0.1, samples, [None] * 40)
    job = Job("s", "P1", np.arange(40), {}, Path("."), 1.0, None, scoring=Scoring(truth, clean, 2, None))  # type: ignore[arg-type]
    made = scored(job, result)["metrics"]
    main = batch_metrics(truth, forecasts, clean, samples, season=2, levels=None)
    assert made.keys() == main.keys() and all(made[k].tobytes() == main[k].tobytes() for k in main)
    assert scored(replace(job, scoring=None), result) == {}
    broken = replace(job, scoring=Scoring(truth[:3], clean, 2, None))  # a metric raises (rows do not match)
    assert scored(broken, result) == {}


def test_store_v4_keeps_forecasts_as_bytes_and_reads_a_v3_store_of_json_texts(tmp_path):
    """v4 round trip (point forecast, sample paths, a failed row); a v3 store (JSON text forecasts) opens read-only
    and reads the same values, and is not written to (resume needs the current schema)."""
    store = ForecastStore.create(tmp_path / "v4.sqlite", metrics=["mae"])
    store.put_windows([(w, "A", w, "2024-01-01", [1.0, 2.0], [3.0, 4.0]) for w in range(3)])
    forecasts = np.array([[1 / 3, -0.0], [np.nan, 1.0], [2.5, 1e-300]])
    paths = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    store.put_forecasts(
        system="s",
        window_ids=np.arange(3),
        perturbations=["P0"] * 3,
        forecasts=forecasts,
        errors=[None, "failed", None],
        seconds=np.zeros(3),
        metrics={"mae": np.ones(3)},
        samples=[paths, None, None],
        info=[None] * 3,
        offsets=[[]] * 3,
    )
    frame = store.forecasts(samples=True)
    assert isinstance(frame["forecast"][0], bytes) and pd.isna(frame["forecast"][1])
    assert forecast_values(frame["forecast"][0]).tobytes() == forecasts[0].tobytes()
    assert forecast_values(frame["forecast"][2]).tobytes() == forecasts[2].tobytes()
    assert frame["samples"][0] == paths.tolist() and frame["samples"][2] is None
    assert store.forecast_values(system="s", window=2, perturbations=["P0"])["P0"].tolist() == [2.5, 1e-300]
    store.close()

    v3 = tmp_path / "v3.sqlite"
    with sqlite3.connect(tmp_path / "v4.sqlite") as conn, sqlite3.connect(v3) as old:
        conn.backup(old)
        texts = {w: f and json.dumps(forecast_values(f).tolist()) for w, f in
                 conn.execute("SELECT window, forecast FROM forecasts")}  # fmt: skip
        old.executemany("UPDATE forecasts SET forecast = ? WHERE window = ?", [(t, w) for w, t in texts.items()])
        old.execute("UPDATE meta SET value = 'causalrate/forecasts-v3' WHERE key = 'schema'")
    old.close()
    conn.close()
    with pytest.raises(UserError, match="forecasts-v3"):
        ForecastStore.open(v3, metrics=["mae"])
    reader = ForecastStore.open(v3, metrics=["mae"], readonly=True)
    again = reader.forecasts(samples=True)
    assert isinstance(again["forecast"][0], str)
    assert [forecast_values(f).tobytes() for f in again["forecast"].dropna()] == [
        forecast_values(f).tobytes() for f in frame["forecast"].dropna()
    ]
    assert again["samples"][0] == paths.tolist()
    assert reader.forecast_values(system="s", window=0, perturbations=["P0"])["P0"].tobytes() == forecasts[0].tobytes()
    reader.close()
