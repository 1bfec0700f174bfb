"""The local executor: a pool of spawned worker processes, each handed up to DEPTH batches at a time and
watched by the main process.

A worker that hangs past its batch's limit where the alarm cannot reach it (C code) is killed and its batch
recorded as a timeout, not tried again. A worker that crashes is replaced and its batch tried again up to
`retries` times, then recorded as failed. Workers are started with `spawn`: a fresh interpreter that
inherits no CUDA state (a forked child of a process that touched CUDA cannot use it) and the current
environment. Each job carries the study's plugins, imported in the worker before its system is built.
Workers die with the main process (PR_SET_PDEATHSIG on Linux, a watching thread elsewhere) and ignore
Ctrl-C, which the main process handles: it kills them and keeps the finished batches. With `keep` seconds, the
workers are kept workers (kept.py): they outlive the run, their models loaded, for the next run.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from causalrate.forecast.dispatch import Breaker, Feed, Progress
from causalrate.forecast.jobs import GRACE_SECONDS, TIMEOUT, BatchResult, Job, OnDone
from causalrate.forecast.kept import Kept, attach
from causalrate.forecast.worker import BLAS_THREADS, serve

log = logging.getLogger(__name__)


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


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Children started here do not import the parent's main module: `spawn` re-imports a script's `__main__`
    in every child (a bench script, a user's script calling causalrate: seconds of its imports per worker). A
    worker needs nothing from it: the system it builds and the plugins it imports first travel with each job."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")  # no __file__, no __spec__: nothing to import
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LocalExecutor:
    """A pool of worker processes, each given one batch at a time and watched by the main process.

    Jobs for an accelerator all go to one worker per device (its "home" slot), which loads the
    model once and keeps it there; a model on the CPU uses the worker's share of the cores. With `keep` > 0 the
    workers are kept workers (kept.py), left running with their models for `keep` seconds after the run.
    """

    def __init__(self, workers: int, *, retries: int = 1, keep: float = 0.0) -> None:
        self.workers = workers
        self.retries = retries
        self.keep = keep
        self.context = multiprocessing.get_context("spawn")
        self.cores = max(1, available_cores() // max(workers, 1))
        self.startup: dict[str, float] = {}  # system → seconds from its device worker's start to its model loaded
        self._pool: _Pool | None = None  # started by warm(), taken over by the next run

    def warm(self, job: Job) -> None:
        """Start the worker of the job's device now and have it build the job's system and load its model while
        the main process goes on planning; `startup[system]`: the seconds from its start to the model loaded
        (read as answers come). A job on the CPU warms every worker (each may run its batches). `close()` if no
        run follows."""
        pool = self._pool = self._pool or _Pool(self)
        pool.warming[job.system] = time.monotonic()
        for slot in [pool._slot_of(job, 0)] if job.accelerator else range(max(self.workers, 1)):
            pool.slots[pool.start(slot)][1].put((None, job))
            pool.loading[slot] = (job.system, time.monotonic() + job.timeout + GRACE_SECONDS)

    def start(self) -> None:
        """Start every worker now, so that its start-up (a fresh interpreter and its imports) overlaps the planning
        that follows; the next run takes them over. `close()` if no run follows."""
        pool = self._pool = self._pool or _Pool(self)
        pool.start(max(self.workers, 1) - 1)

    def close(self) -> None:
        """Stop the workers a warm-up or start() started when no run used them (everything came from the cache)."""
        if self._pool is not None:
            self._pool.close(kill=True)
            self._pool = None

    def _start(self, results: multiprocessing.SimpleQueue, *, slot: int | None = None) -> tuple[Any, Any]:
        """A worker and its task queue: the slot's kept worker when runs keep theirs (`keep`; not a replacement
        for a lost one, `slot` None), else a spawned process of this run."""
        if self.keep and slot is not None:
            kept = attach(f"worker-{slot}", idle=self.keep, cores=self.cores, results=results)
            if kept is not None:
                return kept, kept
        tasks = self.context.Queue()
        tasks.cancel_join_thread()  # a killed worker's unread queue must not block our exit
        process = self.context.Process(target=serve, args=(tasks, results, os.getpid(), self.cores), daemon=True)
        with _sigint_ignored(), _one_blas_thread(), _main_module_hidden():
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
        pool = self._pool or _Pool(self)
        self._pool, pool.feed = None, feed
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
                    waiting = [feed.jobs[i].batch.inputs.nbytes for i in feed.pending]
                    planned = feed.exhausted or len(waiting) >= PLAN_AHEAD * self.workers or sum(waiting) >= PLAN_BYTES
                    if not pool.take_answer(done, wait=planned):
                        feed.fill(len(feed.pending) + 1)  # no answer yet: plan one more job instead of waiting
                    pool.replace_lost(done)
                interrupted = False
            finally:
                pool.close(kill=interrupted)  # Ctrl-C or an error: stop now, the finished batches are stored


POLL_SECONDS = 0.005  # how often the main process looks for the workers' answers while it waits
PLAN_AHEAD = 8  # jobs per worker planned ahead while no answer waits (the workers start, or run long jobs) ...
PLAN_BYTES = 16 * 2**20  # ... and their inputs at most this large (a job holds about 3x its inputs: dates, truth)
DEPTH = 2  # batches handed to a worker at a time: the next one waits in its queue while it runs the first


class _Pool:
    """One LocalExecutor.run's workers, started as jobs arrive, and which batches each holds since when.

    Each worker is handed up to DEPTH batches, so it starts the next as soon as it finishes one instead of
    idling while the main process records the answer and sends more; a batch's clock starts when the
    worker takes it up."""

    feed: Feed  # set by the run

    def __init__(self, executor: LocalExecutor) -> None:
        self.executor = executor
        self.warming: dict[str, float] = {}  # system → when its warm-up was sent
        self.loading: dict[int, tuple[str, float]] = {}  # slot → the system its worker is warming up, until when
        # a SimpleQueue: a worker's put is written before it returns, so a worker that dies next (os._exit, a
        # segfault, the OOM killer) cannot take a finished batch's answer with it (a Queue's feeder thread would:
        # the batch, another system's, was then blamed for the crash and failed)
        self.results = executor.context.SimpleQueue()
        self.slots: list[tuple[Any, Any]] = []  # (worker, its task queue): a spawned process and its Queue, or a Kept
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
                self.start(slot)
                pending.remove(index)
                self.feed.attempts[index] += 1
                self.slots[slot][1].put((index, jobs[index]))
                held.append(index)

    def start(self, slot: int) -> int:
        """The slot, its worker started (and those of the slots before it) if not yet."""
        while len(self.slots) <= slot:
            self.slots.append(self.executor._start(self.results, slot=len(self.slots)))
        return slot

    def take_answer(self, done: OnDone, *, wait: bool = True) -> bool:
        """Read every message there is (with `wait`, wait ≤ 0.5 s for the first): a batch taken up starts its
        clock; a finished one is settled. Whether there was one."""
        waited = time.monotonic() + (0.5 if wait else 0.0)
        while self.results.empty():
            if time.monotonic() >= waited:
                return False
            time.sleep(POLL_SECONDS)
        while not self.results.empty():
            index, result = self.results.get()
            self._settle(index, result, done)
        return True

    def _settle(self, index: int | None, result: Any, done: OnDone) -> None:
        if index is None:  # a warm-up answered: (system, error or None, the worker's pid)
            system, error, pid = result
            self.executor.startup[system] = time.monotonic() - self.warming[system]  # the last worker's
            for warmed, (process, _) in enumerate(self.slots):
                if process.pid == pid:
                    self.loading.pop(warmed, None)
            if error:
                log.warning("%s: loading it ahead of its first batch failed (%s)", system, error)
            return
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
        """Kill a hung worker, restart a dead one; the job it ran is retried or, past the retries, a failure (a
        job of several batches waits again as one job per batch: Feed.split); the jobs it held but had not begun
        wait again, their try not counted. A worker still warming up is first watched on its own (lost_loading)."""
        self.lost_loading()
        for slot, held in self.queued.items():
            if not held:
                continue
            process, index = self.slots[slot][0], held[0]
            started = self.started.get(slot)
            elapsed = 0.0 if started is None else time.monotonic() - started
            hung = elapsed > self.feed.jobs[index].timeout + GRACE_SECONDS
            if not hung and process.is_alive():
                continue
            self._replace(slot, begun=1)
            if len(self.feed.jobs[index].parts) > 1:
                self.feed.split(index)
                continue
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

    def lost_loading(self) -> None:
        """A worker whose warm-up outlived its limit (a hang the worker's own alarm cannot reach: C code) or died
        in it is replaced: the batches it held had not begun and wait again, their try not counted; they load the
        model themselves, each under its own time limit, in the fresh worker."""
        for slot, (system, until) in list(self.loading.items()):
            process = self.slots[slot][0]
            hung = process.is_alive()
            if hung and time.monotonic() <= until:
                continue
            self._replace(slot, begun=0)
            why = "did not end within its time limit" if hung else f"crashed (exit code {process.exitcode})"
            log.warning("%s: loading it ahead of its first batch %s; its batches run in a fresh worker", system, why)
            del self.loading[slot]

    def _replace(self, slot: int, *, begun: int) -> None:
        """End the slot's worker and start a fresh one (never a kept worker: this run's own); the jobs it held
        beyond the `begun` first wait again, their try not counted."""
        process = self.slots[slot][0]
        end(process)
        process.join()
        self.slots[slot] = self.executor._start(self.results)
        self.started.pop(slot, None)
        held = self.queued.get(slot, [])
        for waiting in held[begun:]:
            self.feed.attempts[waiting] -= 1
            self.feed.pending.append(waiting)
        held.clear()

    def close(self, *, kill: bool) -> None:
        """End the workers (`kill`: now, else when they have read the end of their queue); a kept worker is left
        running for the next run, unless this run is stopped (`kill`) while it holds a batch."""
        ending = []
        for slot, (process, tasks) in enumerate(self.slots):
            if isinstance(process, Kept) and not (kill and self.queued.get(slot)):
                process.detach()
                continue
            ending.append(process)
            if kill:
                end(process)
            else:
                tasks.put(None)
        for process in ending:
            process.join(timeout=5)
            end(process)  # also what a system started and left running (a forked child, a server)


def end(process: Any) -> None:
    """Kill a worker and every process it started: each worker leads its own process group (worker.serve), so a
    system that forks leaves nothing running after its worker is replaced or the run ends."""
    if process.is_alive():
        process.kill()
    if hasattr(os, "killpg") and process.pid:
        with suppress(ProcessLookupError, PermissionError):  # a group of that id exists only if the worker made it
            os.killpg(process.pid, signal.SIGKILL)
