"""Cost of `placement: worst` on the quickstart: forecasts made and wall seconds, against the plain paper suite.

Run: python -m bench.worst [m ...]   (cache off, rigor and cards off, 2 workers; one run per setting)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from causalrate.config import load_config
from causalrate.forecast.store import ForecastStore
from causalrate.pipeline import assess
from causalrate.score.metrics import METRICS

ROOT = Path(__file__).resolve().parents[1]
PAPER = [
    {"id": "P0", "operator": "none"},
    {"id": "P1", "operator": "drop_to_zero"},
    {"id": "P2", "operator": "halve"},
    {"id": "P3", "operator": "missing"},
]


def run(candidates: int | None) -> tuple[int, float]:
    config, base = load_config(ROOT / "studies" / "quickstart.yaml")
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
    settings = [None, *(int(m) for m in sys.argv[1:])] if len(sys.argv) > 1 else [None, 8, 20]
    for m in settings:
        made, seconds = run(m)
        label = "paper suite P0-P3" if m is None else f"P0 + worst drop-to-zero, m = {m}"
        print(f"{label}: {made} forecasts made, {seconds:.1f} s")
