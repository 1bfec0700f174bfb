"""Issue 43: a fast system's batches travel to a worker together (one job, several calls of the model), and the
model still sees exactly its own batches; a job of several batches that crashes is tried again batch by batch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from causalrate.forecast import plan
from causalrate.forecast.encoding import forecast_values
from causalrate.forecast.jobs import Job
from causalrate.forecast.local import LocalExecutor
from causalrate.forecast.worker import run_job
from causalrate.systems.base import Batch

PLANTED = Path(__file__).parent / "planted.py"


def _job(tmp_path: Path, function: str, inputs: np.ndarray, calls: tuple[int, ...] = (), timeout: float = 30.0) -> Job:
    (tmp_path / "planted.py").write_text(PLANTED.read_text())
    rows, n = inputs.shape
    batch = Batch(
        inputs=inputs,
        horizon=2,
        seeds=np.zeros(rows, dtype=np.uint64),
        attributes=({},) * rows,
        input_dates=np.zeros((rows, n), dtype="datetime64[D]"),
        truth_dates=np.zeros((rows, 2), dtype="datetime64[D]"),
    )
    spec = {"name": "m", "type": "python", "function": f"planted.py:{function}"}
    return Job(
        "m", "P0", np.arange(rows), spec, tmp_path, timeout, batch, keys=[f"k{i}" for i in range(rows)], calls=calls
    )


def test_each_batch_of_a_job_is_one_call_of_the_model(tmp_path):
    job = _job(tmp_path, "rows_seen", np.ones((5, 4)), calls=(3, 2))
    assert [list(r) for r in job.parts] == [[0, 1, 2], [3, 4]]
    assert run_job(job).forecasts[:, 0].tolist() == [3, 3, 3, 2, 2]
    assert run_job(_job(tmp_path, "rows_seen", np.ones((5, 4)))).forecasts[:, 0].tolist() == [5] * 5
    parts = job.split()
    assert [p.window_ids.tolist() for p in parts] == [[0, 1, 2], [3, 4]] and [p.keys for p in parts] == [
        ["k0", "k1", "k2"],
        ["k3", "k4"],
    ]
    assert [p.timeout for p in parts] == [18.0, 12.0] and all(p.calls == () for p in parts)


def test_a_failing_row_fails_alone_within_its_batch_of_a_job(tmp_path):
    inputs = np.array([[1.0, 2], [3, 4], [7, 1], [8, 1]])  # flaky raises on a batch holding a first digit 7
    result = run_job(_job(tmp_path, "flaky", inputs, calls=(2, 2)))
    assert result.errors == [None, None, "RuntimeError: flaky model crashed", None]
    assert result.forecasts[[0, 1, 3], 0].tolist() == [2, 4, 1]


def test_job_rows_grow_with_the_systems_pace_and_never_split_a_batch():
    assert plan.job_rows(None, 32) == 32  # pace unknown: its own batch
    assert plan.job_rows(None, 32, quick=True) == plan.JOB_ROWS  # ... unless declared quick (System.quick)
    assert plan.job_rows(None, 4096, quick=True) == 4096  # never less than its batch
    assert plan.job_rows(1.0, 32, quick=True) == 32  # its pace, once known, decides
    assert plan.job_rows(1.0, 32) == 32  # a slow model: one batch a job
    assert plan.job_rows(1e-6, 32) == plan.JOB_ROWS
    assert plan.job_rows(plan.JOB_SECONDS / 100, 32) == 100
    batches = np.array_split(np.arange(100), 4)  # 25 rows each
    pace = {"m": plan.JOB_SECONDS / 60}  # 60 rows a job: two batches
    assert [[b.size for b in g] for g in plan._grouped(batches, pace, "m", 25)] == [[25, 25], [25, 25]]
    assert [[b.size for b in g] for g in plan._grouped(batches, {}, "m", 25)] == [[25]] * 4
    assert [[b.size for b in g] for g in plan._grouped(batches, {}, "m", 25, quick=True)] == [[25] * 4]


def test_a_crashed_job_of_several_batches_is_tried_again_batch_by_batch(tmp_path):
    inputs = np.array([[1.0, 2], [3, 4], [-1, 1], [8, 1]])  # the second batch kills its worker
    got = {}
    LocalExecutor(1, retries=0).run(
        [_job(tmp_path, "dies_on_negative", inputs, calls=(2, 2))],
        lambda job, result: got.update(
            zip(job.window_ids.tolist(), zip(result.forecasts[:, 0], result.errors, strict=True), strict=True)
        ),
    )
    assert got[0] == (2.0, None) and got[1] == (4.0, None)  # the first batch's rows are forecast
    assert all(str(got[i][1]).startswith("worker crashed (exit code 7)") for i in (2, 3))


def test_jobs_of_several_batches_store_the_same_rows_as_one_batch_a_job(synthetic_study, tmp_path, monkeypatch):
    """The forecast stage with batches gathered into jobs stores exactly the rows (forecasts, metrics) it stores
    with one batch per job: the model (here one that writes its batch's size into each forecast) sees the
    same batches."""
    from causalrate.config import load_config
    from causalrate.forecast.metrics import METRICS
    from causalrate.forecast.store import ForecastStore
    from causalrate.study import prepare

    config_path = synthetic_study(
        '- {name: m, type: python, function: "planted.py:rows_seen"}\n- {name: naive, type: naive}\n',
        draws=2,
        stride=10,
        extra="forecast: {batch_size: 7}\n",
    )
    (config_path.parent / "planted.py").write_text(PLANTED.read_text())
    config, base_dir = load_config(config_path)
    study = prepare(config, base_dir=base_dir)

    class InProcess:
        def __init__(self) -> None:
            self.calls: list[int] = []

        def run(self, jobs, on_done, *, expected, label="forecasting"):
            for job in jobs:
                self.calls.append(len(job.parts))
                on_done(job, run_job(job))

    frames = {}
    for name, seconds in (("one", 0.0), ("gathered", 1e6)):
        monkeypatch.setattr(plan, "JOB_SECONDS", seconds)
        monkeypatch.setattr(plan, "JOB_ROWS", 1 if name == "one" else 2048)  # naive is quick: large jobs at once
        store = ForecastStore.create(tmp_path / f"{name}.sqlite", metrics=METRICS.names())
        plan.store_windows(store, study)
        executor = InProcess()
        plan.forecast_all(study, store, cache=None, executor=executor)
        frames[name] = store.forecasts().drop(columns="seconds")
        assert (max(executor.calls) > 1) == (name == "gathered")
    assert {forecast_values(f)[0] for f in frames["one"]["forecast"]} >= {7.0}  # batches of 7 rows seen
    assert frames["one"].equals(frames["gathered"])


def test_rows_scored_in_the_worker_are_stored_as_when_the_main_process_scores_them(synthetic_study, tmp_path):
    """Metrics made where the forecasts are (Job.scoring) equal those the main process makes of the same answer,
    bit for bit: point forecasts, failed rows (flaky: NaN rows and raising batches) and sample paths."""
    from causalrate.config import load_config
    from causalrate.forecast.metrics import METRICS
    from causalrate.forecast.store import ForecastStore
    from causalrate.study import prepare

    systems = (
        '- {name: naive, type: naive}\n- {name: flaky, type: python, function: "planted.py:flaky"}\n'
        '- {name: paths, type: python, function: "planted.py:sample_paths"}\n- {name: random, type: random}\n'
    )
    config_path = synthetic_study(systems, draws=2, stride=10)
    (config_path.parent / "planted.py").write_text(PLANTED.read_text())
    config, base_dir = load_config(config_path)
    study = prepare(config, base_dir=base_dir)

    class InProcess:
        def __init__(self, in_worker: bool) -> None:
            self.in_worker = in_worker

        def run(self, jobs, on_done, *, expected, label="forecasting"):
            for job in jobs:
                assert job.scoring is not None and job.scoring.truth.shape == (job.size, study.windows.horizon)
                result = run_job(job if self.in_worker else replace(job, scoring=None))
                assert (result.metrics is not None) == self.in_worker
                on_done(job, result)

    frames = {}
    for in_worker in (True, False):
        store = ForecastStore.create(tmp_path / f"{in_worker}.sqlite", metrics=METRICS.names())
        plan.store_windows(store, study)
        plan.forecast_all(study, store, cache=None, executor=InProcess(in_worker))
        frames[in_worker] = store.forecasts(samples=True).drop(columns="seconds")
    frame = frames[True]
    assert frame["error"].notna().any() and frame["error"].isna().any() and frame["samples"].notna().any()
    assert frame["mae"].notna().any() and frame["crps"].notna().any()
    assert frame.equals(frames[False])


def test_a_device_worker_is_started_and_loads_its_model_before_its_first_batch(tmp_path):
    """warm(job) starts the device's worker and builds the system there at once; the run's batches then go to
    that same worker, and the seconds it took are reported apart (`startup`)."""
    job = replace(_job(tmp_path, "worker_pid", np.ones((2, 4))), accelerator="cuda:0")
    executor = LocalExecutor(2)
    executor.warm(replace(job, window_ids=np.zeros(0, dtype=int), batch=job.batch.rows(0, 0), keys=[]))
    pids = set()
    executor.run([job, job, job], lambda _, result: pids.add(result.forecasts[0, 0]))
    assert len(pids) == 1 and executor.startup["m"] > 0
    executor.warm(job)
    executor.close()  # no run followed: its worker is stopped
    assert executor._pool is None


FAILS_ONCE_ON_LOAD = """
import os, signal, time
from pathlib import Path

marker = Path(__file__).with_name("loaded-once")
if not marker.exists():  # the first load hangs where the worker's alarm cannot reach it (as C code would), or dies
    marker.write_text("")
    if os.environ.get("LOAD_DIES"):
        os._exit(9)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    time.sleep(600)


def forecast(inputs, horizon):
    import numpy as np

    return np.repeat(inputs[:, -1:], horizon, axis=1)
"""


@pytest.mark.parametrize(
    ("dies", "said"), [(False, "did not end within its time limit"), (True, "crashed (exit code 9)")]
)
def test_a_warm_up_that_hangs_or_dies_is_replaced_and_its_batches_run_in_a_fresh_worker(
    tmp_path, monkeypatch, caplog, dies, said
):
    """A model load that hangs in C code (the worker's alarm cannot interrupt it) would hold its worker, and the
    batches queued behind it, for ever; one that kills its worker would be blamed on the first batch queued. The
    main process replaces the worker (killed past the warm-up's limit) and the batches, not yet begun, run in a
    fresh worker without losing a try."""
    import threading

    from causalrate.forecast import local

    monkeypatch.setattr(local, "GRACE_SECONDS", 1.0)
    if dies:
        monkeypatch.setenv("LOAD_DIES", "1")
    (tmp_path / "slow_load.py").write_text(FAILS_ONCE_ON_LOAD)
    job = replace(_job(tmp_path, "last_value", np.array([[1.0, 2], [3, 4]]), timeout=0.5), accelerator="cuda:0")
    job = replace(job, spec={**job.spec, "function": "slow_load.py:forecast"})
    executor = LocalExecutor(1, retries=0)
    executor.warm(replace(job, window_ids=np.zeros(0, dtype=int), batch=job.batch.rows(0, 0), keys=[]))
    got = []
    runner = threading.Thread(target=executor.run, args=([job], lambda _, result: got.append(result)), daemon=True)
    runner.start()
    runner.join(timeout=60)
    if runner.is_alive():  # the old behaviour: waiting for ever; end the hung worker so the thread can finish
        for child in __import__("multiprocessing").active_children():
            child.kill()
        runner.join(timeout=60)
        raise AssertionError("the run waited on a worker hung in its warm-up")
    assert got[0].errors == [None, None] and got[0].forecasts[:, 0].tolist() == [2.0, 4.0]
    assert f"loading it ahead of its first batch {said}" in caplog.text
    assert "m" not in executor.startup  # no start-up to report: it never loaded there


def test_the_forecast_stage_warms_only_systems_with_a_model_to_load_and_forecasts_to_make(synthetic_study):
    from causalrate.config import load_config
    from causalrate.forecast.metrics import METRICS
    from causalrate.forecast.store import ForecastStore
    from causalrate.study import prepare

    config, base_dir = load_config(
        synthetic_study('- {name: m, type: python, function: "planted.py:last_value"}\n- {name: naive, type: naive}\n')
    )
    study = prepare(config, base_dir=base_dir)
    study.systems["m"].accelerator = "cuda:0"  # a routing label here: its jobs go to one worker of its own

    class Warmed:
        def __init__(self) -> None:
            self.warmed: list[str] = []
            self.closed = 0
            self.startup = {"m": 1.5}

        def warm(self, job: Job) -> None:
            assert job.size == 0 and job.accelerator == "cuda:0" and job.timeout == 30.0 * 32  # its first batch's
            self.warmed.append(job.system)

        def close(self) -> None:
            self.closed += 1

        def run(self, jobs, on_done, *, expected, label="forecasting"):
            for job in jobs:
                on_done(job, run_job(job))

    for expected in (["m"], []):  # the second run finds every forecast in the store: nothing to warm
        executor = Warmed()
        store = ForecastStore.create(base_dir / f"f{len(expected)}.sqlite", metrics=METRICS.names())
        plan.store_windows(store, study)
        if not expected:
            plan.forecast_all(study, store, cache=None, executor=Warmed())
        counts = plan.forecast_all(study, store, cache=None, executor=executor)
        assert executor.warmed == expected and executor.closed == 1
        if expected:
            assert counts["systems"]["m"]["startup"] == 1.5 and "startup" not in counts["systems"]["naive"]
            assert "1.5 s to start its worker and load it" in plan.summary_lines(counts["systems"])[0]


def test_once_a_batch_cannot_reach_its_system_the_jobs_other_batches_fail_unsent(tmp_path):
    result = run_job(_job(tmp_path, "unreachable", np.ones((3, 2)), calls=(1, 1, 1)))
    assert result.unreachable and result.errors == ["TransportError: connection refused"] * 3
    assert (tmp_path / "calls.txt").read_text() == "1\n"  # one call, not three


CALLER = """
import sys
from pathlib import Path

if __name__ != "__main__":  # spawn would run the calling script again in each worker, as __mp_main__
    Path(sys.argv[1]).write_text("imported")
else:
    import numpy as np

    from causalrate.forecast.jobs import Job
    from causalrate.forecast.local import LocalExecutor
    from causalrate.systems.base import Batch

    batch = Batch(
        inputs=np.ones((3, 4)),
        horizon=2,
        seeds=np.zeros(3, dtype=np.uint64),
        attributes=({},) * 3,
        input_dates=np.zeros((3, 4), dtype="datetime64[D]"),
        truth_dates=np.zeros((3, 2), dtype="datetime64[D]"),
    )
    job = Job("n", "P0", np.arange(3), {"name": "n", "type": "naive"}, Path("."), 30.0, batch)
    answers = []
    LocalExecutor(2).run([job, job], lambda _, result: answers.append(result.forecasts.tolist()))
    print(answers)
"""


def test_workers_do_not_run_the_calling_script_again(tmp_path):
    """A script that calls causalrate is not imported again by every spawned worker (seconds of its imports
    each): the workers answer, and the script's module-level code ran once, in its own process."""
    import subprocess
    import sys

    script, marker = tmp_path / "caller.py", tmp_path / "imported"
    script.write_text(CALLER)
    done = subprocess.run([sys.executable, script, marker], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([[[1.0, 1.0]] * 3] * 2)
    assert not marker.exists()


def test_while_no_answer_waits_the_main_process_plans_further_ahead(tmp_path):
    """While its workers start, the main process draws (plans) more jobs than it hands out, PLAN_AHEAD per worker,
    instead of waiting; every job is still answered once."""
    from causalrate.forecast import local

    job = _job(tmp_path, "rows_seen", np.ones((2, 4)))
    drawn: list[int] = []

    def jobs():
        for i in range(30):
            drawn.append(i)
            yield job

    at_answer: list[int] = []
    LocalExecutor(1).run(jobs(), lambda _, result: at_answer.append(len(drawn)), expected=lambda: 60)
    assert len(at_answer) == 30
    assert at_answer[0] >= local.PLAN_AHEAD > 2  # a feed of 2 × workers would have stopped at 2
