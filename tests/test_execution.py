"""Issues 18 and 14: spawned workers carry plugins, die with their parent, take Ctrl-C quietly; failed systems."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

PLUGIN = '''
import numpy as np

from causalrate.causal.schemes import SCHEMES, Scheme
from causalrate.systems.base import SYSTEMS, System
from causalrate.perturb.operators import OPERATORS, Operator
from causalrate.score.scores import SCORES, Score


@OPERATORS.register("negate")
class Negate(Operator):
    description = "a value's sign is flipped"

    def apply(self, values, mask, *, seeds, **params):
        values[mask] = -values[mask]
        return values


@SYSTEMS.register("last-plus-one")
class LastPlusOne(System):
    """The last value plus one."""

    accepts_nan = False

    def forecast(self, batch):
        return np.repeat(batch.inputs[:, -1:], batch.horizon, axis=1) + 1.0


@SCORES.register("mean_outcome")
class MeanOutcome(Score):
    label = "mean outcome"
    description = "the mean of the outcome metric"

    def compute(self, evidence):
        rows = evidence.forecasts.groupby(["system", "perturbation"], as_index=False)["outcome"].mean()
        return rows.rename(columns={"outcome": "raw"})


@SCHEMES.register("even_first")
class EvenFirst(Scheme):
    description = "even windows are perturbed more often"

    def probabilities(self, table, *, high, low):
        return np.where(np.arange(len(table)) % 2 == 0, high, low)
'''


def run_cli(*args, cwd: Path, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter: nothing the test process imported helps it."""
    return subprocess.run(
        [sys.executable, "-m", "causalrate", *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def plugin_study(folder: Path, synthetic_study, plugins: str) -> Path:
    config = synthetic_study(
        "- {name: plus-one, type: last-plus-one}\n- {name: naive, type: naive}\n",
        draws=2,
        stride=20,
        extra=textwrap.dedent(f"""\
            plugins: {plugins}
            rigor: {{bootstrap_size: 0}}
            """),
    )
    (folder / "my_plugin.py").write_text(PLUGIN)
    text = config.read_text().replace("operator: halve", "operator: negate")
    config.write_text(text.replace("causal: {draws: 2}", "causal: {draws: 2, schemes: [uniform, even_first]}"))
    return config


def check_plugin_run(run: Path, cwd: Path, env: dict | None = None) -> None:
    ratings = json.loads((run / "ratings.json").read_text())
    text = json.dumps(ratings)
    assert "mean_outcome" in text and "even_first" in text and "P2" in text
    with sqlite3.connect(run / "forecasts.sqlite") as db:
        failed = db.execute("SELECT count(*) FROM forecasts WHERE system = 'plus-one' AND error IS NOT NULL")
        assert failed.fetchone()[0] == 0  # the plugin system forecast in every worker
    # card, rate and export import the run's plugins themselves (fresh processes)
    for command in (["card", run, "--format", "md"], ["rate", run, "--no-cards"], ["export", run]):
        done = run_cli(*command, cwd=cwd, env=env)
        assert done.returncode == 0, (command, done.stderr)


def test_plugin_file_of_each_kind_travels_to_spawned_workers_and_run_commands(synthetic_study, tmp_path):
    config = plugin_study(tmp_path, synthetic_study, "[my_plugin.py]")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # the plugin file is found relative to the YAML, not the working directory
    done = run_cli("assess", config, "--out", tmp_path / "run", "--no-cards", "--workers", "2", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    check_plugin_run(tmp_path / "run", cwd=elsewhere)


def test_plugin_module_of_each_kind_travels_to_ray_workers(synthetic_study, tmp_path):
    pytest.importorskip("ray")
    config = plugin_study(tmp_path, synthetic_study, "[my_plugin]")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    run = tmp_path / "run"
    done = run_cli(
        "assess", config, "--out", run, "--no-cards", "--workers", "1", "--executor", "ray", cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    check_plugin_run(run, cwd=tmp_path, env=env)


def test_an_unknown_registered_name_is_a_user_error(synthetic_study, cli):
    config = synthetic_study("- {name: naive, type: naive}\n", draws=2, stride=20)
    config.write_text(config.read_text().replace("operator: halve", "operator: negate"))
    code, _, err = cli("assess", config, "--no-cards")
    assert code == 2 and "negate" in err and "Traceback" not in err


def children(pid: int) -> set[int]:
    """Processes whose parent is pid (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_slow_run(synthetic_study, tmp_path: Path) -> tuple[subprocess.Popen, Path, list]:
    systems = '- {name: slow, type: python, function: "planted.py:slow_last"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(systems, draws=2, stride=6, extra="forecast: {batch_size: 4, cache: false}\n")
    command = [sys.executable, "-m", "causalrate", "assess", str(config), "--no-cards", "--workers", "2"]
    run = tmp_path / "run"
    env = {**os.environ, "PLANTED_SLOW": "1"}  # slow in this run, the one a test interrupts
    process = subprocess.Popen(
        [*command, "--out", str(run)], stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=tmp_path, env=env
    )
    deadline, rows = time.monotonic() + 90, 0
    while time.monotonic() < deadline and rows < 12:
        time.sleep(0.2)
        try:
            # read-only: connecting read-write would create an empty forecasts.sqlite if the run has made its folder
            # but not yet its store, and the run would then refuse the folder as holding a foreign file
            with sqlite3.connect(f"file:{run / 'forecasts.sqlite'}?mode=ro", uri=True) as db:
                rows = db.execute("SELECT count(*) FROM forecasts").fetchone()[0]
        except sqlite3.OperationalError:
            pass
    assert rows >= 12, "the run did not get going"
    return process, run, command


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_workers_die_with_a_killed_parent(synthetic_study, tmp_path):
    process, _, _ = start_slow_run(synthetic_study, tmp_path)
    workers = children(process.pid)
    assert len(workers) >= 2
    process.kill()  # kill -9 of the main process only: no clean-up of its own
    process.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in workers):
        time.sleep(0.2)
    assert not [p for p in workers if alive(p)]


def test_ctrl_c_stops_quietly_and_the_run_resumes(synthetic_study, tmp_path):
    process, run, command = start_slow_run(synthetic_study, tmp_path)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert f"--resume {run}" in err
    resumed = subprocess.run([*command, "--resume", str(run)], capture_output=True, text=True, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    with sqlite3.connect(run / "forecasts.sqlite") as db:
        total, distinct = db.execute(
            "SELECT count(*), count(DISTINCT system || window || perturbation) FROM forecasts"
        ).fetchone()
    assert total == distinct == 2 * 4 * 6 * 19


def test_a_system_that_fails_every_row_fails_the_run_after_writing_it(synthetic_study, cli, tmp_path):
    config = synthetic_study('- {name: broken, type: python, function: "planted.py:wrong_shape"}\n', draws=2, stride=20)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards")
    assert code == 3
    assert "broken: ValueError: wrong shape" in err
    assert (tmp_path / "run" / "ratings.json").is_file()  # written before the exit: nothing lost
    code, _, err = cli("assess", config, "--out", tmp_path / "ok", "--no-cards", "--allow-failed-systems")
    assert code == 0, err


def test_a_model_raising_keyboard_interrupt_fails_its_rows_without_worker_tracebacks(synthetic_study, tmp_path):
    config = synthetic_study('- {name: rude, type: python, function: "planted.py:interrupts"}\n', draws=2, stride=20)
    done = subprocess.run(
        [sys.executable, "-m", "causalrate", "assess", str(config), "--no-cards", "--workers", "2",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr[-3000:]  # every row failed: the run is written, exit code 3
    assert "Traceback" not in done.stderr and "rude: KeyboardInterrupt: the model's own" in done.stderr, done.stderr


def test_without_a_terminal_progress_is_plain_lines_and_each_system_is_summarised(synthetic_study, cli, tmp_path):
    """stderr to a pipe (CI, nohup): a progress line at the start and the end with the failures so far, then per
    system its forecasts, cache hits, failures and time; a second run says its forecasts came from the cache."""
    systems = '- {name: flaky, type: python, function: "planted.py:flaky"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(systems, draws=2, stride=20)
    command = [sys.executable, "-m", "causalrate", "assess", str(config), "--no-cards", "--workers", "1"]
    first = subprocess.run([*command, "--out", str(tmp_path / "a")], capture_output=True, text=True, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    total = 2 * 4 * 36  # systems × perturbations × windows
    with sqlite3.connect(tmp_path / "a" / "forecasts.sqlite") as db:
        failed = db.execute("SELECT count(*) FROM forecasts WHERE error IS NOT NULL").fetchone()[0]
    assert 0 < failed < total / 2
    assert f"causalrate: forecasting: 0/{total} forecasts (0%), 0 failed, 0 s" in first.stderr, first.stderr
    assert f"causalrate: forecasting: {total}/{total} forecasts (100%), {failed} failed" in first.stderr
    assert f"causalrate: flaky: {total // 2} forecasts (0 from the cache), {failed} failed" in first.stderr
    assert f"causalrate: naive: {total // 2} forecasts (0 from the cache), 0 failed" in first.stderr
    _, _, second = cli("assess", config, "--no-cards", "--workers", "1", "--out", tmp_path / "b")  # in this process
    half = total // 2
    assert f"causalrate: naive: {half} forecasts ({half} from the cache), 0 failed" in second, second
    assert f"causalrate: flaky: {half} forecasts ({half - failed} from the cache), {failed} failed" in second
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("causalrate 0.")


def _job_for(spec: dict, base_dir: Path):
    import numpy as np

    from causalrate.forecast.jobs import Job

    return Job("m", "P0", np.arange(1), spec, base_dir, 10.0, None)  # type: ignore[arg-type]  # _system reads no batch


def test_a_worker_builds_each_study_s_own_system_and_rebuilds_an_edited_one(tmp_path):
    """A worker keeps the systems it built between batches, keyed by the entry, the study's folder and the stats
    of the files the entry names: two studies whose `function:` shares a relative name get their own function,
    and an edited file (another size or mtime) is loaded again, in a long-lived (Ray) worker too."""
    import numpy as np

    from causalrate.forecast.worker import _system

    spec = {"name": "m", "type": "python", "function": "model.py:forecast"}
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, value in ((first, 1.0), (second, 2.0)):
        folder.mkdir()
        source = f"import numpy as np\ndef forecast(x, h):\n    return np.full((len(x), h), {value})\n"
        (folder / "model.py").write_text(source)
    inputs = np.zeros((1, 4))
    a, b = _system(_job_for(spec, first)), _system(_job_for(spec, second))
    assert a is not b
    assert a.function(inputs, 2)[0, 0] == 1.0 and b.function(inputs, 2)[0, 0] == 2.0
    assert _system(_job_for(spec, first)) is a  # built once per worker while its files stay
    edited = first / "model.py"
    edited.write_text(edited.read_text().replace("1.0", "3.25"))
    os.utime(edited, ns=(time.time_ns(), time.time_ns() + 10**9))
    rebuilt = _system(_job_for(spec, first))
    assert rebuilt is not a and rebuilt.function(inputs, 2)[0, 0] == 3.25


def test_a_checkpoint_fingerprint_follows_its_files_not_its_path(tmp_path):
    """The checkpoint hash is cached per state of the folder's files: weights rewritten in place hash anew."""
    from causalrate.systems.checkpoints import fingerprint

    folder = tmp_path / "ckpt"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"a" * 64)
    before = fingerprint(folder)
    assert fingerprint(folder) == before
    weights.write_bytes(b"b" * 65)
    assert fingerprint(folder) != before


def test_forecasting_draws_jobs_as_it_goes_not_all_planned_first(synthetic_study, tmp_path, monkeypatch):
    """forecast_all hands the executor a generator: when the first batch runs, the rest of the factorial
    (cache lookups, batches, a plot system's charts) is not planned yet, and every job still runs once."""
    from causalrate.config import load_config
    from causalrate.forecast import plan
    from causalrate.forecast.metrics import METRICS
    from causalrate.forecast.store import ForecastStore
    from causalrate.forecast.worker import run_job
    from causalrate.study import prepare

    keyed = []  # one entry per planned group (its inputs are imputed once; without a cache nothing is keyed)
    real_seen = plan.seen_inputs
    monkeypatch.setattr(plan, "seen_inputs", lambda *a, **k: keyed.append(1) or real_seen(*a, **k))

    class InProcess:
        """An executor that records how much was planned when each job was drawn, then runs it here."""

        def __init__(self) -> None:
            self.planned_at_draw: list[int] = []

        def run(self, jobs, on_done, *, expected, label="forecasting"):
            assert not isinstance(jobs, list | tuple)
            for job in jobs:
                self.planned_at_draw.append(len(keyed))
                on_done(job, run_job(job))

    config, base_dir = load_config(synthetic_study("- {name: naive, type: naive}\n", draws=2, stride=20))
    study = prepare(config, base_dir=base_dir)
    store = ForecastStore.create(tmp_path / "f.sqlite", metrics=METRICS.names())
    plan.store_windows(store, study)
    executor = InProcess()
    counts = plan.forecast_all(study, store, cache=None, executor=executor)
    groups = len(keyed)  # one (perturbation, variant, system) group is planned once
    assert groups > 1 and executor.planned_at_draw[0] == 1  # the first job ran with one group planned
    assert executor.planned_at_draw == sorted(executor.planned_at_draw) and executor.planned_at_draw[-1] == groups
    assert counts["made"] == len(store.forecasts()) == 4 * 36  # perturbations × windows, each once
