"""Benchmark: wall time of `causalrate assess studies/quickstart.yaml`, whole and by stage.

Run: python bench/quickstart.py [--repeat 3] [--workers 2]
Prints a Markdown table; paste it into bench/RESULTS.md with the machine description.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from causalrate.config import load_config
from causalrate.forecast.store import ForecastStore
from causalrate.pipeline import analyse, forecast_all, prepare
from causalrate.report.outputs import write_outputs
from causalrate.score.metrics import METRICS

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "quickstart.yaml"


def stages(workers: int) -> dict[str, float]:
    times = {}
    t = time.perf_counter()
    config, base_dir = load_config(STUDY)
    study = prepare(config, base_dir=base_dir)
    times["data + perturb + systems"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        store = ForecastStore.create(Path(tmp) / "forecasts.sqlite", metrics=METRICS.names())
        from causalrate.pipeline import _store_windows

        _store_windows(store, study)
        t = time.perf_counter()
        forecast_all(study, store, workers=workers)
        times["forecast (7,200 forecasts)"] = time.perf_counter() - t
        forecasts = store.forecasts()
        store.close()
        t = time.perf_counter()
        result = analyse(study, forecasts)
        times["score + causal + rate"] = time.perf_counter() - t
        t = time.perf_counter()
        write_outputs(study=study, result=result, out=Path(tmp))
        times["report"] = time.perf_counter() - t
    return times


def end_to_end(workers: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        cmd = ["causalrate", "assess", str(STUDY), "--out", tmp, "--workers", str(workers)]
        subprocess.run(cmd, check=True, capture_output=True)
        return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    runs = [stages(args.workers) for _ in range(args.repeat)]
    whole = [end_to_end(args.workers) for _ in range(args.repeat)]
    print(f"\n| stage | median s over {args.repeat} runs (workers={args.workers}) |\n|---|---|")
    for name in runs[0]:
        print(f"| {name} | {statistics.median(r[name] for r in runs):.1f} |")
    print(f"| `causalrate assess` end to end (process start, imports, all stages) | {statistics.median(whole):.1f} |")


if __name__ == "__main__":
    sys.exit(main())
