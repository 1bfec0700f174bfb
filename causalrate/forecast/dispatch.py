"""The main process's bookkeeping shared by the executors: the Feed of jobs drawn as workers free up, the
Progress lines, and the circuit Breaker that stops sending to a system that cannot be reached."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable

from tqdm import tqdm

from causalrate.forecast.jobs import TIMEOUT, BatchResult, Job, OnDone
from causalrate.redact import scrub

log = logging.getLogger(__name__)

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

    def fill(self, ahead: int | None = None) -> None:
        """Draw jobs until `ahead` (default: the feed's own) wait or the iterable is spent."""
        while not self.exhausted and len(self.pending) < (ahead or self.ahead):
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

    def split(self, index: int) -> None:
        """A job of several batches whose worker crashed or hung waits again as one job per batch, each with
        its own tries (Job.split)."""
        for part in self.settle(index).split():
            self.jobs[self.drawn] = part
            self.attempts[self.drawn] = 0
            self.pending.append(self.drawn)
            self.drawn += 1

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
        failed = len(result.errors) - result.errors.count(None)
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
