"""Issue 18: same numbers in any batch, dtype-safe scaling, honest cache keys, CPU threads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("chronos")

from causalrate.errors import UserError
from causalrate.systems.base import Batch
from causalrate.systems.spec import SystemSpec, build_system
from tests import tiny_models


def batch_of(inputs: np.ndarray, horizon: int, seeds: np.ndarray) -> Batch:
    b, n = inputs.shape
    return Batch(
        inputs=inputs,
        horizon=horizon,
        seeds=seeds,
        attributes=({},) * b,
        input_dates=np.zeros((b, n), dtype="datetime64[D]"),
        truth_dates=np.zeros((b, horizon), dtype="datetime64[D]"),
    )


def pick(batch: Batch, rows: list[int]) -> Batch:
    return batch_of(batch.inputs[rows], batch.horizon, batch.seeds[rows])


@pytest.fixture(scope="module")
def chronos_dir(tmp_path_factory) -> Path:
    return tiny_models.build_chronos(tmp_path_factory.mktemp("chronos") / "chronos")


def chronos(folder: Path, **settings):
    spec = {"name": "c", "type": "chronos", "model": str(folder), "num_samples": 4, **settings}
    return build_system(SystemSpec.model_validate(spec), base_dir=folder.parent)


def test_a_rows_sample_paths_do_not_depend_on_its_batch(chronos_dir):
    rng = np.random.default_rng(0)
    inputs = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, (256, 30)), axis=1))
    inputs[3] = inputs[2]  # same input, another seed: other paths
    inputs[10, 5] = np.nan
    seeds = rng.integers(0, 2**63, 256, dtype=np.uint64)
    batch = batch_of(inputs, 20, seeds)  # horizon 20 > the model's 16: two generate calls continue each row
    full = chronos(chronos_dir, batch_size=256).forecast(batch).samples
    assert full.shape == (256, 4, 20)
    assert not np.array_equal(full[2], full[3])
    assert len(np.unique(full[0])) > 4  # sampled, not one path repeated
    by_seven = chronos(chronos_dir, batch_size=7).forecast(pick(batch, list(range(100, 121)))).samples
    np.testing.assert_array_equal(by_seven, full[100:121])
    single = chronos(chronos_dir, batch_size=1)
    for row in (0, 10, 255):
        np.testing.assert_array_equal(single.forecast(pick(batch, [row])).samples[0], full[row])
    shuffled = [255, 10, 0, 3, 2]  # another order, another batch position
    np.testing.assert_array_equal(chronos(chronos_dir).forecast(pick(batch, shuffled)).samples, full[shuffled])


def test_float16_is_refused_for_t5_models(chronos_dir):
    with pytest.raises(UserError, match="float16 overflows"):
        chronos(chronos_dir, dtype="float16").check(None)


def test_the_cache_key_holds_the_resolved_device_and_dtype_not_the_batch(chronos_dir, monkeypatch):
    import torch

    def initialise(*args, **kwargs):
        raise AssertionError("the main process must not initialise CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", initialise)
    monkeypatch.setattr(torch.cuda, "init", initialise)
    auto = chronos(chronos_dir).identity()
    assert auto["resolved"] == {"device_type": "cpu", "dtype": "float32"}  # auto on a machine without CUDA
    assert chronos(chronos_dir, device="cpu", dtype="float32", batch_size=3).identity() == auto
    assert chronos(chronos_dir, dtype="bfloat16").identity() != auto
    assert chronos(chronos_dir).accelerator is None and chronos(chronos_dir).batch_size == 32
    assert chronos(chronos_dir, device="cuda:1").accelerator == "cuda:1"
    assert chronos(chronos_dir, device="cuda:1").batch_size == 256


def test_moment_in_bfloat16_keeps_prices_near_1000_exact_to_a_fraction_of_a_daily_move(tmp_path, moment_python):
    _, head = tiny_models.build_moment_in(moment_python, tmp_path / "moment", horizon=20)
    rng = np.random.default_rng(1)
    moves = rng.normal(0, 8.0, (16, 80))
    inputs = 1000 + np.cumsum(moves, axis=1)
    batch = batch_of(inputs, 20, np.zeros(16, dtype=np.uint64))

    def moment(dtype: str) -> np.ndarray:
        spec = {"name": "m", "type": "moment", "model": "moment", "head": head.name, "seq_len": 64, "dtype": dtype}
        system = build_system(SystemSpec.model_validate(spec), base_dir=tmp_path)  # in MOMENT's own environment
        made = system.forecast(batch)
        return np.asarray(getattr(made, "point", made))

    exact, brain = moment("float32"), moment("bfloat16")
    daily = np.abs(np.diff(inputs, axis=1)).mean()
    assert np.abs(brain - exact).max() < 0.1 * daily  # scaling in bfloat16 was 1.2 daily moves off here
    assert np.mean([len(np.unique(row)) for row in brain]) > 18  # not snapped to bfloat16's grid of 4 (was 7-14)


def test_a_cpu_model_job_gets_the_workers_cores_and_others_keep_one(chronos_dir):
    import torch

    from causalrate.forecast.jobs import Job
    from causalrate.forecast.local import LocalExecutor, available_cores
    from causalrate.forecast.worker import run_job

    spec = {"name": "c", "type": "chronos", "model": str(chronos_dir), "num_samples": 2}
    batch = batch_of(np.full((2, 30), 100.0), 3, np.zeros(2, dtype=np.uint64))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        run_job(Job("c", "P0", np.arange(2), spec, chronos_dir.parent, 60.0, batch), cores=3)
        assert torch.get_num_threads() == 3
        torch.set_num_threads(1)
        naive = {"name": "n", "type": "naive"}
        run_job(Job("n", "P0", np.arange(2), naive, chronos_dir.parent, 60.0, batch), cores=3)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert LocalExecutor(1).cores == available_cores()
    assert LocalExecutor(10_000).cores == 1
