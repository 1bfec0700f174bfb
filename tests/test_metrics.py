"""Per-forecast metrics against hand-computed values and utilsforecast."""

import numpy as np
import pandas as pd
import pytest
from utilsforecast import losses

from causalrate.forecast.metrics import METRICS, mae, mase, rmax, rmax_scaled, sign_accuracy, smape

TRUTH = np.array([[10.0, 12.0, 9.0], [0.0, 1.0, 2.0]])
FORECAST = np.array([[11.0, 10.0, 9.0], [0.0, 3.0, 2.0]])
CLEAN = np.array([[8.0, 9.0, 11.0, 10.0], [1.0, 0.0, 1.0, 0.0]])


def test_hand_computed_values():
    assert rmax(TRUTH, FORECAST, CLEAN).tolist() == [2.0, 2.0]
    assert mae(TRUTH, FORECAST, CLEAN) == pytest.approx([1.0, 2 / 3])
    # row 0: |1|/10.5 + |2|/11 + 0 ; row 1: 0 (both zero) + 2/2 + 0
    assert smape(TRUTH, FORECAST, CLEAN) == pytest.approx([(1 / 10.5 + 2 / 11) / 3, 1 / 3])
    # input one-step changes: row 0: 1, 2, 1 → 4/3 ; row 1: 1, 1, 1 → 1
    assert mase(TRUTH, FORECAST, CLEAN) == pytest.approx([1.0 / (4 / 3), 2 / 3])
    assert rmax_scaled(TRUTH, FORECAST, CLEAN) == pytest.approx([2.0 / 9.5, 2.0 / 0.5])
    # last clean value 10: truth signs 0,+,-; forecast 11,10,9 → +,0,-: wrong, no change (½), right → 1.5/3
    # row 1 last 0: truth 0,+,+ ; forecast 0,3,2 → 0,+,+: no change (½), right, right → 2.5/3
    assert sign_accuracy(TRUTH, FORECAST, CLEAN).tolist() == pytest.approx([0.5, 2.5 / 3])
    # the naive forecast (the last value repeated) calls no change at every step: exactly ½
    naive = np.repeat(CLEAN[:, -1:], 3, axis=1)
    assert sign_accuracy(TRUTH, naive, CLEAN).tolist() == [0.5, 0.5]


def test_smape_and_mase_match_utilsforecast():
    rng = np.random.default_rng(0)
    truth = rng.uniform(1, 100, (5, 7))
    forecast = rng.uniform(1, 100, (5, 7))
    clean = rng.uniform(1, 100, (5, 30))
    ids = np.repeat(np.arange(5), 7)
    df = pd.DataFrame({"unique_id": ids, "ds": np.tile(np.arange(7), 5), "y": truth.ravel(), "m": forecast.ravel()})
    train = pd.DataFrame(
        {"unique_id": np.repeat(np.arange(5), 30), "ds": np.tile(np.arange(30), 5), "y": clean.ravel()}
    )
    # utilsforecast's smape is mean |y - ŷ| / (|y| + |ŷ|), half of METHOD's definition
    ref_smape = losses.smape(df, models=["m"]).sort_values("unique_id")["m"].to_numpy()
    assert smape(truth, forecast, clean) == pytest.approx(2 * ref_smape, rel=1e-12)
    ref_mase = losses.mase(df, models=["m"], seasonality=1, train_df=train).sort_values("unique_id")["m"].to_numpy()
    assert mase(truth, forecast, clean) == pytest.approx(ref_mase, rel=1e-12)


def test_registry_directions():
    assert METRICS.get("sign_accuracy").lower_is_better is False
    assert all(METRICS.get(m).lower_is_better for m in ["rmax", "mae", "smape", "mase", "rmax_scaled"])


def test_crps_sorted_estimator_equals_pairwise_and_the_integral():
    from causalrate.forecast.metrics import crps_samples

    assert crps_samples(np.array([2.0]), np.array([[1.0], [3.0]])) == pytest.approx([0.5])  # by hand: ∫(F − H)² = 0.5
    rng = np.random.default_rng(3)
    truth, samples = rng.normal(size=6), rng.normal(size=(40, 6))
    pairwise = np.abs(samples - truth).mean(axis=0) - np.abs(samples[:, None] - samples[None]).sum(axis=(0, 1)) / (
        2 * 40**2
    )
    assert np.abs(crps_samples(truth, samples) - pairwise).max() < 1e-9
    grid = np.linspace(-8, 8, 400_001)  # CRPS = ∫ (F_ensemble(x) − 1{x ≥ y})² dx
    for step in range(2):
        cdf = np.searchsorted(np.sort(samples[:, step]), grid, side="right") / 40
        integral = np.sum((cdf - (grid >= truth[step])) ** 2) * (grid[1] - grid[0])
        assert crps_samples(truth, samples)[step] == pytest.approx(integral, abs=1e-3)


def test_crps_metric_is_mae_for_point_forecasts():
    crps = METRICS.get("crps")
    truth, forecast = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.5, 2.0], [2.0, 5.0]])
    paths = np.array([[3.0, 3.0], [5.0, 5.0]])  # row 1: two paths, row 0: a point forecast
    out = crps(truth, forecast, truth, [None, paths])
    assert out[0] == pytest.approx(mae(truth, forecast, truth)[0])
    assert out[1] == pytest.approx(0.5)  # each step: mean |x − y| = 1, minus Σ|xi − xj| / 2m² = 4 / 8


def test_quantile_metrics_on_a_mixed_batch_equal_each_row_alone_bitwise():
    """crps, wql and coverage_error group a batch by the form of its rows (point, paths of one shape) and
    compute each group at once: every row's value is bit for bit what the row gives alone."""
    rng = np.random.default_rng(11)
    n, d = 7, 5
    truth = rng.normal(10, 2, (n, d))
    forecast = truth + rng.normal(0, 1, (n, d))
    clean = rng.normal(10, 2, (n, 12))
    forms = [None, rng.normal(10, 2, (30, d)), None, rng.normal(10, 2, (30, d)), rng.normal(10, 2, (8, d)), None,
             rng.normal(10, 2, (8, d))]  # fmt: skip
    for name in ("crps", "wql", "coverage_error"):
        metric = METRICS.get(name)
        batch = metric(truth, forecast, clean, forms)
        alone = [metric(truth[i : i + 1], forecast[i : i + 1], clean[i : i + 1], [forms[i]])[0] for i in range(n)]
        assert batch.tobytes() == np.array(alone).tobytes(), name
    levels = (0.1, 0.5, 0.9)
    quantiles = [None if i % 3 == 0 else np.sort(rng.normal(10, 2, (3, d)), axis=0) for i in range(n)]
    for name in ("crps", "wql", "coverage_error"):
        metric = METRICS.get(name)
        batch = metric(truth, forecast, clean, quantiles, levels=levels)
        alone = [
            metric(truth[i : i + 1], forecast[i : i + 1], clean[i : i + 1], [quantiles[i]], levels=levels)[0]
            for i in range(n)
        ]
        assert batch.tobytes() == np.array(alone).tobytes(), name
