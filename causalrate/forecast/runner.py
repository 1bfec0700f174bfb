"""Run forecast jobs: the executor a run asks for. The parts: jobs.py (Job, BatchResult, the Executor
protocol), worker.py (one batch inside a worker, failures kept as rows), dispatch.py (the main process's feed,
progress and circuit breaker), local.py (the local pool of spawned workers), ray_executor.py (Ray)."""

from __future__ import annotations

from causalrate.forecast.jobs import Executor
from causalrate.forecast.local import LocalExecutor
from causalrate.forecast.ray_executor import RayExecutor


def make_executor(kind: str, *, workers: int, retries: int, address: str | None = None) -> Executor:
    if kind == "ray":
        return RayExecutor(workers, address=address, retries=retries)
    return LocalExecutor(workers, retries=retries)
