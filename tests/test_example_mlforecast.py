"""examples/mlforecast: a pre-trained mlforecast model loaded from the file its system declares."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.systems.python_system import PythonFunction, PythonSettings
from tests.conftest import require_peer
from tests.test_statsforecast import batch_of

require_peer("mlforecast")
require_peer("lightgbm")

EXAMPLE = Path(__file__).parent.parent / "examples" / "mlforecast"


@pytest.fixture
def example(tmp_path) -> Path:
    for name in ("make_data.py", "train.py", "adapter.py", "study.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    return tmp_path


def _run(folder: Path, script: str, function: str, *args):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"example_{script}", folder / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function)(*args)


def test_forecasts_equal_mlforecast_and_retraining_changes_the_key(example):
    from mlforecast import MLForecast

    csv = _run(example, "make_data", "make", example / "load.csv")
    _run(example, "train", "train", csv, example / "trained")
    settings = PythonSettings(function="adapter.py:predict", files={"model": "trained"})
    system = PythonFunction(settings, base_dir=example)
    y = pd.read_csv(csv).query("unique_id == 'feeder2'")["y"].to_numpy()
    inputs = np.stack([y[500:596], y[524:620]])
    ours = system.forecast(batch_of(inputs, horizon=24, season=24))
    trained = MLForecast.load(example / "trained")
    for row, window in zip(ours, inputs, strict=True):
        frame = pd.DataFrame({"unique_id": "w", "ds": np.arange(96), "y": window})
        np.testing.assert_allclose(row, trained.predict(24, new_df=frame)["lgbm"].to_numpy(), rtol=1e-12)
    assert np.abs(ours - inputs[:, :24]).mean() < 5  # it learned the daily profile
    before = system.identity()
    _run(example, "train", "train", csv, example / "trained", 24 * 14)  # retrained on less data
    assert PythonFunction(settings, base_dir=example).identity()["files"] != before["files"]
