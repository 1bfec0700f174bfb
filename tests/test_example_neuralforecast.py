"""examples/neuralforecast: a pre-trained NHITS loaded from the folder its system declares (CPU torch)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.systems.python_system import PythonFunction, PythonSettings
from tests.conftest import require_peer
from tests.test_example_mlforecast import _run
from tests.test_statsforecast import batch_of

require_peer("neuralforecast")

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_forecasts_equal_neuralforecast_and_retraining_changes_the_key(tmp_path):
    from neuralforecast import NeuralForecast

    for name in ("train.py", "adapter.py"):
        shutil.copy(EXAMPLES / "neuralforecast" / name, tmp_path / name)
    shutil.copy(EXAMPLES / "mlforecast" / "make_data.py", tmp_path / "make_data.py")
    csv = _run(tmp_path, "make_data", "make", tmp_path / "load.csv")
    _run(tmp_path, "train", "train", csv, tmp_path / "trained", 24 * 21, 5)
    settings = PythonSettings(function="adapter.py:predict", files={"model": "trained"})
    system = PythonFunction(settings, base_dir=tmp_path)
    y = pd.read_csv(csv).query("unique_id == 'feeder2'")["y"].to_numpy()
    inputs = np.stack([y[500:596], y[524:620]])
    ours = system.forecast(batch_of(inputs, horizon=24, season=24))
    trained = NeuralForecast.load(str(tmp_path / "trained"))
    for row, window in zip(ours, inputs, strict=True):
        frame = pd.DataFrame({"unique_id": "w", "ds": np.arange(96), "y": window})
        np.testing.assert_allclose(row, trained.predict(df=frame)["NHITS"].to_numpy(), rtol=1e-5)
    with pytest.raises(ValueError, match="trained for horizon 24, not 12"):
        system.forecast(batch_of(inputs, horizon=12, season=24))
    before = system.identity()
    _run(tmp_path, "train", "train", csv, tmp_path / "trained", 24 * 14, 5)
    assert PythonFunction(settings, base_dir=tmp_path).identity()["files"] != before["files"]
