"""Run forecast jobs: the executor a run asks for. The parts: jobs.py (Job, BatchResult, the Executor
protocol), worker.py (one batch inside a worker, failures kept as rows), dispatch.py (the main process's feed,
progress and circuit breaker), local.py (the local pool of spawned workers), ray_executor.py (Ray)."""

from __future__ import annotations

import os

from causalrate.errors import UserError
from causalrate.forecast.jobs import Executor
from causalrate.forecast.local import LocalExecutor
from causalrate.forecast.ray_executor import RayExecutor

# Workers on this machine, per core: beyond it they only queue for the cores, each a Python process of 0.1-0.2 GB
# (a model's more), and a warm-up starts them all at once. A served model (http, gemini) waits on the network, so
# a few per core can help; a thousand cannot.
WORKERS_PER_CORE = 4


def check_workers(workers: int, *, address: str | None) -> None:
    """UserError unless `workers` is at least 1 and, for workers on this machine (no Ray --address: the local
    executor or a local Ray), at most WORKERS_PER_CORE × its cores. At a cluster's address it is how many
    batches are submitted at once, which the cluster decides how to run."""
    if workers < 1:
        raise UserError(f"--workers {workers}: must be at least 1")
    cores = os.cpu_count() or 1
    if address is None and workers > WORKERS_PER_CORE * cores:
        raise UserError(
            f"--workers {workers}: at most {WORKERS_PER_CORE * cores} on this machine ({WORKERS_PER_CORE} per core, "
            f"{cores} cores): each worker is a Python process, and more than the cores only wait for them; leave "
            "--workers out for one per core"
        )


def make_executor(kind: str, *, workers: int, retries: int, address: str | None = None, keep: float = 0.0) -> Executor:
    if kind == "ray":
        return RayExecutor(workers, address=address, retries=retries)
    return LocalExecutor(workers, retries=retries, keep=keep)
