"""Shared fixtures: synthetic data with planted effects, and a CLI runner."""

from __future__ import annotations

import importlib
import os
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.cli import main
from causalrate.systems.environments import envs_dir, python_of, recipes

# Managed environments are built once (causalrate env create, as .ci/run does) under the cache the
# session starts with; tests that give each test its own forecast cache still find them there.
os.environ.setdefault("CAUSALRATE_ENVS_DIR", str(envs_dir()))

INDUSTRY = {"A1": "Alpha", "A2": "Alpha", "B1": "Beta", "B2": "Beta", "C1": "Gamma", "C2": "Gamma"}
LEVEL = {"Alpha": 1000.0, "Beta": 100.0, "Gamma": 120.0}


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def synthetic_long_csv(path: Path, *, length: int = 160, seed: int = 1) -> Path:
    """Six series in three industries (long layout); Alpha trades near 1000, the others near 100.

    All share one random-walk path (times their level) plus small independent noise, so in relative
    terms the industries are alike: only what a test plants can separate them.
    """
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2021-01-04", periods=length)
    walk = np.cumsum(rng.normal(0, 0.01, length))
    rows = []
    for sid, industry in INDUSTRY.items():
        level = LEVEL[industry] * np.exp(walk + rng.normal(0, 0.002, length))
        rows.append(pd.DataFrame({"date": dates, "series": sid, "value": level, "industry": industry, "company": sid}))
    pd.concat(rows).to_csv(path, index=False)
    return path


def write_yaml(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def require_peer(module: str):
    """A peer library (statsforecast, mlforecast, neuralforecast...): skip without it, but fail where CI
    installs them (CAUSALRATE_REQUIRE_PEERS=1), so their tests can never silently stop running."""
    if os.environ.get("CAUSALRATE_REQUIRE_PEERS") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)


def assert_raw_in_intervals(doc: dict) -> None:
    """Every rated value lies in its own 95 % interval (METHOD §6.6), on every row of a run's ratings.json."""

    def inside(raw: float, lo: float, hi: float) -> bool:
        return lo - 1e-9 * abs(lo) <= raw <= hi + 1e-9 * abs(hi)

    outside = [
        (r["system"], r["score"], r["perturbation"], r["raw"], r["interval"])
        for r in doc["ratings"]
        if r["raw"] is not None
        and r.get("interval")
        and None not in r["interval"]
        and not inside(r["raw"], *r["interval"])
    ]
    assert not outside, outside


INLINE_SUITE = """
  - {id: P0, operator: none}
  - {id: P1, operator: drop_to_zero}
  - {id: P2, operator: halve}
  - {id: P3, operator: missing}"""


def make_synthetic_study(
    folder: Path, systems: str, *, extra: str = "", draws: int = 6, stride: int = 2, suite: str = INLINE_SUITE
) -> Path:
    """A fast study on the synthetic CSV with the planted python systems of tests/planted.py; `suite`: the
    perturbations (an inline list by default; e.g. "paper" for the shipped suite with its newest-point forecasts)."""
    synthetic_long_csv(folder / "prices.csv")
    (folder / "planted.py").write_text((Path(__file__).parent / "planted.py").read_text())
    body = f"""\
name: synthetic
seed: 3
data:
  source: csv
  path: prices.csv
  layout: long
  attribute_columns: [industry, company]
windows: {{input_length: 40, horizon: 10, stride: {stride}}}
perturbations:{suite if suite.startswith(chr(10)) else " " + suite}
outcome: rmax_scaled
causal: {{draws: {draws}}}
systems:
{textwrap.indent(textwrap.dedent(systems), "  ")}
{extra}"""
    return write_yaml(folder / "study.yaml", body)


def managed_python(name: str = "moment") -> Path | None:
    """The Python of managed environment `name`; None when it is not built (a failure where CI requires it)."""
    recipe = recipes()[name]
    if recipe.built:
        return python_of(recipe.folder)
    if os.environ.get("CAUSALRATE_REQUIRE_ENVS") == "1":
        pytest.fail(f"the {name} environment is not built in {envs_dir()}: causalrate env create {name}")
    return None


@pytest.fixture(scope="session")
def moment_python() -> Path:
    python = managed_python("moment")
    if python is None:
        pytest.skip("the moment environment is not built (causalrate env create moment)")
    return python


@pytest.fixture
def synthetic_study(tmp_path: Path):
    def make(systems: str, **kwargs) -> Path:
        return make_synthetic_study(tmp_path, systems, **kwargs)

    return make


@pytest.fixture(autouse=True)
def private_forecast_cache(tmp_path, monkeypatch):
    """Each test gets its own forecast cache, so no test passes on another's forecasts."""
    monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(tmp_path / "forecast-cache"))


@pytest.fixture(scope="module", autouse=True)
def module_forecast_cache(tmp_path_factory):
    """A module's shared fixtures (a run its tests read) get a forecast cache of their own too, never the user's:
    autouse, so it is set before them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAUSALRATE_CACHE_DIR", str(tmp_path_factory.mktemp("module-cache")))
        yield


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory) -> Path:
    """The README's quickstart run (with cards), made once per test session with a forecast cache of its own (the
    reference systems' forecasts come from the published ones, as on a user's first run)."""
    folder = tmp_path_factory.mktemp("qs")
    study = Path(__file__).parent.parent / "studies" / "quickstart.yaml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAUSALRATE_CACHE_DIR", str(folder / "forecast-cache"))
        assert main(["assess", str(study), "--out", str(folder / "run"), "--workers", "2"]) == 0
    return folder / "run"


# The end-to-end tier (`-m e2e`): tests marked so in their file, every test of these files (a bench script, an
# example, each a whole study in a subprocess), and every test that uses one of these fixtures (the session's
# quickstart run, a managed environment, the zoo's runs). The rest is the fast tier: unit, contract and rule
# tests on small synthetic studies.
E2E_FILES = {"test_bench.py", "test_examples.py", "test_example_mlforecast.py", "test_example_neuralforecast.py"}
E2E_FIXTURES = {"quickstart", "moment_python", "own_runs"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in E2E_FILES or E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Each tier's time (setup, call and teardown of its tests): `-m "not e2e"` is the fast tier."""
    spent = {"fast": [0, 0.0], "e2e": [0, 0.0]}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                tier = spent["e2e" if "e2e" in report.keywords else "fast"]
                tier[0] += report.when == "call"
                tier[1] += report.duration
    if spent["fast"][0] or spent["e2e"][0]:
        line = ", ".join(f"{name}: {n} tests in {seconds:.0f} s" for name, (n, seconds) in spent.items())
        terminalreporter.write_line(f"tiers (wall of the tests, collection apart): {line}")
