"""Inside a worker: run one batch of a system, failures kept as rows.

Each batch (one call of the model; a job may hold several) runs under a time limit (SIGALRM): forecast.timeout
seconds per forecast times the batch's rows.
A batch that raises is retried row by row (each row under its own share of the limit) so only the rows that
really fail become failure rows. A batch past its limit fails as a timeout, its own failure reason
("timeout: ..."). What a system's libraries say while it forecasts (Python warnings, and whatever they
print: lightning's banners) is counted per source with its first message (BatchResult.warnings), not shown:
the run records it per system and summarises it on stderr once, after the progress lines. A worker keeps
the systems it built between batches (`_system`). `serve` is a local pool worker's loop; `answer` its one step
(a kept worker's too: kept.py).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from causalrate import plugins
from causalrate.data.dataset import MAX_ABS_VALUE
from causalrate.forecast.jobs import TIMEOUT, BatchResult, Job
from causalrate.forecast.metrics import batch_metrics
from causalrate.systems.base import Batch, Prediction, System, TransportError
from causalrate.systems.checkpoints import Stats, file_stats
from causalrate.systems.spec import SystemSpec, build_system

# What a worker's BLAS libraries read for their threads: set to 1 where workers are started (local, kept)
BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")

# What a system's code may raise. Workers ignore Ctrl-C, so there even a KeyboardInterrupt or SystemExit comes
# from the model itself: a failure row like any other, not a dead worker printing its traceback and retried.
SYSTEM_FAULT = (Exception, KeyboardInterrupt, SystemExit)


class ForecastTimeout(Exception):
    pass


MAX_TIMER_SECONDS = 1e8  # ~3 years: a longer (or infinite) forecast.timeout is no limit; the timer cannot hold more


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ForecastTimeout in the calling (main) thread after `seconds`."""

    def _raise(signum: int, frame: object) -> None:
        raise ForecastTimeout(f"{TIMEOUT}: no forecast within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, min(seconds, MAX_TIMER_SECONDS))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


SystemKey = tuple[str, str, tuple[str, ...]]  # the system's entry, its resolved base_dir, the plugins
# The systems this worker process built, kept between its batches (a model is loaded once per worker, not per
# batch). It lives as long as the process: a local pool's worker (one run) or a Ray worker (many runs, studies).
_BUILT: dict[SystemKey, tuple[Stats, System]] = {}


def _system(job: Job) -> System:
    """The job's system, built in this process once per (entry, folder, plugins) and again when a file it reads
    (System.sources: its function's file, its `files:`, a checkpoint) changes: two studies sharing a relative
    `function:` file name, or a file edited between two runs of a long-lived (Ray) worker, never get another
    study's or an older build."""
    key = system_key(job)
    built = _BUILT.get(key)
    if built is None or _stats(built[1]) != built[0]:
        plugins.load(job.plugins)
        system = build_system(SystemSpec.model_validate(job.spec), base_dir=job.base_dir)
        built = _BUILT[key] = _stats(system), system
    return built[1]


def system_key(job: Job) -> SystemKey:
    return json.dumps(job.spec, sort_keys=True, default=str), str(job.base_dir.resolve()), job.plugins


def forget(keep: set[SystemKey]) -> None:
    """Drop the systems built here other than `keep` (a kept worker keeps its last run's models, not every
    model it ever loaded), and the device memory they held."""
    for key in set(_BUILT) - keep:
        del _BUILT[key]
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _stats(system: System) -> Stats:
    """Size and mtime of every file the system reads (an absent one: none)."""
    return tuple(
        (f"{path}/{name}", size, mtime)
        for path in system.sources()
        if path.exists()
        for name, size, mtime in file_stats(path)
    )


def _use_cores(system: System, cores: int) -> None:
    """A model on the CPU gets the worker's cores (torch threads); other systems keep one BLAS thread."""
    if system.uses_cores and system.accelerator is None:
        import torch

        torch.set_num_threads(cores)


def _call(system: System, batch: Batch, timeout: float) -> Prediction:
    with time_limit(timeout):
        out = system.forecast(batch)
    return Prediction.of(out, rows=batch.inputs.shape[0], horizon=batch.horizon)


def _source(filename: str) -> str:
    """The package a warning comes from (its file's first folder under site-packages), else its file's name."""
    parts = Path(filename).parts
    for i, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            return parts[i + 1].removesuffix(".py")
    return Path(filename).stem or "python"


@contextmanager
def quiet(found: dict[str, tuple[int, str]]) -> Iterator[None]:
    """While a system forecasts: its Python warnings counted by package, and what it prints to stdout/stderr
    (file descriptors 1 and 2: log handlers, C code) counted by line as "output", each with its first message,
    into `found` instead of onto the terminal, where they flooded the progress lines."""

    def add(source: str, message: str) -> None:
        count, first = found.get(source, (0, message[:500]))
        found[source] = (count + 1, first)

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as sink, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            for w in caught:
                add(_source(w.filename), f"{w.category.__name__}: {w.message}")
            sink.seek(0)
            for line in sink.read().decode(errors="replace").splitlines():
                if line.strip():
                    add("output", line.strip())


def run_job(job: Job, *, cores: int = 1) -> BatchResult:
    """Forecast one job (its batches in turn), `cores` threads for a CPU model, and score it (`scored`); never
    raises for a system's fault."""
    said: dict[str, tuple[int, str]] = {}
    with quiet(said):
        result = _run_job(job, cores=cores)
    return replace(result, warnings=said, **scored(job, result))


def scored(job: Job, result: BatchResult) -> dict:
    """The job's metrics, computed here where its forecasts were made (Job.scoring), so the main process only
    stores them; none without scoring, or when a metric raises: the main process then computes them itself and
    stops the run with that metric's error, as it would have."""
    s = job.scoring
    if s is None:
        return {}
    try:
        metrics = batch_metrics(s.truth, result.forecasts, s.clean, result.samples, season=s.season, levels=s.levels)
    except Exception:  # reported by the main process, which computes the metrics again
        return {}
    return {"metrics": metrics}


def _run_job(job: Job, *, cores: int) -> BatchResult:
    started = time.perf_counter()
    system, batch = _system(job), job.batch
    _use_cores(system, cores)
    b, d = batch.inputs.shape[0], batch.horizon
    forecasts = np.full((b, d), np.nan)
    errors: list[str | None] = [None] * b
    samples: list[np.ndarray | None] = [None] * b
    info: list[dict | None] = [None] * b

    def keep(rows: range, prediction: Prediction) -> None:
        forecasts[rows.start : rows.stop] = prediction.point
        for name, kept in (("samples", samples), ("info", info), ("errors", errors)):
            given = getattr(prediction, name)
            kept[rows.start : rows.stop] = [None] * len(rows) if given is None else list(given)

    unreachable = False
    for part in job.parts:  # each call of the model under its share of the job's time limit
        rows, limit = part.stop - part.start, job.timeout * len(part) / max(b, 1)
        if unreachable:  # the system could not be reached for an earlier batch: the rest fail unsent, alike
            errors[part.start : part.stop] = [errors[part.start - 1]] * rows
            continue
        try:
            keep(part, _call(system, batch.rows(part.start, part.stop) if rows < b else batch, limit))
        except ForecastTimeout as exc:
            errors[part.start : part.stop] = [str(exc)] * rows
        except TransportError as exc:  # no row would get through alone either
            errors[part.start : part.stop] = [f"{type(exc).__name__}: {exc}"[:4000]] * rows
            unreachable = True
        except SYSTEM_FAULT:  # isolate the failing rows, each under its share of the call's time limit
            for i in part:
                try:
                    keep(range(i, i + 1), _call(system, batch.row(i), limit / max(rows, 1)))
                except SYSTEM_FAULT as exc:  # a failure row keeps the error text
                    errors[i] = f"{type(exc).__name__}: {exc}"[:4000]
    # a value beyond the data's own bound (±1e150) overflows its squared error: a failure, not an inf metric
    with np.errstate(invalid="ignore"):
        finite = (np.abs(forecasts) <= MAX_ABS_VALUE).all(axis=1)
    for row in np.flatnonzero(finite):
        paths = samples[row]
        if paths is not None and not (np.abs(paths) <= MAX_ABS_VALUE).all():
            finite[row] = False
    for i in range(b):
        if not finite[i]:
            errors[i] = errors[i] or f"forecast holds NaN, inf or a value beyond ±{MAX_ABS_VALUE:g}"
        if errors[i] is not None:
            forecasts[i], samples[i] = np.nan, None
    return BatchResult(forecasts, errors, time.perf_counter() - started, samples, info, unreachable)


def warm(job: Job, *, cores: int = 1) -> tuple[str, str | None]:
    """Build the job's system here and load what it forecasts with (System.warm); (its name, the error if that
    failed: the first batch then fails with it, as a failure row)."""
    try:
        with quiet({}), time_limit(job.timeout):  # the first batch's limit: a load that hangs is not waited on
            system = _system(job)
            _use_cores(system, cores)
            system.warm(job.batch.horizon)
    except SYSTEM_FAULT as exc:
        return job.system, f"{type(exc).__name__}: {exc}"
    return job.system, None


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with(parent: int) -> None:
    """End this process when `parent` ends: the kernel's parent-death signal on Linux, a watching thread elsewhere."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # it ended before the signal was armed
            os._exit(1)
        return

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def serve(tasks: multiprocessing.Queue, results: multiprocessing.SimpleQueue, parent: int, cores: int) -> None:
    from threadpoolctl import threadpool_limits

    die_with(parent)
    if hasattr(os, "setpgrp"):
        os.setpgrp()  # its own process group: ending it ends what its systems started (local.end)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    threadpool_limits(1)  # workers run in parallel already; multi-threaded BLAS would oversubscribe the cores
    while (item := tasks.get()) is not None:
        answer(item, results.put, cores)


def answer(item: tuple[int | None, Job], put: Callable[[tuple], None], cores: int) -> None:
    """Do what the main process asked (a job, or with index None: warm its system up) and `put` its answers:
    (None, (system, error, pid)) for a warm-up; (index, None) when a job starts, then (index, its BatchResult or
    the text of a worker error)."""
    index, job = item
    if index is None:  # warm up: build the job's system and load its model before its first batch
        put((None, (*warm(job, cores=cores), os.getpid())))
        return
    put((index, None))  # started: the batch's clock starts now, not while this worker was starting up
    try:
        put((index, run_job(job, cores=cores)))
    except SYSTEM_FAULT as exc:  # e.g. the system cannot be built here
        put((index, f"worker error: {type(exc).__name__}: {exc}"))
