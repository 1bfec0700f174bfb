"""Benchmark: writing a run's cards (labels with PNG + PDF, reports, model cards, comparison, index).

Run: python bench/cards.py [--run RUN_DIR] [--repeat 5]      # default: assesses the quickstart first
     python bench/cards.py --smoke                           # a 2-series study, one repeat: it still works
Each repeat is a fresh process (imports included, as after `assess`), timed: the render_cards call
(wall and CPU, Chromium's included once it has exited), the whole process (wall and CPU), each with
and without PNG/PDF (no browser). Prints the load average and a Markdown table for RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, resource, sys, time
from pathlib import Path
from causalrate.report.cards import FORMATS, render_cards
def cpu():
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))
formats = tuple(f for f in FORMATS if f not in ("png", "pdf")) if sys.argv[2] == "no-browser" else FORMATS
c, t = cpu(), time.perf_counter()
written = render_cards(Path(sys.argv[1]), formats=formats, png_required=sys.argv[2] != "no-browser")
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": cpu() - c, "files": len(written)}))
"""
SMOKE = """\
name: smoke
seed: 0
data: {source: embedded, series: [AAPL, JPM], start: 2022-01-01, end: 2022-06-30}
windows: {input_length: 40, horizon: 10, stride: 10}
perturbations: paper
outcome: rmax_scaled
systems: [{name: naive, type: naive}, {name: random, type: random}, {name: biased, type: biased}]
causal: {schemes: [uniform, industry], draws: 3}
rating: {levels: 3}
"""


def assess(config: Path, out: Path) -> Path:
    cmd = [sys.executable, "-m", "causalrate", "assess", str(config), "--out", str(out), "--no-cards"]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def once(run: Path, mode: str) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(run), mode], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"render_cards failed ({mode}):\n{done.stderr[-2000:]}")
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    inner = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "render_cards": inner["seconds"],
        "render_cpu": inner["cpu"],
        "process": wall,
        "cpu": cpu,
        "files": inner["files"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a finished run directory (default: assess the quickstart)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny study, one repeat")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run
        if run is None:
            config = Path(tmp) / "smoke.yaml" if args.smoke else ROOT / "studies" / "quickstart.yaml"
            if args.smoke:
                config.write_text(SMOKE)
            run = assess(config, Path(tmp) / "run")
        repeat = 1 if args.smoke else args.repeat
        load = os.getloadavg()[0]
        results = {mode: [once(run, mode) for _ in range(repeat)] for mode in ("all", "no-browser")}
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        f"\n| cards of {run.name if args.run else ('smoke' if args.smoke else 'quickstart')} | "
        f"median over {repeat} | min (best) | max |\n|---|---|---|---|"
    )
    for mode, rows in results.items():
        for key, label in (
            ("render_cards", "render_cards call"),
            ("render_cpu", "CPU of the render_cards call, Chromium included"),
            ("process", "process (imports included)"),
            ("cpu", "CPU, process + children"),
        ):
            values = [r[key] for r in rows]
            what = f"{label}, {'with PNG + PDF' if mode == 'all' else 'no browser'}"
            print(f"| {what} | {statistics.median(values):.2f} s | {min(values):.2f} | {max(values):.2f} |")
    print(f"\nfiles written: {results['all'][0]['files']}")


if __name__ == "__main__":
    main()
