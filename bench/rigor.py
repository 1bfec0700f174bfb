"""Benchmark (issue 6): the rating stage of the quickstart with and without the rigor layer.

Run: python bench/rigor.py [--smoke] [--heterogeneity] (makes a quickstart run in a temporary folder
first). The fragility map is off unless asked for: it is its own stage, the same in all three rows.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from common import arguments, causalrate, study

from causalrate.config import load_config
from causalrate.forecast.metrics import METRICS
from causalrate.forecast.store import ForecastStore
from causalrate.pipeline import analyze
from causalrate.study import prepare


def timed(study, forecasts, repeat: int = 3) -> tuple[float, float]:
    """Best (least) wall and CPU seconds of `repeat` runs (a shared virtual machine only ever adds time)."""
    analyze(study, forecasts)  # warm: imports, first-call costs
    wall, cpu = [], []
    for _ in range(repeat):
        # each analyze() without a memo gets a fresh run cache (memo.RunCache): its refuters are identified
        # and matched afresh, as a new process's would be
        started, started_cpu = time.perf_counter(), time.process_time()
        analyze(study, forecasts)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return min(wall), min(cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heterogeneity", action="store_true", help="keep the fragility map on in every row")
    args = arguments(parser)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "CAUSALRATE_CACHE_DIR": tmp}
        run, path = Path(tmp) / "run", study(args.smoke, Path(tmp))
        subprocess.run(causalrate("assess", path, "--out", run, "--no-cards"), check=True, capture_output=True, env=env)
        forecasts = ForecastStore.open(run / "forecasts.sqlite", metrics=METRICS.names()).forecasts()
        config, base_dir = load_config(path)
    repeat = 1 if args.smoke else 3
    config = config.model_copy(
        update={"heterogeneity": config.heterogeneity.model_copy(update={"enabled": args.heterogeneity})}
    )
    rows = []
    for label, rigor in (
        ("without rigor (replicates: 0)", {"replicates": 0}),
        ("bootstrap, power, stability, BH (refute: false)", {"refute": False}),
        ("everything, with dowhy refuters (default)", {}),
    ):
        cfg = config.model_copy(update={"rigor": config.rigor.model_copy(update=rigor)})
        rows.append((label, timed(prepare(cfg, base_dir=base_dir), forecasts, repeat)))
    wall0, cpu0 = rows[0][1]
    print("| rating stage of the quickstart | wall s | × | CPU s | × |\n|---|---|---|---|---|")
    for label, (wall, cpu) in rows:
        print(f"| {label} | {wall:.2f} | {wall / wall0:.2f} | {cpu:.2f} | {cpu / cpu0:.2f} |")


if __name__ == "__main__":
    main()
