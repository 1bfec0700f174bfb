"""Benchmarks of the engine itself (issue 8): overhead, scaling, re-rating.

Run: python bench/engine.py [--skip-ray] [--noop-only] [--smoke]. Prints Markdown rows for bench/RESULTS.md.

0. No-op overhead (issue 43): `naive` (a model that costs microseconds) on the quickstart's six series
   from 2012 (stride 2, the paper suite: 72,036 forecasts), no cache. End to end with the local
   executor (1 and 2 workers; the forecast stage, its workers' start included): forecasts/s, and the
   CPU seconds of the main process and of the workers. Per part, in one process (a serial executor
   that times each step of the same code): in the main process planning (perturb, impute, seeds, keys,
   batches), hand-off (pickling each job and result both ways, what crosses to a worker) and store
   (`record`: `put_forecasts`); in the worker the model (`run_job` without scoring) and the metrics
   (`worker.scored`), in µs per forecast of one core.
1. Engine overhead: the ARIMA-only quickstart forecast stage (1,800 fits) through the engine
   (one worker process, SQLite store, metrics, no cache) vs the same fits in a bare loop.
2. Scaling: the same stage with 1 and 2 workers, local pool and Ray.
3. Re-rate of the quickstart run: `rerate()` in-process and `causalrate rate` as a command.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import yaml
from common import QUICKSTART, arguments, causalrate, machine, study
from threadpoolctl import threadpool_limits

from causalrate.config import load_config
from causalrate.forecast.local import LocalExecutor
from causalrate.forecast.metrics import METRICS
from causalrate.forecast.plan import forecast_all, store_windows
from causalrate.forecast.ray_executor import RayExecutor
from causalrate.forecast.store import ForecastStore
from causalrate.forecast.worker import run_job, scored
from causalrate.perturb.suite import perturbation_seeds, placed_firsts, series_history
from causalrate.rerate import rerate
from causalrate.study import prepare


def arima_study(path: Path):
    config, base_dir = load_config(path)
    config = config.model_copy(update={"systems": [s for s in config.systems if s.type == "arima"]})
    config.forecast.cache = False
    return prepare(config, base_dir=base_dir)


def engine_stage(study, executor) -> float:
    return timed_stage(study, executor)[0]


def timed_stage(study, executor) -> tuple[float, float, float]:
    """The forecast stage's wall seconds, and the CPU seconds of this process and of its workers (their start
    included) while it ran."""
    with tempfile.TemporaryDirectory() as tmp:
        store = ForecastStore.create(Path(tmp) / "f.sqlite", metrics=METRICS.names())
        store_windows(store, study)
        before, cpu, started = os.times(), time.process_time(), time.perf_counter()
        forecast_all(study, store, cache=None, executor=executor)
        elapsed, cpu, after = time.perf_counter() - started, time.process_time() - cpu, os.times()
        store.close()
    children = after.children_user + after.children_system - before.children_user - before.children_system
    return elapsed, cpu, children


def bare_loop(study) -> float:
    from statsmodels.tsa.arima.model import ARIMA

    wd, ds = study.windows, study.dataset
    keys = [(ds.series[i].id, int(s)) for i, s in zip(wd.series_index, wd.start, strict=True)]
    inputs = [
        p.apply(
            wd.inputs,
            placed_firsts(p, ds, wd, seed=study.config.seed)[:, 0],
            seeds=perturbation_seeds(study.config.seed, p.id, keys),
            history=series_history(ds, wd),
        )
        for p in study.suite
    ]
    started = time.perf_counter()
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in inputs:
            for row in x:  # ARIMA accepts NaN; imputation would not change what it sees here
                ARIMA(row, order=(1, 1, 1)).fit().forecast(wd.horizon)
    return time.perf_counter() - started


def noop_study(smoke: bool, folder: Path):
    """The quickstart with `naive` alone on its six series from 2012 (two from mid-2021 in --smoke), no cache."""
    raw = yaml.safe_load(QUICKSTART.read_text())
    raw["data"]["start"] = "2021-06-01" if smoke else "2012-01-01"
    if smoke:
        raw["data"]["series"] = ["AAPL", "MSFT"]
    raw["systems"] = [s for s in raw["systems"] if s["type"] == "naive"]
    raw["forecast"] = {"cache": False}
    path = folder / "noop.yaml"
    path.write_text(yaml.safe_dump(raw))
    config, base_dir = load_config(path)
    return prepare(config, base_dir=base_dir)


class PartsExecutor:
    """Runs every job in this process, timing (CPU seconds of this process) each part of the forecast stage."""

    def __init__(self) -> None:
        self.parts = dict.fromkeys(("planning", "hand-off", "store", "model", "metrics"), 0.0)

    def run(self, jobs, on_done, *, expected=None, label="") -> None:
        jobs, clock = iter(jobs), time.process_time
        while True:
            started = clock()
            job = next(jobs, None)
            self.parts["planning"] += clock() - started
            if job is None:
                return
            started = clock()
            job = pickle.loads(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
            self.parts["hand-off"] += clock() - started
            started = clock()
            result = run_job(replace(job, scoring=None))
            self.parts["model"] += clock() - started
            started = clock()
            result = replace(result, **scored(job, result))
            self.parts["metrics"] += clock() - started
            started = clock()
            result = pickle.loads(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
            self.parts["hand-off"] += clock() - started
            started = clock()
            on_done(job, result)
            self.parts["store"] += clock() - started


def noop_parts(noop) -> list[tuple[str, float, str]]:
    """µs per forecast of each part, in one process; and forecasts/s end to end with 1 and 2 workers, with the
    CPU seconds of the main process and of its workers (their start and imports included)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = ForecastStore.create(Path(tmp) / "f.sqlite", metrics=METRICS.names())
        store_windows(store, noop)
        executor = PartsExecutor()
        started = time.process_time()
        made = forecast_all(noop, store, cache=None, executor=executor)["made"]
        total = time.process_time() - started
        store.close()
    parts = executor.parts
    parts["planning"] += total - sum(parts.values())  # what forecast_all does outside the jobs (its set-up, worst)
    for name, seconds in parts.items():
        where = "worker" if name in ("model", "metrics") else "main"
        rows.append((f"no-op, one process: {name} ({where})", 1e6 * seconds / made, "µs/fc"))
    main = parts["planning"] + parts["hand-off"] + parts["store"]
    rows.append(("no-op, one process: the main process's parts", 1e6 * main / made, "µs/fc"))
    rows.append(("no-op, one process: all parts", 1e6 * total / made, "µs/fc (target ≤ 40)"))
    for workers in (1, 2):
        seconds, cpu, spent = timed_stage(noop, LocalExecutor(workers))
        note = "fc/s" + (" (target ≥ 50,000 on 2 cores)" if workers == 2 else "")
        rows.append((f"no-op, {made:,} forecasts, local executor, {workers} worker(s)", made / seconds, note))
        rows.append((f"  CPU of the main process (store included), {workers} worker(s)", cpu, "s"))
        rows.append((f"  CPU of the workers (their start included), {workers} worker(s)", spent, "s"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--noop-only", action="store_true", help="only the no-op overhead (seconds, not minutes)")
    args = arguments(parser)
    print(machine())
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        noop = noop_parts(noop_study(args.smoke, Path(tmp)))
    print("\n| no-op measure | value | unit |\n|---|---|---|")
    for name, value, unit in noop:
        print(f"| {name} | {value:,.1f} | {unit} |")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    sys.stdout.flush()
    if args.noop_only:
        return
    folder = tempfile.TemporaryDirectory()
    path = study(args.smoke, Path(folder.name))
    arima = arima_study(path)
    bare = bare_loop(arima)
    one = engine_stage(arima, LocalExecutor(1))
    two = engine_stage(arima, LocalExecutor(2))
    fits = len(arima.windows) * len(arima.suite)
    rows = [
        (f"bare loop, {fits:,} ARIMA fits, 1 thread", bare, ""),
        ("engine, local executor, 1 worker", one, f"overhead {100 * (one / bare - 1):+.1f} % (target ≤ 10 %)"),
        ("engine, local executor, 2 workers", two, f"speed-up {one / two:.2f}× over 1 worker"),
    ]
    if not (args.skip_ray or args.smoke):
        import ray

        ray_times = {}
        for workers in (1, 2):
            executor = RayExecutor(workers)
            engine_stage(arima, executor)  # warm-up: workers start, imports happen
            ray_times[workers] = engine_stage(arima, executor)
            ray.shutdown()
        rows.append(("engine, Ray executor, 1 worker (warm)", ray_times[1], ""))
        rows.append(
            (
                "engine, Ray executor, 2 workers (warm)",
                ray_times[2],
                f"speed-up {ray_times[1] / ray_times[2]:.2f}× (target ≥ 1.7×)",
            )
        )
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "CAUSALRATE_CACHE_DIR": tmp}
        run = Path(tmp) / "run"
        subprocess.run(causalrate("assess", path, "--out", run, "--no-cards"), check=True, capture_output=True, env=env)
        rerate(run)  # warm imports (dowhy, sklearn) as a long-lived process would have them
        started = time.perf_counter()
        rerate(run)
        in_process = time.perf_counter() - started
        started = time.perf_counter()
        subprocess.run(causalrate("rate", run, "--no-cards"), check=True, capture_output=True, env=env)
        command = time.perf_counter() - started
    rows.append(("re-rate quickstart, in-process (`rerate()`)", in_process, "target ≤ 2 s"))
    rows.append(("re-rate quickstart, `causalrate rate` command (incl. start-up and imports)", command, ""))
    print("\n| measure | seconds | note |\n|---|---|---|")
    for name, seconds, note in rows:
        print(f"| {name} | {seconds:.2f} | {note} |")
    sys.stdout.flush()
    folder.cleanup()


if __name__ == "__main__":
    main()
