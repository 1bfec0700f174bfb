"""Studies of any size (issue 42, item 3): 1-6 series, 3-120 windows, 1-6 systems, with and without attributes,
an always-failing system or not. Every stage degrades with a stated reason instead of crashing: no traceback,
exit 0, every system has every row its peers have, and the failing system's rows are all insufficient (worst)."""

import json
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import write_yaml

KINDS = ["naive", "seasonal_naive", "random", "naive", "seasonal_naive", "random"]
INPUT, HORIZON, STRIDE = 12, 4, 2


def _study(folder: Path, *, series: int, windows: int, systems: int, attributes: bool, failing: bool) -> Path:
    """A study of random walks with exactly `windows` windows per series, fast systems and the paper's P0-P3."""
    length = INPUT + HORIZON + (windows - 1) * STRIDE
    rng = np.random.default_rng(series * 1000 + windows)
    frames = []
    for i in range(series):
        frame = pd.DataFrame(
            {
                "date": pd.bdate_range("2022-01-03", periods=length),
                "series": f"S{i}",
                "value": 100 + np.cumsum(rng.normal(0, 1, length)),
            }
        )
        if attributes:
            frame["industry"] = f"I{i % 2}"
        frames.append(frame)
    pd.concat(frames).to_csv(folder / "data.csv", index=False)
    (folder / "planted.py").write_text((Path(__file__).parent / "planted.py").read_text())
    lines = [f"- {{name: s{j}, type: {KINDS[j]}}}" for j in range(systems)]
    if failing:
        lines.append('- {name: broken, type: python, function: "planted.py:always_fails"}')
    attribute = "\n  attribute_columns: [industry]" if attributes else ""
    body = f"""\
name: sweep
seed: 1
data:
  source: csv
  path: data.csv
  layout: long{attribute}
windows: {{input_length: {INPUT}, horizon: {HORIZON}, stride: {STRIDE}}}
perturbations:
  - {{id: P0, operator: none}}
  - {{id: P1, operator: drop_to_zero}}
  - {{id: P2, operator: halve}}
  - {{id: P3, operator: missing}}
causal: {{draws: 3}}
rigor: {{bootstrap_size: 20, refute_simulations: 2}}
systems:
{textwrap.indent(chr(10).join(lines), "  ")}
"""
    return write_yaml(folder / "study.yaml", body)


# (series, windows per series, systems, attributes, an always-failing system): the edges the issue hit (one
# series; 9 windows, where the data-subset refuter indexed an empty pool; 24 windows in all, where the
# meta-learner self-check fitted on no sample) and a spread of the ranges between
CASES = [
    (1, 3, 1, False, False),
    (1, 40, 2, False, True),
    (2, 9, 2, True, True),
    (6, 4, 2, True, True),
    (6, 3, 6, True, False),
    (3, 120, 1, True, True),
]


@pytest.mark.parametrize(("series", "windows", "systems", "attributes", "failing"), CASES)
def test_a_study_of_any_size_is_rated_without_a_traceback(tmp_path, cli, series, windows, systems, attributes, failing):
    config = _study(tmp_path, series=series, windows=windows, systems=systems, attributes=attributes, failing=failing)
    run = tmp_path / "run"
    code, _out, err = cli("assess", config, "--no-cards", "--out", run, "--workers", "1", "--allow-failed-systems")
    assert code == 0, err
    assert "Traceback" not in err
    doc = json.loads((run / "ratings.json").read_text())
    rows: dict[str, set[tuple[str, str]]] = {}
    for r in doc["ratings"]:
        rows.setdefault(r["system"], set()).add((r["score"], r["perturbation"]))
    expected = {f"s{j}" for j in range(systems)} | ({"broken"} if failing else set())
    assert set(rows) == expected
    every = set.union(*rows.values())
    for system, have in rows.items():
        assert have == every, (system, sorted(every - have))  # no system loses a row, the failing one included
    assert all(reason for reason in doc["not_rated"].values())  # what is not rated says why
    if failing:
        broken = [r for r in doc["ratings"] if r["system"] == "broken"]
        scores = {r["score"] for r in broken}
        assert {"ape", "failure_rate", "smape"} <= scores
        if attributes:
            assert {"ape_industry", "pie_industry"} <= scores
        for r in broken:
            assert r["insufficient"] and r["rating"] == doc["levels"], r
