"""The 2026 model zoo, offline: tiny random checkpoints through the real loaders, one small assess.

Core-environment adapters (chronos2, timesfm2.5, tirex, sundial) run end to end here; the
adapters whose packages conflict with the core pins (moirai2, toto, granite-ttm, tabpfn-ts) run
end to end in their own managed environments (tiny checkpoints built there by the packages' own
classes), skipped where an environment is not built unless CAUSALRATE_REQUIRE_ENVS=1 (CI).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("chronos")
pytest.importorskip("tirex")

from causalrate.cli import main
from causalrate.errors import UserError
from causalrate.forecast.encoding import forecast_values
from causalrate.systems import SYSTEMS
from causalrate.systems.base import Batch, Prediction, nan_handling
from causalrate.systems.environments import recipes
from tests import tiny_zoo
from tests.conftest import managed_python
from tests.test_models import HORIZON, INPUT, write_data
from tests.tiny_models import build_in

CORE = {
    "chronos2": "quantiles",
    "timesfm2.5": "quantiles",
    "timesfm3": "quantiles",
    "tirex": "quantiles",
    "sundial": "samples",
}
OWN_ENV = {  # type → (builder run in its environment, the study's system entry, output kind)
    "moirai2": (tiny_zoo.build_moirai2, "{model: ckpt/moirai2, context_length: 32}", "quantiles"),
    "toto": (tiny_zoo.build_toto, "{model: ckpt/toto, num_samples: 4}", "samples"),
    "granite-ttm": (tiny_zoo.build_granite_ttm, "{model: ckpt/granite-ttm}", "point"),
    "tabpfn-ts": (tiny_zoo.build_tabpfn, "{model: ckpt/tabpfn-ts, checkpoint_file: tabpfn-tiny.ckpt}", "quantiles"),
    "tirex2": (tiny_zoo.build_tirex2, "{model: ckpt/tirex2}", "quantiles"),
    "flowstate": (tiny_zoo.build_flowstate, "{model: ckpt/flowstate}", "quantiles"),
}
# in an own environment, but tested by one forecast there rather than in the assess study: the same package
# and pipeline as tabpfn-ts (run end to end above), and TabPFN's runs cost minutes of CI
DIRECT = {"tabpfn-ts3": "tabpfn-ts"}
# adapters no test here can run, and why (the same reason is in the adapter's module docstring)
UNTESTED = {
    "toto2": "toto-2 requires Python >= 3.12; no Python 3.12 can be installed from the registries reachable here"
}
WIDTH = {"quantiles": 9, "samples": 4, "point": 0}  # float64 values per horizon step in the samples column


def environment_of(name: str) -> str:
    """The managed environment a type runs in: its own, or the one it shares (flowstate: granite-ttm's)."""
    return SYSTEMS.get(name).environment_name or name


def assert_nan_policy(frame: pd.DataFrame, name: str) -> None:
    """A system that takes NaN is handed it: its P3 forecasts (own handling) differ from its P3+ffill ones;
    one that does not is imputed by causalrate, so P3 is already forward-filled and P3+ffill is never made."""
    rows = frame[frame.system == name].pivot_table(
        index="window", columns="perturbation", values="forecast", aggfunc="first"
    )
    if SYSTEMS.get(name).accepts_nan:
        assert (rows["P3"] != rows["P3+ffill"]).any(), name
    else:
        assert "P3+ffill" not in rows, name


def study_yaml(name: str, *, timeout: int, systems: str) -> str:
    """A small study on the planted prices: clean, a missing value two ways (own handling, ffill), 3 draws."""
    return f"""\
name: {name}
seed: 3
data: {{source: csv, path: prices.csv, layout: long, attribute_columns: [industry, company]}}
windows: {{input_length: {INPUT}, horizon: {HORIZON}, stride: 1}}
perturbations:
  - {{id: P0, operator: none}}
  - {{id: P3, operator: missing, period: 12, phase: 6}}
  - {{id: P3+ffill, operator: missing, period: 12, phase: 6, impute: ffill, for_systems: nan-accepting}}
outcome: rmax_scaled
causal: {{draws: 3, schemes: [uniform, industry]}}
rigor: {{bootstrap_size: 20, refute: false}}
forecast: {{batch_size: 8, timeout: {timeout}}}
systems:
  - {{name: naive, type: naive}}
{systems}"""


CORE_SYSTEMS = """\
  - {name: chronos2, type: chronos2, model: ckpt/chronos2}
  - {name: timesfm2.5, type: timesfm2.5, model: ckpt/timesfm25}
  - {name: timesfm3, type: timesfm3, model: ckpt/timesfm3}
  - {name: tirex, type: tirex, model: ckpt/tirex}
  - {name: sundial, type: sundial, model: ckpt/sundial, num_samples: 5}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zoo")
    write_data(folder)
    for name in ("chronos2", "timesfm25", "timesfm3", "tirex", "sundial"):
        getattr(tiny_zoo, f"build_{name}")(folder / "ckpt" / name)
    (folder / "study.yaml").write_text(study_yaml("zoo", timeout=120, systems=CORE_SYSTEMS))
    mp = pytest.MonkeyPatch()
    mp.setenv("CAUSALRATE_CACHE_DIR", str(folder / "cache"))
    code = main(["assess", str(folder / "study.yaml"), "--out", str(folder / "run"), "--workers", "1", "--no-cards"])
    yield {"code": code, "folder": folder}
    mp.undo()


@pytest.mark.e2e
def test_core_zoo_runs_end_to_end_with_its_output_kind(run):
    assert run["code"] == 0
    with sqlite3.connect(run["folder"] / "run" / "forecasts.sqlite") as conn:
        frame = pd.read_sql_query("SELECT system, window, perturbation, forecast, error, samples FROM forecasts", conn)
    for system, kind in CORE.items():
        rows = frame[frame.system == system]
        assert len(rows) and rows["error"].isna().all(), (system, rows["error"].dropna().head(2).tolist())
        assert all(np.isfinite(forecast_values(f)).all() for f in rows["forecast"])
        assert_nan_policy(frame, system)
        width = {"quantiles": 9, "samples": 5}[kind]  # the quantile grid or the sample paths, float64
        assert rows["samples"].map(lambda b: len(b) // 8).eq(width * HORIZON).all(), system
    scores = pd.read_csv(run["folder"] / "run" / "scores.csv")
    crps = scores[scores.score == "crps"].set_index(["system", "perturbation"])["raw"]
    for system in CORE:
        assert np.isfinite(crps.loc[system]).all()
    doc = json.loads((run["folder"] / "run" / "ratings.json").read_text())
    rated = {r["system"] for r in doc["ratings"] if r["rating"] is not None}
    assert set(CORE) <= rated
    imputed = {s["name"]: s["imputation"] for s in doc["systems"]}
    assert imputed["timesfm2.5"] == imputed["sundial"] == "ffill"  # no NaN mask: imputed by causalrate, on the card
    assert imputed["chronos2"] is imputed["tirex"] is imputed["timesfm3"] is None  # their own handling sees the NaN


def test_native_mask_forecasts_differ_from_imputed_input(tmp_path):
    """A NaN-masking model sees the gap itself: its forecast differs from the one of the forward-filled window."""
    cls = SYSTEMS.get("chronos2")
    system = cls(cls.Settings(model=str(tiny_zoo.build_chronos2(tmp_path / "c2"))), base_dir=tmp_path)
    x = 100 + np.cumsum(np.random.default_rng(1).normal(size=(1, 24)), axis=1)
    gap = x.copy()
    gap[0, 10:14] = np.nan
    filled = x.copy()
    filled[0, 10:14] = x[0, 9]
    days = np.tile(np.arange(24).astype("datetime64[D]"), (1, 1))

    def point(inputs):
        batch = Batch(inputs, 4, np.zeros(1, np.uint64), ({},), days, days[:, :4])
        return Prediction.of(system.forecast(batch), rows=1, horizon=4).point

    assert np.isfinite(point(gap)).all()
    assert not np.allclose(point(gap), point(filled))


def test_timesfm3_interpolates_missing_inputs_inside_its_api(tmp_path):
    """TimesFM 3.0 is handed the NaN (its policy is the package's): its forecast of a gap is its forecast
    of the linearly interpolated window, not of the forward-filled one."""
    cls = SYSTEMS.get("timesfm3")
    assert cls.accepts_nan and cls.nan_policy == "linearly interpolated inside its API"
    system = cls(cls.Settings(model=str(tiny_zoo.build_timesfm3(tmp_path / "t3"))), base_dir=tmp_path)
    x = 100 + np.cumsum(np.random.default_rng(1).normal(size=(1, 24)), axis=1)
    gap = x.copy()
    gap[0, 10:14] = np.nan
    interpolated = x.copy()
    interpolated[0, 10:14] = np.interp(np.arange(10, 14), [9, 14], x[0, [9, 14]])
    filled = x.copy()
    filled[0, 10:14] = x[0, 9]
    days = np.tile(np.arange(24).astype("datetime64[D]"), (1, 1))

    def point(inputs):
        batch = Batch(inputs, 4, np.zeros(1, np.uint64), ({},), days, days[:, :4])
        return Prediction.of(system.forecast(batch), rows=1, horizon=4).point

    np.testing.assert_allclose(point(gap), point(interpolated), rtol=1e-6)
    assert not np.allclose(point(gap), point(filled))


def test_seeded_sampling_is_batch_independent(tmp_path):
    cls = SYSTEMS.get("sundial")
    system = cls(cls.Settings(model=str(tiny_zoo.build_sundial(tmp_path / "s")), num_samples=7), base_dir=tmp_path)
    x = 50 + np.cumsum(np.random.default_rng(2).normal(size=(3, 16)), axis=1)
    days = np.tile(np.arange(16).astype("datetime64[D]"), (3, 1))
    seeds = np.array([11, 12, 13], dtype=np.uint64)
    whole = system.forecast(Batch(x, 4, seeds, ({},) * 3, days, days[:, :4])).samples
    alone = system.forecast(Batch(x[1:2], 4, seeds[1:2], ({},), days[:1], days[:1, :4])).samples
    np.testing.assert_array_equal(whole[1], alone[0])


def test_every_zoo_adapter_states_nan_policy_output_and_environment(capsys):
    assert main(["systems"]) == 0
    listing = capsys.readouterr().out
    for name in [*CORE, *OWN_ENV, *DIRECT, *UNTESTED]:
        cls = SYSTEMS.get(name)
        line = next(line for line in listing.splitlines() if line.startswith(name + " "))
        assert nan_handling(cls) in line and cls.output in line, line
        assert bool(cls.environment_requirements) == (name not in CORE)
        assert cls.licence is None or cls.licence in line
        assert all(pin in line for pin in cls.pins_relaxed), line  # e.g. "torch<2.5,>=2.1 → 2.13.0"
        assert all(f"{package} (--no-deps)" in line for package in cls.environment_no_deps), line
    assert "pins relaxed: torch<2.5,>=2.1 → 2.13.0" in listing


@pytest.mark.parametrize("name", [*OWN_ENV, *DIRECT, *UNTESTED])
def test_own_environment_adapter_without_its_package_is_a_user_error(name, tmp_path):
    cls = SYSTEMS.get(name)
    if find_spec(cls.package[0]) is not None:
        pytest.skip(f"{cls.package[0]} is installed here")
    extra = {"checkpoint_file": "x.ckpt"} if name.startswith("tabpfn-ts") else {}
    system = cls(cls.Settings(model=str(tmp_path), **extra), base_dir=Path("."))
    with pytest.raises(UserError, match=f"causalrate env create {environment_of(name)}"):
        system.check(None)


def test_zoo_study_lists_missing_checkpoints_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(tmp_path / "cache"))
    study = Path(__file__).parents[1] / "studies" / "zoo.yaml"
    assert main(["assess", str(study), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    names = ["chronos-2", "timesfm-2.5", "tirex", "sundial", "moirai-2", "toto", "granite-ttm", "tabpfn-ts"]
    for name in [*names, "timesfm-3.0", "tirex-2", "toto-2.0", "tabpfn-ts-3", "flowstate"]:
        assert f"  - {name}: " in err


def test_tabpfn_ts3_drops_rows_with_a_missing_target(tmp_path):
    """TabPFN-TS 3 on a tiny v3 regressor in the tabpfn-ts environment: its adapter's forecast of a window with a
    gap is the package's forecast of the same context with that row left out (NaN rows are dropped, not filled)."""
    python = managed_python(DIRECT["tabpfn-ts3"])
    if python is None:
        pytest.skip("the tabpfn-ts environment is not built (causalrate env create tabpfn-ts)")
    out = build_in(python, tiny_zoo.tabpfn3_forecasts_without_nan_rows, tmp_path / "tabpfn-ts3")
    assert np.isfinite(out["adapter"]).all() and len(out["adapter"]) == 4
    np.testing.assert_allclose(out["adapter"], out["without_the_row"], rtol=1e-9)
    assert SYSTEMS.get("tabpfn-ts3").accepts_nan


@pytest.fixture(scope="module")
def own_runs(tmp_path_factory):
    """One study of every built own-environment model, assessed twice (fresh caches): runs and their folder.

    Twelve series (a window each) keep TabPFN-TS, about a second a row on CPU, to a minute a run; the checkpoints
    are built, and the two assessments run, side by side (each mostly one process waiting on another: CI has 2 cores).
    """
    folder = tmp_path_factory.mktemp("zoo-own")
    write_data(folder, series=12)
    built = {name: python for name in OWN_ENV if (python := managed_python(environment_of(name))) is not None}
    if not built:
        pytest.skip("no own-environment zoo model is built (causalrate env create moirai2 | toto | granite-ttm | …)")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda n: build_in(built[n], OWN_ENV[n][0], folder / "ckpt" / n), built))
    systems = "".join(f"  - {{name: {name}, type: {name}, {OWN_ENV[name][1][1:]}\n" for name in built)
    (folder / "study.yaml").write_text(study_yaml("zoo-own", timeout=300, systems=systems))
    processes = []
    for run in ("run", "rerun"):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "CAUSALRATE_CACHE_DIR": str(folder / f"cache-{run}")}
        argv = [sys.executable, "-m", "causalrate", "assess", str(folder / "study.yaml"), "--out", str(folder / run)]
        with (folder / f"{run}.log").open("w") as log:
            processes.append(subprocess.Popen([*argv, "--workers", "1", "--no-cards"], env=env, stdout=log, stderr=log))
    codes = [process.wait() for process in processes]
    yield {"codes": codes, "folder": folder, "built": sorted(built)}


def forecasts(run: Path) -> pd.DataFrame:
    with sqlite3.connect(run / "forecasts.sqlite") as conn:
        query = "SELECT system, window, perturbation, forecast, error, samples FROM forecasts"
        return pd.read_sql_query(query, conn).sort_values(["system", "window", "perturbation"], ignore_index=True)


def test_own_environment_zoo_runs_end_to_end_with_its_output_kind(own_runs):
    logs = [(own_runs["folder"] / f"{run}.log").read_text()[-2000:] for run in ("run", "rerun")]
    assert own_runs["codes"] == [0, 0], logs
    frame = forecasts(own_runs["folder"] / "run")
    for name in own_runs["built"]:
        rows = frame[frame.system == name]
        assert len(rows) and rows["error"].isna().all(), (name, rows["error"].dropna().head(2).tolist())
        assert all(
            forecast_values(f).shape == (HORIZON,) and np.isfinite(forecast_values(f)).all() for f in rows["forecast"]
        )
        width = WIDTH[OWN_ENV[name][2]]
        assert rows["samples"].map(lambda b: 0 if b is None else len(b) // 8).eq(width * HORIZON).all(), name
        assert_nan_policy(frame, name)
    doc = json.loads((own_runs["folder"] / "run" / "ratings.json").read_text())
    systems = {s["name"]: s for s in doc["systems"]}
    rated = {r["system"] for r in doc["ratings"] if r["rating"] is not None}
    for name in own_runs["built"]:
        cls = SYSTEMS.get(name)
        assert name in rated
        assert systems[name]["imputation"] == (None if cls.accepts_nan else "ffill")  # the NaN policy, on the card
        assert systems[name]["pins_relaxed"] == list(cls.pins_relaxed)


def test_own_environment_card_states_the_relaxed_pins(own_runs):
    run = own_runs["folder"] / "run"
    assert main(["card", str(run), "--format", "md,html"]) == 0
    for name in own_runs["built"]:
        card = next(run.rglob(f"*{name}*.md")).read_text()
        pins = SYSTEMS.get(name).pins_relaxed
        stated = "own environment with pins relaxed: " + "; ".join(pins)  # Markdown is not HTML-escaped
        assert (stated in card) == bool(pins), card[:600]


def test_own_environment_zoo_is_deterministic_on_rerun(own_runs):
    """Fresh caches, same seed: the same forecasts (sampling models included) and a byte-identical ratings.json."""
    first, second = (forecasts(own_runs["folder"] / run) for run in ("run", "rerun"))
    pd.testing.assert_frame_equal(first, second)
    ratings = [(own_runs["folder"] / run / "ratings.json").read_bytes() for run in ("run", "rerun")]
    assert ratings[0] == ratings[1]


@pytest.mark.parametrize("name", OWN_ENV)
def test_pip_check_complaints_are_the_relaxed_pins_the_adapter_states(name):
    """Every complaint pip check recorded at build time names a package the adapter's pins_relaxed declares."""
    if managed_python(environment_of(name)) is None:
        pytest.skip(f"the {environment_of(name)} environment is not built")
    cls, complaints = SYSTEMS.get(name), recipes()[environment_of(name)].record()["pip_check"]
    stated = " ".join(cls.pins_relaxed).lower()
    for complaint in complaints:  # "X 1.0 has requirement torch<2.5, but you have …" / "X 1.0 requires jax, which …"
        package = re.search(r"(?:has requirement|requires) ([A-Za-z0-9_.-]+)", complaint).group(1).lower()
        assert re.search(rf"(^|[\s,]){re.escape(package)}([\s,:<>=~\[]|$)", stated), complaint
    assert bool(complaints) == bool(cls.environment_no_deps)  # --no-deps with relaxed pins, and pip sees it
