"""Binning into L levels: worked examples with ties, L > systems, direction and missing scores."""

import numpy as np

from causalrate.rate.binning import bin_ratings


def test_equal_groups_first_take_remainder():
    # 7 systems into 3 levels: array_split sizes 3, 2, 2
    raw = [0.7, 0.1, 0.5, 0.3, 0.2, 0.6, 0.4]
    assert bin_ratings(raw, levels=3).tolist() == [3, 1, 2, 1, 1, 3, 2]


def test_ties_get_the_best_group_containing_their_value():
    # sorted: 1, 2, 2, 2, 5, 6 → positions split [0,1] [2,3] [4,5]; the 2s span groups 1 and 2 → all 1
    assert bin_ratings([2, 5, 2, 1, 6, 2], levels=3).tolist() == [1, 3, 1, 1, 3, 1]
    assert bin_ratings([3, 3, 3, 3], levels=3).tolist() == [1, 1, 1, 1]


def test_more_levels_than_systems():
    assert bin_ratings([0.3, 0.1, 0.2], levels=5).tolist() == [3, 1, 2]
    assert bin_ratings([0.3, 0.3], levels=4).tolist() == [1, 1]


def test_higher_is_better_ranks_descending():
    assert bin_ratings([0.9, 0.2, 0.5], levels=3, higher_is_better=True).tolist() == [1, 3, 2]


def test_missing_scores_rate_worst():
    assert bin_ratings([np.nan, 0.1, 0.2], levels=2).tolist() == [2, 1, 2]
