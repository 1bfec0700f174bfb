"""Perturbation operators, positions and suites; imputation."""

import numpy as np
import pytest

from causalrate.errors import UserError
from causalrate.forecast.impute import impute
from causalrate.perturb import load_suite
from causalrate.perturb.suite import catalog_dir

WINDOW = np.array([[4.0, 6.0, 8.0, 10.0, 12.0]])
SEEDS = np.array([7], dtype=np.uint64)


def suite(tmp_path, n=5):
    return {p.id: p for p in load_suite("paper", base_dir=tmp_path, input_length=n)}


def test_paper_operators_on_a_hand_made_window(tmp_path):
    s = suite(tmp_path)
    start = np.array([2])  # the window's perturbed offset (first = 2, k = 5)
    assert s["P0"].apply(WINDOW, start, seeds=SEEDS).tolist() == WINDOW.tolist()
    assert s["P1"].apply(WINDOW, start, seeds=SEEDS).tolist() == [[4.0, 6.0, 0.0, 10.0, 12.0]]
    assert s["P2"].apply(WINDOW, start, seeds=SEEDS).tolist() == [[4.0, 6.0, 4.0, 10.0, 12.0]]
    p3 = s["P3"].apply(WINDOW, start, seeds=SEEDS)
    assert np.isnan(p3[0, 2]) and np.isfinite(np.delete(p3[0], 2)).all()
    assert WINDOW.tolist() == [[4.0, 6.0, 8.0, 10.0, 12.0]]  # the caller's array is never modified


def test_period_n_gives_one_moving_point_per_window(tmp_path):
    n = 80
    p1 = suite(tmp_path, n)["P1"]
    starts = np.arange(0, 200)
    mask = p1.mask(p1.firsts(starts, np.zeros(200, dtype=int), seed=0, input_length=n), n)
    assert (mask.sum(axis=1) == 1).all()
    assert len({int(np.argmax(row)) for row in mask}) == n  # the position moves from window to window


def test_phase_and_period(tmp_path):
    (tmp_path / "s.yaml").write_text(
        "name: s\nperturbations:\n  - {id: C, operator: none}\n"
        "  - {id: Z, operator: drop_to_zero, period: 2, phase: 1}\n"
    )
    z = {p.id: p for p in load_suite("s.yaml", base_dir=tmp_path, input_length=5, placement="series")}["Z"]
    first = z.firsts(np.array([0]), np.array(["A"]), seed=0, input_length=5)  # series positions 1, 3
    assert z.apply(WINDOW, first, seeds=SEEDS).tolist() == [[4.0, 0.0, 8.0, 0.0, 12.0]]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name: s\nperturbations:\n  - {id: A, operator: halve}\n", "control"),
        ("name: s\nperturbations:\n  - {id: A, operator: none}\n", "at least one"),
        ("name: s\nperturbations:\n  - {id: A, operator: none}\n  - {id: A, operator: halve}\n", "unique"),
        (
            "name: s\nperturbations:\n  - {id: A, operator: none}\n  - {id: B, operator: explode}\n",
            "unknown perturbation operator",
        ),
    ],
)
def test_bad_suites(tmp_path, body, message):
    (tmp_path / "s.yaml").write_text(body)
    with pytest.raises(UserError, match=message):
        load_suite("s.yaml", base_dir=tmp_path, input_length=5)


def test_unknown_suite_name(tmp_path):
    with pytest.raises(UserError, match="shipped suites"):
        load_suite("nope", base_dir=tmp_path, input_length=5)
    assert (catalog_dir() / "paper.yaml").is_file()


def test_imputation():
    x = np.array([[np.nan, 2.0, np.nan, np.nan, 8.0], [1.0, 2.0, 3.0, 4.0, np.nan]])
    assert impute(x, "ffill").tolist() == [[2.0, 2.0, 2.0, 2.0, 8.0], [1.0, 2.0, 3.0, 4.0, 4.0]]
    assert impute(x, "linear").tolist() == [[2.0, 2.0, 4.0, 6.0, 8.0], [1.0, 2.0, 3.0, 4.0, 4.0]]
    assert impute(x, "zero").tolist() == [[0.0, 2.0, 0.0, 0.0, 8.0], [1.0, 2.0, 3.0, 4.0, 0.0]]
