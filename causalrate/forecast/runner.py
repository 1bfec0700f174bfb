"""Run forecast jobs: batched, in worker processes (local) or on Ray, failures kept as rows.

Inside a worker each batch runs under a time limit (SIGALRM): forecast.timeout seconds per forecast times
the batch's rows. A batch that raises is retried row by row (each row under its own share of the limit) so
only the rows that really fail become failure rows. A batch past its limit fails as a timeout, its own
failure reason ("timeout: ..."), stated once per system on stderr; a worker that hangs past it where the
alarm cannot reach it (C code) is killed and its batch recorded as a timeout, not tried again. A worker that
crashes is replaced and its batch tried again up to `retries` times, then recorded as failed.
What a system's libraries say while it forecasts (Python warnings, and whatever they print: lightning's
banners) is counted per source with its first message (BatchResult.warnings), not shown: the run records
it per system and summarises it on stderr once, after the progress lines.

Workers are started with `spawn`: a fresh interpreter that inherits no CUDA state (a forked
child of a process that touched CUDA cannot use it) and the current environment. Each job
carries the study's plugins, imported in the worker before its system is built. Workers die
with the main process (PR_SET_PDEATHSIG on Linux, a watching thread elsewhere) and ignore
Ctrl-C, which the main process handles: it kills them and keeps the finished batches.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from causalrate import plugins
from causalrate.data.dataset import MAX_ABS_VALUE
from causalrate.errors import UserError
from causalrate.redact import scrub
from causalrate.systems.base import Batch, Prediction, System, TransportError
from causalrate.systems.checkpoints import Stats, file_stats
from causalrate.systems.spec import SystemSpec, build_system

log = logging.getLogger(__name__)

GRACE_SECONDS = 10.0  # beyond a batch's own timeout before its worker is killed
# What a system's code may raise. Workers ignore Ctrl-C, so there even a KeyboardInterrupt or SystemExit comes
# from the model itself: a failure row like any other, not a dead worker printing its traceback and retried.
SYSTEM_FAULT = (Exception, KeyboardInterrupt, SystemExit)


class ForecastTimeout(Exception):
    pass


TIMEOUT = "timeout"  # the failure reason a forecast past its time limit is recorded with (its error's prefix)


@dataclass(frozen=True)
class Job:
    """One batch for one system: everything a worker needs, picklable."""

    system: str
    perturbation: str
    window_ids: np.ndarray  # of the batch's rows
    spec: dict[str, Any]  # the system's SystemSpec, dumped: validated again in the worker once its plugins are loaded
    base_dir: Path
    timeout: float
    batch: Batch  # inputs already imputed for systems that do not accept NaN
    keys: list[str] = field(default_factory=list)  # cache keys of the rows
    accelerator: str | None = None  # e.g. "cuda:1": all its jobs go to that device's worker, which keeps the model
    plugins: tuple[str, ...] = ()  # resolved plugin entries, imported in the worker first
    variant: int = 0  # placement worst: which candidate offset the rows carry

    @property
    def size(self) -> int:
        return int(self.window_ids.size)


@dataclass(frozen=True)
class BatchResult:
    """What one batch returned: per row a forecast or an error (never the study's outcome metric)."""

    forecasts: np.ndarray  # [b, d], NaN on failed rows
    errors: list[str | None]
    seconds: float
    samples: list[np.ndarray | None] = field(default_factory=list)  # per row [s, d], or None: point forecasts only
    info: list[dict | None] = field(default_factory=list)  # per row, e.g. tokens and latency of an API call
    unreachable: bool = False  # the system could not be reached at all (TransportError): the circuit breaker counts it
    warnings: dict[str, tuple[int, str]] = field(default_factory=dict)  # source → (count, first message): quiet()

    @classmethod
    def failed(cls, job: Job, error: str, seconds: float) -> BatchResult:
        n = job.size
        return cls(np.full((n, job.batch.horizon), np.nan), [error] * n, seconds, [None] * n, [None] * n)


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ForecastTimeout in the calling (main) thread after `seconds`."""

    def _raise(signum: int, frame: object) -> None:
        raise ForecastTimeout(f"{TIMEOUT}: no forecast within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
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
    """The job's system, built in this process once per (entry, folder, plugins) and again when a file it names
    changes: two studies sharing a relative `function:` file name, or a file edited between two runs of a
    long-lived (Ray) worker, never get another study's or an older build."""
    base_dir = job.base_dir.resolve()
    key = (json.dumps(job.spec, sort_keys=True, default=str), str(base_dir), job.plugins)
    stats = named_files(job.spec, base_dir)
    built = _BUILT.get(key)
    if built is None or built[0] != stats:
        plugins.load(job.plugins)
        built = _BUILT[key] = stats, build_system(SystemSpec.model_validate(job.spec), base_dir=job.base_dir)
    return built[1]


def named_files(spec: object, base_dir: Path) -> Stats:
    """The stats of every file or folder a system entry names relative to `base_dir` (`file.py:function` by its
    file), read from its settings' strings: what building the system may load."""
    if isinstance(spec, dict):
        return tuple(s for value in spec.values() for s in named_files(value, base_dir))
    if isinstance(spec, list):
        return tuple(s for value in spec for s in named_files(value, base_dir))
    if not isinstance(spec, str) or not spec or "\n" in spec or len(spec) > 1024:
        return ()
    path = base_dir / spec.split(":")[0]
    try:
        if not path.exists():
            return ()
    except OSError:  # not a path at all (e.g. a component too long)
        return ()
    return tuple((f"{spec}/{name}", size, mtime) for name, size, mtime in file_stats(path))


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
    """Forecast one batch with `cores` threads for a CPU model; never raises for a system's fault."""
    said: dict[str, tuple[int, str]] = {}
    with quiet(said):
        result = _run_job(job, cores=cores)
    return replace(result, warnings=said)


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
    try:
        keep(range(b), _call(system, batch, job.timeout))
    except ForecastTimeout as exc:
        errors = [str(exc)] * b
    except TransportError as exc:  # no row would get through alone either
        errors, unreachable = [f"{type(exc).__name__}: {exc}"[:4000]] * b, True
    except SYSTEM_FAULT:  # isolate the failing rows, each under its share of the batch's time limit
        for i in range(b):
            try:
                keep(range(i, i + 1), _call(system, batch.row(i), job.timeout / max(b, 1)))
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


OnDone = Callable[[Job, BatchResult], None]


class Executor(Protocol):
    """What forecast_all runs its jobs on (LocalExecutor, RayExecutor, or your own): every job run once, its
    result handed to on_done(job, result) in the calling process; `jobs` may be a generator still planning,
    `expected()` the forecasts the run still expects (for progress)."""

    def run(
        self,
        jobs: Iterable[Job],
        on_done: OnDone,
        *,
        expected: Callable[[], int] | None = None,
        label: str = "forecasting",
    ) -> None: ...


PLAIN_SECONDS = 30.0  # between two progress lines when stderr is not a terminal
BREAKER_BATCHES = 3  # batches in a row that could not reach a system before its remaining ones are not sent


class Breaker:
    """A circuit breaker per system: after BREAKER_BATCHES batches in a row that could not reach it (its own
    retries spent), its remaining batches fail unsent with the reason, and stderr says so: an endpoint that
    never answers costs three batches' retries, not a day."""

    def __init__(self, on_done: OnDone) -> None:
        self.on_done = on_done
        self.streak: dict[str, int] = {}
        self.open: dict[str, str] = {}  # system → why its batches are no longer sent
        self.timed_out: set[str] = set()  # systems whose timeouts stderr has stated

    def __call__(self, job: Job, result: BatchResult) -> None:
        timeout = next((e for e in result.errors if e and e.startswith(TIMEOUT)), None)
        if timeout and job.system not in self.timed_out:
            self.timed_out.add(job.system)
            log.warning(
                "%s: a batch of %d forecasts timed out (%s; forecast.timeout is %g s per forecast); its forecasts "
                "fail as timeouts, rated as the system's failures: raise forecast.timeout for a slower model",
                job.system,
                job.size,
                timeout,
                job.timeout / max(job.size, 1),
            )
        self.streak[job.system] = self.streak.get(job.system, 0) + 1 if result.unreachable else 0
        if self.streak[job.system] >= BREAKER_BATCHES and job.system not in self.open:
            reason = scrub(next((e for e in result.errors if e), "unreachable"))
            self.open[job.system] = f"not sent: {BREAKER_BATCHES} batches in a row could not reach it ({reason})"
            log.warning(
                "%s: %d batches in a row could not reach it; its remaining forecasts are recorded as failed, "
                "unsent. Last error: %s",
                job.system,
                BREAKER_BATCHES,
                reason,
            )
        self.on_done(job, result)

    def stop(self, feed: Feed, done: OnDone) -> None:
        """Record the waiting batches of every stopped system as failed, unsent, and settle them."""
        for index in [i for i in feed.pending if feed.jobs[i].system in self.open]:
            feed.pending.remove(index)
            job = feed.settle(index)
            done(job, BatchResult.failed(job, self.open[job.system], 0.0))


class Feed:
    """The jobs an executor runs, drawn from their iterable only as it needs them: planning (cache lookups,
    rendered charts) goes on while the first batches run, and memory holds the jobs in flight and `ahead`
    waiting, never every job of a run. `expected()` is how many forecasts the run still expects to make."""

    def __init__(self, jobs: Iterable[Job], *, ahead: int, expected: Callable[[], int] | None = None) -> None:
        if expected is None:  # a finished list: its own size
            jobs = list(jobs)
            total = sum(j.size for j in jobs)
            expected = lambda: total  # noqa: E731
        self.source, self.ahead, self.expected = iter(jobs), max(ahead, 1), expected
        self.jobs: dict[int, Job] = {}  # drawn and not yet settled, by the order they were drawn in
        self.pending: list[int] = []  # drawn and not sent: the next one last (pop()); a retried one is appended
        self.attempts: dict[int, int] = {}
        self.drawn = 0
        self.exhausted = False

    def fill(self) -> None:
        """Draw jobs until `ahead` wait or the iterable is spent."""
        while not self.exhausted and len(self.pending) < self.ahead:
            job = next(self.source, None)
            if job is None:
                self.exhausted = True
                return
            self.jobs[self.drawn] = job
            self.attempts[self.drawn] = 0
            self.pending.insert(0, self.drawn)
            self.drawn += 1

    @property
    def unfinished(self) -> bool:
        """Jobs wait to be sent or to be drawn."""
        return bool(self.pending) or not self.exhausted

    def settle(self, index: int) -> Job:
        """The job, finished: forgotten here (its answer goes to the caller)."""
        del self.attempts[index]
        return self.jobs.pop(index)


class Progress:
    """Forecasting progress on stderr with the failures so far: tqdm's bar on a terminal; elsewhere (CI,
    nohup, a notebook) a plain line at the start, every PLAIN_SECONDS and at the end."""

    def __init__(self, expected: Callable[[], int], label: str, on_done: OnDone) -> None:
        self.expected, self.label, self.on_done = expected, label, on_done
        self.done = self.failed = 0
        self.terminal = sys.stderr.isatty()
        self.bar = tqdm(
            total=expected(), desc=label, unit="fc", file=sys.stderr, disable=not self.terminal, smoothing=0.1
        )
        self.started = self.printed = time.monotonic()

    def __call__(self, job: Job, result: BatchResult) -> None:
        """Hand a finished batch on, and count it."""
        self.on_done(job, result)
        self.done += job.size
        failed = sum(e is not None for e in result.errors)
        self.failed += failed
        if self.terminal:
            self.bar.total = self.expected()  # cache hits found while planning go on lower it
            self.bar.update(job.size)
            if failed:
                self.bar.set_postfix(failed=self.failed, refresh=False)
        elif time.monotonic() - self.printed >= PLAIN_SECONDS:
            self.line()

    def line(self) -> None:
        self.printed = time.monotonic()
        total = self.expected()
        share = self.done / total if total else 1.0
        log.info(
            "%s: %d/%d forecasts (%.0f%%), %d failed, %.0f s",
            self.label,
            self.done,
            total,
            100 * share,
            self.failed,
            self.printed - self.started,
        )

    def __enter__(self) -> Progress:
        if not self.terminal:
            self.line()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()
        if not self.terminal and exc[0] is None:
            self.line()


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


def _worker(tasks: multiprocessing.Queue, results: multiprocessing.Queue, parent: int, cores: int) -> None:
    from threadpoolctl import threadpool_limits

    die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    threadpool_limits(1)  # workers run in parallel already; multi-threaded BLAS would oversubscribe the cores
    while (item := tasks.get()) is not None:
        index, job = item
        results.put((index, None))  # started: the batch's clock starts now, not while this worker was starting up
        try:
            results.put((index, run_job(job, cores=cores)))
        except SYSTEM_FAULT as exc:  # e.g. the system cannot be built here
            results.put((index, f"worker error: {type(exc).__name__}: {exc}"))


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Children started here load every BLAS with one thread (set before their first import; models raise it)."""
    previous = {name: os.environ.get(name) for name in BLAS_THREADS}
    os.environ.update(dict.fromkeys(BLAS_THREADS, "1"))
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Children started here are born ignoring SIGINT (the disposition survives exec; Python keeps it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LocalExecutor:
    """A pool of worker processes, each given one batch at a time and watched by the main process.

    Jobs for an accelerator all go to one worker per device (its "home" slot), which loads the
    model once and keeps it there; a model on the CPU uses the worker's share of the cores.
    """

    def __init__(self, workers: int, *, retries: int = 1) -> None:
        self.workers = workers
        self.retries = retries
        self.context = multiprocessing.get_context("spawn")
        self.cores = max(1, available_cores() // max(workers, 1))

    def _start(self, results: multiprocessing.Queue) -> tuple[Any, multiprocessing.Queue]:
        tasks = self.context.Queue()
        tasks.cancel_join_thread()  # a killed worker's unread queue must not block our exit
        process = self.context.Process(target=_worker, args=(tasks, results, os.getpid(), self.cores), daemon=True)
        with _sigint_ignored(), _one_blas_thread():
            process.start()
        return process, tasks

    def run(
        self,
        jobs: Iterable[Job],
        on_done: OnDone,
        *,
        expected: Callable[[], int] | None = None,
        label: str = "forecasting",
    ) -> None:
        """Run every job, drawn as workers free up; on_done(job, result) once per job, in the main process.
        `expected()`: the forecasts still expected (for progress) while `jobs` is a generator still planning."""
        feed = Feed(jobs, ahead=2 * self.workers, expected=expected)
        pool = _Pool(self, feed)
        breaker = Breaker(on_done)
        interrupted = True
        with Progress(feed.expected, label, breaker) as done:
            try:
                while True:
                    feed.fill()
                    if not (feed.unfinished or pool.running):
                        break
                    breaker.stop(feed, done)
                    pool.hand_out()
                    pool.take_answer(done)
                    pool.replace_lost(done)
                interrupted = False
            finally:
                pool.close(kill=interrupted)  # Ctrl-C or an error: stop now, the finished batches are stored


DEPTH = 2  # batches handed to a worker at a time: the next one waits in its queue while it runs the first


class _Pool:
    """One LocalExecutor.run's workers, started as jobs arrive, and which batches each holds since when.

    Each worker is handed up to DEPTH batches, so it starts the next as soon as it finishes one instead of
    idling while the main process records the answer and sends more; a batch's clock starts when the
    worker takes it up."""

    def __init__(self, executor: LocalExecutor, feed: Feed) -> None:
        self.executor, self.feed = executor, feed
        self.results = executor.context.Queue()
        self.slots: list[tuple[Any, multiprocessing.Queue]] = []
        self.home: dict[str, int] = {}  # device → the one slot that runs its batches
        self.queued: dict[int, list[int]] = {}  # slot → the job indexes its worker holds, the one it runs first
        self.started: dict[int, float] = {}  # slot → when its worker took up its first held job

    @property
    def running(self) -> bool:
        """A worker still holds a batch."""
        return any(self.queued.values())

    def _slot_of(self, job: Job, slot: int) -> int:
        """The slot the job must run in: its device's home (assigned on first sight), else any (`slot`)."""
        if not job.accelerator:
            return slot
        return self.home.setdefault(job.accelerator, len(self.home) % max(self.executor.workers, 1))

    def hand_out(self) -> None:
        """Give every slot holding fewer than DEPTH batches the next waiting batch it may run (accelerator
        batches only to their home), starting the slot's worker the first time it has one."""
        jobs, pending = self.feed.jobs, self.feed.pending
        for _ in range(DEPTH):
            for slot in range(max(self.executor.workers, 1)):
                held = self.queued.setdefault(slot, [])
                if len(held) >= DEPTH:
                    continue
                index = next((i for i in reversed(pending) if self._slot_of(jobs[i], slot) == slot), None)
                if index is None:
                    continue
                while len(self.slots) <= slot:
                    self.slots.append(self.executor._start(self.results))
                pending.remove(index)
                self.feed.attempts[index] += 1
                self.slots[slot][1].put((index, jobs[index]))
                held.append(index)

    def take_answer(self, done: OnDone) -> None:
        """Read every message there is (wait ≤ 0.5 s for the first): a batch taken up starts its clock; a
        finished one is settled."""
        try:
            message = self.results.get(timeout=0.5)
        except queue.Empty:
            return
        while True:
            index, result = message
            self._settle(index, result, done)
            try:
                message = self.results.get_nowait()
            except queue.Empty:
                return

    def _settle(self, index: int, result: BatchResult | str | None, done: OnDone) -> None:
        slot = next((s for s, held in self.queued.items() if index in held), None)
        if result is None:  # the worker took the batch up
            if slot is not None:
                self.started[slot] = time.monotonic()
            return
        if slot is None and index not in self.feed.pending:
            return  # a killed worker's late answer, already settled
        if slot is None:
            self.feed.pending.remove(index)  # it answered just before being killed: take it
        else:
            self.queued[slot].remove(index)
            self.started.pop(slot, None)
        job = self.feed.settle(index)
        done(job, BatchResult.failed(job, result, 0.0) if isinstance(result, str) else result)

    def replace_lost(self, done: OnDone) -> None:
        """Kill a hung worker, restart a dead one; the batch it ran is retried or, past the retries, a failure;
        the batches it held but had not begun wait again, their try not counted."""
        for slot, held in self.queued.items():
            if not held:
                continue
            process, index = self.slots[slot][0], held[0]
            started = self.started.get(slot)
            elapsed = 0.0 if started is None else time.monotonic() - started
            hung = elapsed > self.feed.jobs[index].timeout + GRACE_SECONDS
            if not hung and process.is_alive():
                continue
            process.kill()
            process.join()
            self.slots[slot] = self.executor._start(self.results)
            self.started.pop(slot, None)
            for waiting in held[1:]:
                self.feed.attempts[waiting] -= 1
                self.feed.pending.append(waiting)
            held.clear()
            if not hung and self.feed.attempts[index] <= self.executor.retries:  # past its time: not tried again
                self.feed.pending.append(index)
                continue
            why = (
                f"{TIMEOUT}: its worker hung and was killed"
                if hung
                else f"worker crashed (exit code {process.exitcode})"
            )
            job = self.feed.settle(index)
            done(job, BatchResult.failed(job, f"{why} after {elapsed:.0f} s", elapsed))

    def close(self, *, kill: bool) -> None:
        for process, tasks in self.slots:
            if kill:
                process.kill()
            else:
                tasks.put(None)
        for process, _ in self.slots:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()


class RayExecutor:
    """Batches as Ray tasks on a local Ray (num_cpus = workers) or the cluster at `address`."""

    def __init__(self, workers: int, *, address: str | None = None, retries: int = 1) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray: pip install 'causalrate[ray]'") from None
        self.ray = ray
        self.workers = workers
        self.retries = retries
        if not ray.is_initialized():
            if address:
                _join(ray, address)
            else:
                ray.init(  # "local": a Ray of our own, even when another cluster runs here (or left its file behind)
                    address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                    configure_logging=False,
                )  # fmt: skip

    def run(
        self,
        jobs: Iterable[Job],
        on_done: OnDone,
        *,
        expected: Callable[[], int] | None = None,
        label: str = "forecasting",
    ) -> None:
        """As LocalExecutor.run, with at most 2 × workers batches submitted at a time."""
        ray = self.ray
        remote = ray.remote(max_retries=self.retries, num_cpus=1)(_ray_job)
        on_gpu = remote.options(num_gpus=1)  # Ray places accelerator batches on a worker that holds a device
        limit = max(2 * self.workers, 1)  # few in flight: submission time ≈ start time
        feed = Feed(jobs, ahead=limit, expected=expected)
        running: dict[Any, tuple[int, float]] = {}
        breaker = Breaker(on_done)
        with Progress(feed.expected, label, breaker) as done:
            try:
                while True:
                    feed.fill()
                    if not (feed.unfinished or running):
                        break
                    breaker.stop(feed, done)
                    while feed.pending and len(running) < limit:
                        index = feed.pending.pop()
                        feed.attempts[index] += 1
                        task = on_gpu if feed.jobs[index].accelerator else remote
                        running[task.remote(feed.jobs[index])] = (index, time.monotonic())
                    ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                    for ref in ready:
                        index, _ = running.pop(ref)
                        job = feed.settle(index)
                        try:
                            result = ray.get(ref)
                        except Exception as exc:  # a worker that died after its retries
                            result = BatchResult.failed(job, f"Ray task failed: {type(exc).__name__}", 0.0)
                        done(job, result)
                    for ref, (index, started) in list(running.items()):
                        elapsed = time.monotonic() - started
                        if elapsed <= feed.jobs[index].timeout * 2 + GRACE_SECONDS:  # queued time counts: be lenient
                            continue
                        ray.cancel(ref, force=True)
                        del running[ref]
                        if feed.attempts[index] <= self.retries:
                            feed.pending.append(index)
                        else:
                            why = f"Ray worker hung and was killed after {elapsed:.0f} s"
                            job = feed.settle(index)
                            done(job, BatchResult.failed(job, why, elapsed))
            finally:  # after Ctrl-C or an error, nothing keeps running for this run
                for ref in running:
                    ray.cancel(ref, force=True)


CONNECT_SECONDS = 5.0  # to reach a Ray cluster's address before Ray's own retries (minutes, silent) begin


def _join(ray: Any, address: str) -> None:
    """ray.init at a cluster's address; a refused connection or a cluster that wants a token is a UserError.

    Ray's C++ core logs each failed attempt on fd 2 (about 20 "InvalidAuthToken" lines for a cluster with
    token authentication, then a bare ConnectionError): those lines are caught, read for the cause, and shown
    only when they are not explained by the message.
    """
    reachable(address)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as logs:
        os.dup2(logs.fileno(), 2)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
            failure = None
        except Exception as exc:
            failure = exc
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        logs.seek(0)
        said = logs.read().decode(errors="replace")
    if failure is None:
        sys.stderr.write(said)
        return
    if isinstance(failure, ray.exceptions.AuthenticationError) or "InvalidAuthToken" in said + str(failure):
        raise UserError(
            f"--address {address}: the Ray cluster uses token authentication; set RAY_AUTH_MODE=token and give its "
            "token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; `ray get-auth-token` on the head "
            "node prints it)"
        ) from None
    sys.stderr.write(said)
    raise UserError(f"--address {address}: cannot join the Ray cluster ({type(failure).__name__}: {failure})") from None


def reachable(address: str) -> None:
    """UserError unless something listens at a Ray address ("host:port" or "ray://host:port"; "auto" is Ray's)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local": Ray finds the cluster itself
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise UserError(
            f"--address {address}: no Ray cluster answers there within {CONNECT_SECONDS:g} s ({exc}); start one "
            "with `ray start --head` and give the address it prints, or leave --address out for a local Ray"
        ) from None


def _ray_job(job: Job) -> BatchResult:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return run_job(job)


def make_executor(kind: str, *, workers: int, retries: int, address: str | None = None):
    if kind == "ray":
        return RayExecutor(workers, address=address, retries=retries)
    return LocalExecutor(workers, retries=retries)
