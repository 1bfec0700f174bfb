"""Benchmark: the first-use targets (issue 43) on the quickstart, each as a user runs it, fresh forecast cache.

- `causalrate assess studies/quickstart.yaml` (cards included; the reference systems' forecasts come from the
  published reference forecasts, random's are made): target 30 s wall
- `causalrate assess model.yaml` with a fast python model (a window mean) on the quickstart's setup: 30 s
- the analysis stage (`analyze()` on the run's stored forecasts, in-process, no memo): 10 s
- `causalrate rate RUN --no-cards` on the quickstart run: 2 s; `causalrate card RUN` (every format): 3 s
- with `--recompute`: the quickstart with `--no-cache` (every forecast made here, ARIMA's 4,050 fits): no target

Run: python bench/quickstart.py [--repeat 3] [--workers 2] [--recompute] [--smoke]
Prints the machine, the load average and a Markdown table (wall and CPU seconds); paste it into bench/RESULTS.md.
CPU seconds (user + sys of the command and the processes it waited for: workers, Chromium) are the figure to
compare on a shared machine, where wall time mostly measures the other jobs; a quiet machine needs little more
wall time than CPU time for the single-process commands (rate, card, analysis).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import arguments, causalrate, machine, study

from causalrate.pipeline import analyze
from causalrate.run import StoredForecasts

MODEL = '''\
import numpy as np


def window_mean(inputs, horizon):
    """The input window's mean, repeated: a model that costs microseconds."""
    return np.repeat(np.nanmean(inputs, axis=1)[:, None], horizon, axis=1)
'''


def children_cpu() -> float:
    """User + sys seconds of every finished child process so far (and the children they waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(*args: object, cache: Path) -> tuple[tuple[float, float], str]:
    """(wall, CPU) seconds of one causalrate command in a fresh process with forecast cache `cache`, and its
    stderr."""
    env = {**os.environ, "CAUSALRATE_CACHE_DIR": str(cache)}
    started, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(causalrate(*args), capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"causalrate {' '.join(map(str, args))} failed:\n{done.stderr[-3000:]}")
    return (seconds, children_cpu() - cpu), done.stderr + done.stdout


def model_yaml(folder: Path, smoke: bool) -> Path:
    (folder / "mean.py").write_text(MODEL)
    text = 'model: {name: "window mean", type: python, function: "mean.py:window_mean"}\n'
    if smoke:
        # as common.study's smoke copy (a `data:` block would replace the default whole); no fragility map, which
        # crashes on 24 windows (HistGradientBoostingRegressor on 0 samples in learners.selfcheck_draw)
        text += (
            "windows: {stride: 40}\ncausal: {draws: 2}\nrigor: {replicates: 10, refute_simulations: 2}\n"
            "heterogeneity: {enabled: false}\n"
        )
    (folder / "model.yaml").write_text(text)
    return folder / "model.yaml"


def one_turn(
    path: Path, model: Path, folder: Path, workers: int, recompute: bool, smoke: bool
) -> dict[str, tuple[float, float]]:
    """Every measure once as (wall, CPU) seconds, each command on a fresh cache."""
    times = {}
    run = folder / "run"
    cards = ["--no-cards"] if smoke else []  # smoke: the code paths, not Chromium's time (`card` still runs)
    times["assess quickstart"], log = timed(
        "assess", path, "--out", run, "--workers", workers, "--overwrite", *cards, cache=folder / "c1"
    )
    published = re.search(r"([\d,]+) from the published reference forecasts", log)
    count = float(published.group(1).replace(",", "")) if published else 0.0
    times["of which published forecasts"] = (count, count)
    stored = StoredForecasts.read(run)
    rebuilt = stored.study(run)
    started, cpu = time.perf_counter(), time.process_time()
    analyze(rebuilt, stored.rows)
    times["analysis"] = (time.perf_counter() - started, time.process_time() - cpu)
    times["rate"], _ = timed("rate", run, "--no-cards", cache=folder / "c1")
    times["card"], _ = timed("card", run, *(["--format", "html,md"] if smoke else []), cache=folder / "c1")
    times["assess model.yaml"], _ = timed(
        "assess", model, "--out", folder / "model-run", "--workers", workers, "--overwrite", *cards, cache=folder / "c2"
    )
    if recompute:
        times["assess quickstart --no-cache"], _ = timed(
            "assess", path, "--out", folder / "again", "--workers", workers, "--no-cards", "--no-cache", "--overwrite",
            cache=folder / "c3",
        )
    for name in ("c1", "c2", "c3"):  # the next turn starts from empty caches (forecasts and compiled templates)
        shutil.rmtree(folder / name, ignore_errors=True)
    return times


TARGETS = {
    "assess quickstart": ("`causalrate assess studies/quickstart.yaml` (cards, fresh cache)", 30.0),
    "of which published forecasts": ("forecasts taken from the published reference forecasts", None),
    "assess model.yaml": ("`causalrate assess model.yaml` (python window mean, cards, fresh cache)", 30.0),
    "analysis": ("analysis stage (`analyze()`, in-process, no memo)", 10.0),
    "rate": ("`causalrate rate RUN --no-cards`", 2.0),
    "card": ("`causalrate card RUN` (every format)", 3.0),
    "assess quickstart --no-cache": ("`causalrate assess studies/quickstart.yaml --no-cache --no-cards`", None),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--recompute", action="store_true", help="also time the quickstart with --no-cache")
    args = arguments(parser)
    print(machine())
    print("load average (1, 5, 15 min) at the start: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    repeat = 1 if args.smoke else args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, model = study(args.smoke, folder), model_yaml(folder, args.smoke)
        turns = [one_turn(path, model, folder, args.workers, args.recompute, args.smoke) for _ in range(repeat)]
    if args.smoke:
        print("smoke: a tiny copy of the study, without cards; the numbers below measure nothing")
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(
        f"\n| measure (workers={args.workers}) | wall, median of {repeat} | CPU, median of {repeat} | target (wall) "
        "| met (wall) |\n|---|---|---|---|---|"
    )
    for key in turns[0]:
        what, target = TARGETS[key]
        wall = statistics.median(t[key][0] for t in turns)
        cpu = statistics.median(t[key][1] for t in turns)
        if key.startswith("of which"):
            print(f"| {what} | {wall:,.0f} | — | — | — |")
        elif target is None:
            print(f"| {what} | {wall:.1f} s | {cpu:.1f} s | — | — |")
        else:
            print(f"| {what} | {wall:.1f} s | {cpu:.1f} s | ≤ {target:g} s | {'yes' if wall <= target else '**no**'} |")


if __name__ == "__main__":
    sys.exit(main())
