"""The 2026 model zoo, offline: tiny random checkpoints through the real loaders, one small assess.

Core-environment adapters (chronos2, timesfm2.5, tirex, sundial) run end to end here; the
adapters whose packages conflict with the core pins (moirai2, toto, granite-ttm, tabpfn-ts)
are checked for their own-environment recipe and their UserError when the package is absent.
"""

from __future__ import annotations

import json
import sqlite3
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
from causalrate.systems import SYSTEMS
from causalrate.systems.base import Batch, Prediction, nan_handling
from tests import tiny_zoo
from tests.test_models import HORIZON, INPUT, write_data

CORE = {"chronos2": "quantiles", "timesfm2.5": "quantiles", "tirex": "quantiles", "sundial": "samples"}
OWN_ENV = ["moirai2", "toto", "granite-ttm", "tabpfn-ts"]

STUDY = """\
name: zoo
seed: 3
data: {source: csv, path: prices.csv, layout: long, attribute_columns: [industry, company]}
windows: {input_length: %d, horizon: %d, stride: 1}
perturbations:
  - {id: P0, operator: none}
  - {id: P3, operator: missing, period: 12, phase: 6}
outcome: rmax_scaled
causal: {draws: 3, schemes: [uniform, industry]}
rigor: {replicates: 20, refute: false}
forecast: {batch_size: 8, timeout: 120}
systems:
  - {name: naive, type: naive}
  - {name: chronos2, type: chronos2, model: ckpt/chronos2}
  - {name: timesfm2.5, type: timesfm2.5, model: ckpt/timesfm25}
  - {name: tirex, type: tirex, model: ckpt/tirex}
  - {name: sundial, type: sundial, model: ckpt/sundial, num_samples: 5}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zoo")
    write_data(folder)
    for name in ("chronos2", "timesfm25", "tirex", "sundial"):
        getattr(tiny_zoo, f"build_{name}")(folder / "ckpt" / name)
    (folder / "study.yaml").write_text(STUDY % (INPUT, HORIZON))
    mp = pytest.MonkeyPatch()
    mp.setenv("CAUSALRATE_CACHE_DIR", str(folder / "cache"))
    code = main(["assess", str(folder / "study.yaml"), "--out", str(folder / "run"), "--workers", "1", "--no-cards"])
    yield {"code": code, "folder": folder}
    mp.undo()


def test_core_zoo_runs_end_to_end_with_its_output_kind(run):
    assert run["code"] == 0
    with sqlite3.connect(run["folder"] / "run" / "forecasts.sqlite") as conn:
        frame = pd.read_sql_query("SELECT system, perturbation, forecast, error, samples FROM forecasts", conn)
    for system, kind in CORE.items():
        rows = frame[frame.system == system]
        assert len(rows) and rows["error"].isna().all(), (system, rows["error"].dropna().head(2).tolist())
        assert all(np.isfinite(json.loads(f)).all() for f in rows["forecast"])
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
    assert imputed["chronos2"] is imputed["tirex"] is None  # native masks see the NaN


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
    for name in [*CORE, *OWN_ENV]:
        cls = SYSTEMS.get(name)
        line = next(line for line in listing.splitlines() if line.startswith(name + " "))
        assert nan_handling(cls) in line and cls.output in line, line
        assert bool(cls.environment_requirements) == (name in OWN_ENV)


@pytest.mark.parametrize("name", OWN_ENV)
def test_own_environment_adapter_without_its_package_is_a_user_error(name, tmp_path):
    cls = SYSTEMS.get(name)
    if find_spec(cls.package[0]) is not None:
        pytest.skip(f"{cls.package[0]} is installed here")
    extra = {"checkpoint_file": "x.ckpt"} if name == "tabpfn-ts" else {}
    system = cls(cls.Settings(model=str(tmp_path), **extra), base_dir=Path("."))
    with pytest.raises(UserError, match=f"causalrate env create {name}"):
        system.check(None)


def test_zoo_study_lists_missing_checkpoints_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(tmp_path / "cache"))
    study = Path(__file__).parents[1] / "studies" / "zoo.yaml"
    assert main(["assess", str(study), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    for name in ["chronos-2", "timesfm-2.5", "tirex", "sundial", "moirai-2", "toto", "granite-ttm", "tabpfn-ts"]:
        assert f"  - {name}: " in err
