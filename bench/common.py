"""What the bench scripts share: the study they time, and a tiny copy of it for `--smoke` runs.

`--smoke` (every script has it) runs the same code paths on tiny sizes in seconds; CI runs it
(tests/test_bench.py) so a benchmark cannot rot unnoticed. Smoke numbers measure nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "studies" / "quickstart.yaml"


def arguments(parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    parser = parser or argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks the script still runs")
    return parser.parse_args()


def study(smoke: bool, folder: Path) -> Path:
    """The quickstart YAML, or (smoke) a copy with four series, 40-day strides and light rigor."""
    if not smoke:
        return QUICKSTART
    raw = yaml.safe_load(QUICKSTART.read_text())
    raw["data"]["series"] = ["AAPL", "MSFT", "MRK", "PFE"]
    raw["windows"]["stride"] = 40
    raw["causal"]["draws"] = 2
    raw["rigor"] = {"replicates": 10, "refute_simulations": 2}
    path = folder / "smoke.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def causalrate(*args: object) -> list[str]:
    """The command line of causalrate in this interpreter (not whatever `causalrate` is first on PATH)."""
    return [sys.executable, "-m", "causalrate", *map(str, args)]


def machine() -> str:
    return f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}"
