"""What crosses between the forecast stage and its executors: a Job (one batch for one system, everything a
worker needs), its BatchResult, and the Executor protocol (LocalExecutor, RayExecutor, or your own)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from causalrate.systems.base import Batch

TIMEOUT = "timeout"  # the failure reason a forecast past its time limit is recorded with (its error's prefix)
GRACE_SECONDS = 10.0  # beyond a batch's own timeout before its worker is killed


@dataclass(frozen=True)
class Scoring:
    """What a worker needs to score its job's forecasts where they are made (metrics.batch_metrics): the rows'
    truth and clean inputs, the data's season and the system's quantile levels. The main process then only
    stores the answer."""

    truth: np.ndarray  # [b, d]
    clean: np.ndarray  # [b, n]
    season: int = 1
    levels: tuple[float, ...] | None = None

    def rows(self, start: int, stop: int) -> Scoring:
        return replace(self, truth=self.truth[start:stop], clean=self.clean[start:stop])


@dataclass(frozen=True)
class Job:
    """One or several batches (calls of the model) for one system: everything a worker needs, picklable.

    A fast system's batches travel together (plan.job_rows), so the hand-off, the metrics and the store's
    writes are paid once per job, not per batch of the model; the model still sees its own batches."""

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
    calls: tuple[int, ...] = ()  # rows of each call of the model, in order (its batches); (): one call for all rows
    scoring: Scoring | None = None  # given: the worker computes the rows' metrics

    @property
    def size(self) -> int:
        return int(self.window_ids.size)

    @property
    def parts(self) -> list[range]:
        """The rows of each call of the model."""
        bounds = np.cumsum((0, *(self.calls or (self.size,)))).tolist()
        return [range(a, b) for a, b in pairwise(bounds)]

    def split(self) -> list[Job]:
        """One job per call of the model: how a job of several calls whose worker crashed or hung is tried again
        (which call did it is not known), so only that call's rows can fail."""
        return [
            replace(
                self,
                window_ids=self.window_ids[r.start : r.stop],
                timeout=self.timeout * len(r) / max(self.size, 1),
                batch=self.batch.rows(r.start, r.stop),
                keys=self.keys[r.start : r.stop],
                calls=(),
                scoring=None if self.scoring is None else self.scoring.rows(r.start, r.stop),
            )
            for r in self.parts
        ]


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
    metrics: dict[str, np.ndarray] | None = None  # per metric [b], computed in the worker (Job.scoring), else None

    @classmethod
    def failed(cls, job: Job, error: str, seconds: float) -> BatchResult:
        n = job.size
        return cls(np.full((n, job.batch.horizon), np.nan), [error] * n, seconds, [None] * n, [None] * n)


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
