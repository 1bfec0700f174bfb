"""Cost of `placement: worst` on the quickstart: forecasts made and wall seconds, against the plain paper suite.

Run: python bench/worst.py [m ...]   (cache off, rigor and cards off, 2 workers; one run per setting);
--smoke: four series at a 40-day stride, m = 2 (checks the script still runs; measures nothing).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import arguments, study

from causalrate.config import load_config
from causalrate.forecast.metrics import METRICS
from causalrate.forecast.store import ForecastStore
from causalrate.pipeline import assess

PAPER = [
    {"id": "P0", "operator": "none"},
    {"id": "P1", "operator": "drop_to_zero"},
    {"id": "P2", "operator": "halve"},
    {"id": "P3", "operator": "missing"},
]


def run(candidates: int | None, yaml_path: Path) -> tuple[int, float]:
    config, base = load_config(yaml_path)
    suite = (
        PAPER
        if candidates is None
        else [PAPER[0], {"id": "W1", "operator": "drop_to_zero", "placement": "worst", "candidates": candidates}]
    )
    config = config.model_validate(
        {**config.model_dump(), "perturbations": suite, "forecast": {"cache": False}, "rigor": {"replicates": 0}}
    )
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        out = assess(config, base_dir=base, out=Path(tmp) / "run", workers=2)
        seconds = time.perf_counter() - started
        store = ForecastStore.open(out / "forecasts.sqlite", metrics=METRICS.names(), readonly=True)
        made = store.get_meta("counts")["made"]
        store.close()
    return made, seconds


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("m", nargs="*", type=int, help="candidate counts to time (default 8 20)")
    args = arguments(parser)
    settings = [None, *(args.m or ([2] if args.smoke else [8, 20]))]
    print("| suite | forecasts made | wall (s) |\n|---|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        path = study(args.smoke, Path(folder))
        for m in settings:
            made, seconds = run(m, path)
            label = "paper suite P0-P3" if m is None else f"P0 + worst drop-to-zero, m = {m}"
            print(f"| {label} | {made} | {seconds:.1f} |")
