"""Headlines on known answers (METHOD §6.5): planted systems whose robustness, accuracy or failures are
known by construction, rated through the python adapter on the synthetic study."""

import json

import pytest

from causalrate.rate.tiers import group_levels
from tests.conftest import assert_raw_in_intervals

PLANTED = """\
- {name: median, type: python, function: "planted.py:window_median"}
- {name: median_again, type: python, function: "planted.py:window_median"}
- {name: last, type: python, function: "planted.py:last_value"}
- {name: collapse, type: python, function: "planted.py:collapses_on_missing", accepts_nan: true}
- {name: oracle, type: python, function: "planted.py:oracle"}
- {name: huge, type: python, function: "planted.py:huge_constant"}
- {name: broken, type: python, function: "planted.py:always_fails"}
"""


def rows_of(doc, score, perturbation):
    return {r["system"]: r for r in doc["ratings"] if (r["score"], r["perturbation"]) == (score, perturbation)}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from causalrate.cli import main
    from tests.conftest import make_synthetic_study

    folder = tmp_path_factory.mktemp("planted")
    config = make_synthetic_study(folder, PLANTED, suite="paper", draws=4)
    args = ["--out", str(folder / "run"), "--workers", "2", "--no-cards", "--allow-failed-systems"]
    assert main(["assess", str(config), *args]) == 0
    return json.loads((folder / "run" / "ratings.json").read_text())


def test_a_collapse_under_one_perturbation_sets_the_robustness_headline(planted):
    robustness = planted["headlines"]["collapse"]["robustness"]
    assert robustness["rating"] == planted["levels"]
    assert robustness["cause"]["perturbation"] == "P3"
    assert "P3" in robustness["meaning"]
    # the same model without the collapse (the median) is rated better
    assert planted["headlines"]["median"]["robustness"]["rating"] < robustness["rating"]


def test_a_last_value_forecaster_is_less_robust_than_a_median(planted):
    last, median = rows_of(planted, "ape_last", "P1")["last"], rows_of(planted, "ape_last", "P1")["median"]
    assert last["raw"] > 10 * median["raw"]
    assert last["rating"] > median["rating"]
    assert planted["headlines"]["last"]["robustness"]["rating"] > planted["headlines"]["median"]["robustness"]["rating"]


def test_a_perfect_oracle_is_best_and_does_not_crash(planted):
    oracle = planted["headlines"]["oracle"]
    assert oracle["accuracy"]["rating"] == 1
    for p in ("P1", "P2", "P3"):
        assert rows_of(planted, "smape", "P0")["oracle"]["raw"] == 0.0
        assert rows_of(planted, "ape", p)["oracle"]["rating"] == 1
    # every error 0: no group differs from another (0, not the undefined 0 / 0 that rated it worst)
    bias_rows = [r for r in planted["ratings"] if r["system"] == "oracle" and r["score"].startswith("bias_")]
    assert bias_rows and all(r["raw"] == 0.0 and r["rating"] == 1 for r in bias_rows)
    assert oracle["bias"]["rating"] == 1


def test_a_huge_constant_is_worst_on_accuracy_and_tied_with_nobody(planted):
    huge = planted["headlines"]["huge"]["accuracy"]
    assert huge["rating"] == planted["levels"]
    assert huge["tied_with"] == []
    for score in ("smape", "mase"):
        row = rows_of(planted, score, "P0")["huge"]
        assert row["rating"] == planted["levels"] and row["tied_with"] == []


def test_an_always_failing_system_is_worst_and_does_not_push_the_worst_measured_one_up(planted):
    levels = planted["levels"]
    assert planted["headlines"]["broken"]["accuracy"]["rating"] == levels
    smape = rows_of(planted, "smape", "P0")
    assert smape["broken"]["rating"] == levels
    assert smape["huge"]["rating"] == levels  # the worst measured system keeps the worst level


def test_every_rated_value_lies_in_its_interval(planted):
    assert_raw_in_intervals(planted)


def test_recency_intervals_are_paired_across_systems(planted):
    """Two identical systems get identical recency intervals: the replicates are shared, not drawn per system."""
    profile = {(r["system"], r["perturbation"], r["bin"]): r for r in planted["recency_profile"]}
    twins = [(k, v) for k, v in profile.items() if k[0] == "median" and v["interval"][0] is not None]
    assert twins
    for (_, p, b), row in twins:
        assert profile[("median_again", p, b)]["interval"] == row["interval"]


def test_tie_groups_are_positions_with_both_ends_anchored():
    assert group_levels(1, 3).tolist() == [1]
    assert group_levels(2, 3).tolist() == [1, 3]
    assert group_levels(3, 3).tolist() == [1, 2, 3]
    assert group_levels(3, 5).tolist() == [1, 3, 5]
    assert group_levels(5, 3).tolist() == [1, 2, 2, 3, 3]  # 1 + round((g − 1)·2/4), halves up
