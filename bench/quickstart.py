"""Benchmark: wall time of `causalrate assess studies/quickstart.yaml`, whole and by stage.

Run: python bench/quickstart.py [--repeat 3] [--workers 2] [--smoke]
Prints a Markdown table; paste it into bench/RESULTS.md with the machine description.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import arguments, causalrate, machine, study

from causalrate.config import load_config
from causalrate.forecast.metrics import METRICS
from causalrate.forecast.plan import forecast_all, store_windows
from causalrate.forecast.runner import LocalExecutor
from causalrate.forecast.store import ForecastStore
from causalrate.pipeline import analyze
from causalrate.report.outputs import write_outputs
from causalrate.study import prepare


def stages(path: Path, workers: int) -> dict[str, float]:
    times = {}
    t = time.perf_counter()
    config, base_dir = load_config(path)
    config.forecast.cache = False
    study = prepare(config, base_dir=base_dir)
    times["data + perturb + systems"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        store = ForecastStore.create(Path(tmp) / "forecasts.sqlite", metrics=METRICS.names())
        store_windows(store, study)
        t = time.perf_counter()
        counts = forecast_all(study, store, cache=None, executor=LocalExecutor(workers))
        times[f"forecast ({counts['made']:,} forecasts)"] = time.perf_counter() - t
        forecasts = store.forecasts()
        store.close()
        t = time.perf_counter()
        result = analyze(study, forecasts)
        times["score + causal + rate"] = time.perf_counter() - t
        t = time.perf_counter()
        write_outputs(study=study, result=result, out=Path(tmp))
        times["report"] = time.perf_counter() - t
    return times


def end_to_end(path: Path, workers: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        env = {**os.environ, "CAUSALRATE_CACHE_DIR": tmp}  # forecast afresh every time
        cmd = causalrate("assess", path, "--out", Path(tmp) / "run", "--workers", workers, "--no-cards")
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = arguments(parser)
    print(machine())
    repeat = 1 if args.smoke else args.repeat
    with tempfile.TemporaryDirectory() as folder:
        path = study(args.smoke, Path(folder))
        runs = [stages(path, args.workers) for _ in range(repeat)]
        whole = [end_to_end(path, args.workers) for _ in range(repeat)]
    print(f"\n| stage | median s over {repeat} runs (workers={args.workers}) |\n|---|---|")
    for name in runs[0]:
        print(f"| {name} | {statistics.median(r[name] for r in runs):.1f} |")
    print(f"| `causalrate assess` end to end (start-up, imports, stages, no cards) | {statistics.median(whole):.1f} |")


if __name__ == "__main__":
    sys.exit(main())
