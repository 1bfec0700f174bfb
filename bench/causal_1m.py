"""Benchmark (issue 8, measures 3 and 6): the score + causal + rating stage on 1,000,000 forecast rows.

10 systems × 4 perturbations (P0–P3) × 25,000 windows (40 series in 4 industries, 625 windows each),
with planted outcomes: R = industry baseline + planted effect(system, perturbation) + noise.
Reports the stage's wall time, the process's peak memory, and how far the estimated APEs are
from the planted effects. Run: python bench/causal_1m.py [--no-heterogeneity] (the fragility map and
its causalml self-check switched off: the stage as it was before they existed).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
from common import arguments

from causalrate.config import load_config
from causalrate.forecast.metrics import METRICS
from causalrate.pipeline import analyze
from causalrate.study import prepare

SYSTEMS, SERIES, WINDOWS_PER_SERIES, N, D = 10, 40, 625, 80, 20
SMOKE = {"SYSTEMS": 3, "SERIES": 8, "WINDOWS_PER_SERIES": 12}
PERTURBATIONS = ["P0", "P1", "P2", "P3"]


def planted_effect(system: int, perturbation: int) -> float:
    return 0.0 if perturbation == 0 else 0.002 * (system + 1) * perturbation


def build(folder: Path, *, heterogeneity: bool = True):
    rng = np.random.default_rng(0)
    length = WINDOWS_PER_SERIES + N + D - 1
    dates = pd.bdate_range("2000-01-03", periods=length)
    frames = []
    for s in range(SERIES):
        values = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, length)))
        frames.append(
            pd.DataFrame(
                {"date": dates, "series": f"S{s:02d}", "value": values, "industry": f"I{s % 4}", "company": f"S{s:02d}"}
            )
        )
    pd.concat(frames).to_csv(folder / "prices.csv", index=False)
    systems = "\n".join(f"  - {{name: s{k}, type: naive}}" for k in range(SYSTEMS))
    (folder / "study.yaml").write_text(
        textwrap.dedent(f"""\
        name: million
        data: {{source: csv, path: prices.csv, layout: long, attribute_columns: [industry, company]}}
        windows: {{input_length: {N}, horizon: {D}, stride: 1}}
        outcome: rmax_scaled
        perturbations:  # the paper's four (P0–P3): the planted outcomes cover these and no others
          - {{id: P0, operator: none}}
          - {{id: P1, operator: drop_to_zero}}
          - {{id: P2, operator: halve}}
          - {{id: P3, operator: missing}}
        forecast: {{cache: false}}
        heterogeneity: {{enabled: {str(heterogeneity).lower()}}}
        systems:
        """)
        + systems
        + "\n"
    )
    config, base_dir = load_config(folder / "study.yaml")
    study = prepare(config, base_dir=base_dir)
    w = len(study.windows)
    industry = study.table["industry"].str[1:].astype(int).to_numpy()
    parts = []
    for k in range(SYSTEMS):
        base = 0.05 + 0.02 * industry + rng.normal(0, 0.02, w)
        for j, p in enumerate(PERTURBATIONS):
            outcome = base + planted_effect(k, j) + rng.normal(0, 0.01, w)
            metrics = {name: outcome * (1 + i) for i, name in enumerate(METRICS.names())}  # every metric, planted
            parts.append(
                pd.DataFrame(
                    {
                        **metrics,
                        "system": f"s{k}",
                        "window": np.arange(w),
                        "perturbation": p,
                        "forecast": None,
                        "error": None,
                        "offsets": None,  # no recorded placement: the recency views are empty
                        "seconds": 0.0,
                        "rmax_scaled": outcome,
                        "sign_accuracy": rng.uniform(0.3, 0.7, w),
                        "series": study.table["series"].to_numpy(),
                        "start": study.table["start"].to_numpy(),
                    }
                )
            )
    return study, pd.concat(parts, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-heterogeneity", action="store_true", help="switch the fragility map off")
    args = arguments(parser)
    if args.smoke:
        globals().update(SMOKE)
    with tempfile.TemporaryDirectory() as tmp:
        study, forecasts = build(Path(tmp), heterogeneity=not args.no_heterogeneity)
        print(f"rows: {len(forecasts):,}; windows: {len(study.windows):,}; systems: {SYSTEMS}")
        started, started_cpu = time.perf_counter(), time.process_time()
        result = analyze(study, forecasts)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    effects = result.evidence.effects
    errors = {"ape_true": [], "ape_adj (industry scheme)": [], "ape_obs (industry scheme)": []}
    for row in effects.itertuples():
        truth = planted_effect(int(row.system[1:]), PERTURBATIONS.index(row.perturbation))
        if row.scheme == "uniform":
            errors["ape_true"].append(abs(row.ape_true - truth))
        if row.scheme == "industry":
            errors["ape_adj (industry scheme)"].append(abs(row.ape_adj - truth))
            errors["ape_obs (industry scheme)"].append(abs(row.ape_obs - truth))
    print("\n| measure | value | target |\n|---|---|---|")
    what = "without the fragility map" if args.no_heterogeneity else "fragility map included"
    print(f"| score + causal + rate on {len(forecasts):,} rows ({what}) | {elapsed:.1f} s | ≤ 15 s |")
    print(f"| CPU seconds of the stage | {cpu:.1f} s | |")
    print(f"| peak memory of the process (ru_maxrss) | {peak:.0f} MiB | |")
    for name, values in errors.items():
        print(f"| max abs error of {name} vs planted effect | {max(values):.5f} | planted effects 0.002–0.06 |")


if __name__ == "__main__":
    main()
