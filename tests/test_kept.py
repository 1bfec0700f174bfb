"""Kept workers (forecast/kept.py): the next run finds its model loaded; nothing else is served by them."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from dataclasses import replace
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from pathlib import Path

import numpy as np
import pytest

from causalrate.errors import UserError
from causalrate.forecast import kept
from causalrate.forecast.jobs import TIMEOUT, Job
from causalrate.forecast.local import LocalExecutor
from causalrate.systems.base import Batch

LOADS = """
import os
import signal
import time
from pathlib import Path

import numpy as np
from helper import OFFSET  # a neighbour module, imported once per process

with Path(__file__).with_name("loads").open("a") as out:  # one line per load of this model, by any process
    out.write(f"{os.getpid()}\\n")


def forecast(inputs, horizon):
    if inputs[0, 0] < 0:  # hangs where the worker's alarm cannot reach it (as C code would)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
        time.sleep(600)
    return np.full((inputs.shape[0], horizon), float(os.getpid()) + OFFSET)
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A private kept workers' folder (it follows the cache folder); every kept worker left is stopped after."""
    monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "model.py").write_text(LOADS)
    (tmp_path / "helper.py").write_text("OFFSET = 0.0\n")
    yield kept.folder()
    kept.stop()


def job(tmp_path: Path, first: float = 1.0, timeout: float = 30.0, device: str | None = "cuda:0") -> Job:
    batch = Batch(
        inputs=np.full((2, 4), first),
        horizon=2,
        seeds=np.zeros(2, dtype=np.uint64),
        attributes=({}, {}),
        input_dates=np.zeros((2, 4), dtype="datetime64[D]"),
        truth_dates=np.zeros((2, 2), dtype="datetime64[D]"),
    )
    spec = {"name": "m", "type": "python", "function": "model.py:forecast"}
    return Job("m", "P0", np.arange(2), spec, tmp_path, timeout, batch, accelerator=device)


def run(tmp_path: Path, keep: float, jobs: int = 3) -> set[float]:
    """The pids that answered a run of `jobs` jobs on cuda:0, its worker warmed up first as forecast_all does."""
    executor = LocalExecutor(1, keep=keep)
    one = job(tmp_path)
    executor.warm(replace(one, window_ids=np.zeros(0, dtype=int), batch=one.batch.rows(0, 0)))
    pids: set[float] = set()
    executor.run([one] * jobs, lambda _, result: pids.add(result.forecasts[0, 0]))
    return pids


def loads(tmp_path: Path) -> list[str]:
    return (tmp_path / "loads").read_text().split()


def ended(pid: float, seconds: float = 20.0) -> bool:
    until = time.monotonic() + seconds
    while kept.alive(int(pid)):
        if time.monotonic() > until:
            return False
        time.sleep(0.05)
    return True


def test_the_next_run_is_answered_by_the_kept_worker_without_loading_the_model_again(tmp_path, folder):
    (first,) = run(tmp_path, keep=60)
    assert loads(tmp_path) == [str(int(first))]
    assert run(tmp_path, keep=60) == {first}  # the same process, its model still loaded
    assert loads(tmp_path) == [str(int(first))]
    (plain,) = run(tmp_path, keep=0)  # without --keep-loaded: a worker of the run's own, which loads the model
    assert plain != first and len(loads(tmp_path)) == 2
    assert kept.listed() == [("worker-0", False)]
    assert kept.stop() == (1, 0) and ended(first) and kept.listed() == []


def test_every_worker_of_a_run_on_the_cpu_is_kept(tmp_path, folder):
    """Without a device, every worker runs batches: each is kept, and the next run's batches go to them."""
    pids: list[set[float]] = []
    for _ in range(2):
        pids.append(set())
        LocalExecutor(2, keep=60).run([job(tmp_path, device=None)] * 8, lambda _, r: pids[-1].add(r.forecasts[0, 0]))
    assert pids[0] == pids[1] and sorted(loads(tmp_path)) == sorted(str(int(p)) for p in pids[0])
    assert [name for name, _ in kept.listed()] == ["worker-0", "worker-1"]


def test_a_kept_worker_ends_after_its_idle_seconds(tmp_path, folder):
    (pid,) = run(tmp_path, keep=0.5)
    assert ended(pid) and not list(folder.glob("*.sock"))


def test_a_kept_worker_in_use_by_another_run_is_not_shared(tmp_path, folder):
    """Another run holds the device's kept worker: this run starts a worker of its own (and keeps none)."""
    with open(folder / "worker-0.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (pid,) = run(tmp_path, keep=60)
    assert ended(pid) and not list(folder.glob("*.sock"))


def test_a_kept_worker_serves_only_runs_of_the_same_environment(tmp_path, folder, monkeypatch):
    """A changed variable (a path, a token) could change what the model does: the kept worker ends and the run
    starts a fresh one, which loads the model again."""
    (first,) = run(tmp_path, keep=60)
    monkeypatch.setenv("CAUSALRATE_TEST_VARIABLE", "changed")
    (second,) = run(tmp_path, keep=60)
    assert second != first and ended(first) and loads(tmp_path) == [str(int(first)), str(int(second))]


def test_a_kept_worker_ends_after_a_package_is_installed(tmp_path, folder):
    """An install or upgrade changes the packages' folder (its mtime): a new worker would import the new version."""
    import sysconfig

    (first,) = run(tmp_path, keep=60)
    os.utime(sysconfig.get_paths()["purelib"])  # what pip install does to the folder
    (second,) = run(tmp_path, keep=60)
    assert second != first and ended(first)


def test_a_kept_worker_whose_imported_code_changed_ends(tmp_path, folder):
    """The model imports helper.py (a neighbour, imported once per process: the model file itself is loaded by its
    content). After helper.py is edited, a kept worker would answer with the old code under the new cache keys; it
    ends instead, and the run's fresh worker forecasts with the new code."""
    (first,) = run(tmp_path, keep=60)
    (tmp_path / "helper.py").write_text("OFFSET = 0.5\n")
    (second,) = run(tmp_path, keep=60)
    assert second % 1 == 0.5 and ended(first)


def test_a_kept_worker_answers_only_a_peer_holding_its_key(tmp_path, folder):
    (pid,) = run(tmp_path, keep=60)
    with pytest.raises(AuthenticationError):
        Client(str(folder / "worker-0.sock"), family="AF_UNIX", authkey=b"not the key")
    assert run(tmp_path, keep=60) == {pid}  # still serving
    assert oct((folder / "key").stat().st_mode & 0o777) == "0o600"


def test_a_kept_worker_that_hangs_is_killed_and_its_batch_fails_as_a_timeout(tmp_path, folder, monkeypatch):
    from causalrate.forecast import local

    monkeypatch.setattr(local, "GRACE_SECONDS", 1.0)
    (pid,) = run(tmp_path, keep=60)
    results = []
    executor = LocalExecutor(1, keep=60, retries=0)
    runner = threading.Thread(
        target=executor.run, args=([job(tmp_path, first=-1.0, timeout=0.5)], lambda _, r: results.append(r))
    )
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive() and results[0].errors[0].startswith(TIMEOUT)
    assert ended(pid)


def test_the_kept_workers_folder_must_be_private(tmp_path, folder):
    folder.chmod(0o755)
    with pytest.raises(UserError, match="only you can open"):
        kept.folder()
    folder.chmod(0o700)


def test_keep_loaded_asks_for_seconds_and_the_local_executor(tmp_path, folder, cli):
    """--keep-loaded -1 or "soon": exit 2 naming the flag; with Ray (whose cluster keeps its own workers): exit 2
    before anything is read. `causalrate workers` says there are none, and `--stop` ends none."""
    config = tmp_path / "absent.yaml"
    for bad in ("-1", "soon", "inf"):
        code, _, err = cli("assess", config, "--keep-loaded", bad)
        assert code == 2 and "--keep-loaded" in err, err
    code, _, err = cli("assess", config, "--keep-loaded", "30", "--executor", "ray")
    assert code == 2 and "--keep-loaded 30: kept workers are the local executor's" in err, err
    assert cli("workers") == (0, "no kept workers (assess --keep-loaded SECONDS keeps them)\n", "")
    (pid,) = run(tmp_path, keep=60)
    assert cli("workers")[:2] == (0, "worker-0   waiting for a run\n")
    assert cli("workers", "--stop") == (0, "1 kept worker(s) ended\n", "") and ended(pid)


def test_a_kept_worker_that_never_listens_is_replaced_by_one_of_the_runs(tmp_path, folder, monkeypatch, caplog):
    monkeypatch.setattr(kept, "SERVE", "import sys; sys.exit(3)")
    (pid,) = run(tmp_path, keep=60)
    assert loads(tmp_path) == [str(int(pid))] and "kept worker-0 did not start (exit code 3)" in caplog.text
    assert not list(folder.glob("*.sock"))
