"""Forecast every (system, window, perturbation) case: batched, in a process pool, failures kept.

Each batch runs under a time limit. A batch that raises is retried row by row so
that only the rows that really fail become failure rows, each with its own error.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from causalrate.forecast.impute import impute
from causalrate.forecast.systems import Batch, System, build_system


class ForecastTimeout(Exception):
    pass


@dataclass(frozen=True)
class Job:
    """One batch for one system: everything a worker needs, picklable."""

    system: str
    perturbation: str
    windows: np.ndarray  # window ids of the batch's rows
    spec: dict[str, Any]
    base_dir: Path
    imputation: str
    timeout: float
    batch: Batch


@dataclass(frozen=True)
class Outcome:
    forecasts: np.ndarray  # [b, d], NaN on failed rows
    errors: list[str | None]
    seconds: float


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ForecastTimeout in the calling (main) thread after `seconds`."""

    def _raise(signum: int, frame: object) -> None:
        raise ForecastTimeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_SYSTEMS: dict[str, System] = {}  # per-process cache: build each system once per worker


def _system(job: Job) -> System:
    key = json.dumps(job.spec, sort_keys=True, default=str)
    if key not in _SYSTEMS:
        _SYSTEMS[key] = build_system(job.spec, base_dir=job.base_dir)
    return _SYSTEMS[key]


def _call(system: System, batch: Batch, timeout: float) -> np.ndarray:
    with time_limit(timeout):
        out = system.forecast(batch)
    out = np.asarray(out, dtype=np.float64)
    expected = (batch.inputs.shape[0], batch.horizon)
    if out.shape != expected:
        raise ValueError(f"wrong shape: expected {expected}, got {out.shape}")
    return out


def run_job(job: Job) -> Outcome:
    """Forecast one batch; never raises for a system's fault."""
    started = time.perf_counter()
    system = _system(job)
    batch = job.batch
    if not system.accepts_nan:
        batch = Batch(**{**batch.__dict__, "inputs": impute(batch.inputs, job.imputation)})
    b, d = batch.inputs.shape[0], batch.horizon
    forecasts = np.full((b, d), np.nan)
    errors: list[str | None] = [None] * b
    try:
        forecasts[:] = _call(system, batch, job.timeout)
    except ForecastTimeout as exc:
        errors = [str(exc)] * b
    except Exception:
        for i in range(b):
            row = Batch(**{k: (v[i : i + 1] if k != "horizon" else v) for k, v in batch.__dict__.items()})
            try:
                forecasts[i] = _call(system, row, job.timeout)[0]
            except Exception as exc:
                errors[i] = f"{type(exc).__name__}: {exc}"[:2000]
    bad = ~np.isfinite(forecasts).all(axis=1)
    for i in np.flatnonzero(bad):
        errors[i] = errors[i] or "forecast holds NaN or inf"
    return Outcome(forecasts=forecasts, errors=errors, seconds=time.perf_counter() - started)


def _one_blas_thread() -> None:
    """Worker processes already run in parallel; multi-threaded BLAS inside each one oversubscribes the cores."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def execute(jobs: list[Job], *, workers: int, on_done: Any, label: str = "forecasting") -> None:
    """Run jobs (inline when workers == 1, else in a process pool) and hand each result to on_done(job, outcome)."""
    total = sum(j.batch.inputs.shape[0] for j in jobs)
    with tqdm(total=total, desc=label, unit="fc", file=sys.stderr, disable=None) as bar:
        if workers <= 1:
            for job in jobs:
                on_done(job, run_job(job))
                bar.update(job.batch.inputs.shape[0])
            return
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        context = multiprocessing.get_context(method)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_one_blas_thread) as pool:
            futures: dict[Future, Job] = {pool.submit(run_job, job): job for job in jobs}
            for future in as_completed(futures):
                job = futures[future]
                on_done(job, future.result())
                bar.update(job.batch.inputs.shape[0])
