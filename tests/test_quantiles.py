"""Quantile forecasts at stated levels: WQL, CRPS and interval coverage against utilsforecast's losses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from utilsforecast import losses

from causalrate.forecast.metrics import METRICS
from causalrate.systems.python_system import PythonFunction, PythonSettings
from tests.test_statsforecast import batch_of

LEVELS = (0.1, 0.25, 0.5, 0.75, 0.9)


def forecasts(rows: int = 6, horizon: int = 8):
    rng = np.random.default_rng(3)
    truth = 50 + rng.normal(0, 5, (rows, horizon))
    centre = truth + rng.normal(0, 4, (rows, horizon))
    spread = np.array([-6.0, -2.0, 0.0, 2.5, 5.0])[None, :, None] * rng.uniform(0.5, 1.5, (rows, 1, 1))
    return truth, centre[:, None, :] + spread  # [rows, level, horizon], increasing in the level


def long_frame(truth: np.ndarray, grid: np.ndarray) -> pd.DataFrame:
    rows, horizon = truth.shape
    frame = pd.DataFrame({"unique_id": np.repeat(np.arange(rows), horizon), "y": truth.ravel()})
    for k, q in enumerate(LEVELS):
        frame[f"m-q-{int(q * 100)}"] = grid[:, k, :].ravel()
    frame["m-lo-80"], frame["m-hi-80"] = frame["m-q-10"], frame["m-q-90"]
    return frame


def test_scores_match_utilsforecast():
    truth, grid = forecasts()
    frame = long_frame(truth, grid)
    columns = {"m": [f"m-q-{int(q * 100)}" for q in LEVELS]}
    samples = list(grid)
    point = grid[:, LEVELS.index(0.5)]

    def ours(name):
        return METRICS.get(name)(truth, point, truth, samples, levels=LEVELS)

    wql = losses.scaled_crps(frame, columns, np.array(LEVELS))["m"].to_numpy()  # 2 Σ ρ / Σ|y|, per window
    np.testing.assert_allclose(ours("wql"), wql, rtol=1e-9)
    mq = losses.mqloss(frame, columns, np.array(LEVELS))["m"].to_numpy()  # mean pinball over levels and steps
    np.testing.assert_allclose(ours("crps"), 2 * mq, rtol=1e-9)
    covered = losses.coverage(frame, ["m"], level=80)["m"].to_numpy()
    np.testing.assert_allclose(ours("coverage_error"), np.abs(covered - 0.8), atol=1e-12)


def test_a_point_forecast_has_its_wape_as_wql():
    truth, grid = forecasts()
    point = grid[:, 2]
    wape = np.abs(truth - point).sum(axis=1) / np.abs(truth).sum(axis=1)
    np.testing.assert_allclose(METRICS.get("wql")(truth, point, truth, [None] * len(truth)), wape, rtol=1e-9)


def test_a_python_system_returns_quantiles(tmp_path):
    (tmp_path / "q.py").write_text(
        "import numpy as np\n"
        "def spread(inputs, horizon):\n"
        "    last = inputs[:, -1:, None]\n"
        "    return last + np.array([-1.0, 0.0, 1.0])[None, :, None] * np.ones((1, 1, horizon))\n"
    )
    settings = PythonSettings(function="q.py:spread", quantiles=[0.1, 0.5, 0.9])  # the rows' order
    system = PythonFunction(settings, base_dir=tmp_path)
    out = system.forecast(batch_of(np.arange(12.0).reshape(2, 6), horizon=4, season=1))
    assert system.quantile_levels == (0.1, 0.5, 0.9) and system.output == "quantiles"
    assert out.point.tolist() == [[5.0] * 4, [11.0] * 4] and out.samples.shape == (2, 3, 4)
    with pytest.raises(ValueError, match="wrong quantile shape"):
        PythonFunction(PythonSettings(function="q.py:spread", quantiles=[0.5]), base_dir=Path(tmp_path)).forecast(
            batch_of(np.ones((1, 6)), horizon=4, season=1)
        )


def test_an_http_system_returns_quantiles():
    from causalrate.systems.remote import Http, HttpSettings
    from tests.fake_servers import FakeServer, http_answer

    with FakeServer(http_answer) as served:
        system = Http(HttpSettings(url=served.url, quantiles=[0.1, 0.5, 0.9]), base_dir=Path("."))
        inputs = np.array([[1.0, 2.0, np.nan], [4.0, 5.0, 10.0]])
        out = system.forecast(batch_of(inputs, horizon=2, season=1))
    assert out.point.tolist() == [[2.0, 2.0], [10.0, 10.0]]
    np.testing.assert_allclose(out.samples[1, :, 0], [9.2, 10.0, 10.8])
    truth = np.array([[2.0, 2.5], [9.0, 12.0]])
    wql = METRICS.get("wql")(truth, out.point, inputs, list(out.samples), levels=system.quantile_levels)
    assert np.isfinite(wql).all()
