"""Ratings decided by differences that matter (issue 40, METHOD §6.2, §6.5, §6.6): practical-equivalence
margins, ordered transitive groups, harm not change, PIE% only with an effect, headlines over practically
relevant rows — hand-made cases whose answer is known, and one small planted study."""

import json

import numpy as np
import pandas as pd
import pytest

from causalrate.parameters import RatingSettings
from causalrate.rate.absolute import absolute_margins, published_margins
from causalrate.rate.headlines import headline_ratings
from causalrate.rate.ratings import rate_scores
from causalrate.rate.tiers import replicate_tier_ratings, tier_ratings
from causalrate.score.scores import SCORES, Margin

SETTINGS = RatingSettings(levels=3)


def tight(values: list[float], n: int = 400, noise: float = 1e-4, seed: int = 0) -> np.ndarray:
    """Paired replicates [n, S] so tight around `values` that every gap between them is significant."""
    shared = np.random.default_rng(seed).normal(0, noise, (n, 1))
    return (
        np.asarray(values)[None, :] + shared + np.random.default_rng(seed + 1).normal(0, noise / 10, (n, len(values)))
    )


def test_two_systems_whose_effects_differ_by_a_tenth_of_the_margin_are_tied():
    delta = 0.05
    raw = np.array([0.30, 0.30 + 0.1 * delta])
    reps = tight(raw.tolist())
    assert tier_ratings(raw, reps, levels=3)[0].tolist() == [1, 3]  # significant: apart without a margin
    ratings, tied = tier_ratings(raw, reps, levels=3, margin=delta)
    assert ratings.tolist() == [1, 1] and tied == [[1], [0]]
    # the same in every replicate (stability re-tiers with the margin)
    assert (replicate_tier_ratings(raw, reps, levels=3, margin=delta) == 1).all()


def test_a_chain_of_ties_is_cut_into_ordered_groups_and_levels_never_fall_with_a_better_raw():
    """a ~ b and b ~ c (each gap ≤ δ), a ≁ c (gap 2δ, significant): c opens the next group, never a level
    better than b's; the same for every order the systems come in."""
    delta = 1.0
    raw = np.array([0.0, 0.9, 1.8, 5.0])
    reps = tight(raw.tolist(), noise=1e-3)
    for order in ([0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]):
        ratings, tied = tier_ratings(raw[order], reps[:, order], levels=3, margin=delta)
        by_system = dict(zip(order, ratings.tolist(), strict=True))
        assert [by_system[i] for i in range(4)] == [1, 1, 2, 3]
        names = {k: sorted(order[j] for j in tied[k]) for k in range(4)}
        assert names[order.index(0)] == [1] and names[order.index(2)] == [] and names[order.index(1)] == [0]
    # monotone: a better raw never gets a worse level, also in every replicate
    levels = replicate_tier_ratings(raw, reps, levels=3, margin=delta)
    assert (np.diff(levels, axis=1) >= 0).all()


def rated_frame(rows: list[tuple], points: frozenset[str] = frozenset()) -> pd.DataFrame:
    """Rate hand-made (perturbation, score, system, raw, margin[, quantity]) rows, no replicates (equal ties)."""
    frame = pd.DataFrame(
        [dict(zip(("perturbation", "score", "system", "raw", "margin", "quantity"), (*r, *[np.nan] * (6 - len(r))),
                  strict=True)) for r in rows]
    ).assign(coverage=1.0)  # fmt: skip
    return rate_scores(frame, settings=SETTINGS, point_systems=points)


def test_an_effect_below_the_margin_is_level_1_and_no_practical_effect_headlines():
    """The median beside a perfect oracle (exactly 0) and naive: its 8e-5 is below δ, so it is level 1 on the
    row, the row sets no headline, and its robustness headline says so, naming its largest effect."""
    rated = rated_frame(
        [("P1", "ape", "oracle", 0.0, 0.05, 0.0), ("P1", "ape", "median", 8e-5, 0.05, 8e-4),
         ("P1", "ape", "naive", 0.9, 0.05, 9.0), ("P3", "ape", "oracle", 0.0, 0.05, 0.0),
         ("P3", "ape", "median", 0.04, 0.05, 0.4), ("P3", "ape", "naive", 0.6, 0.05, 6.0)]
    )  # fmt: skip
    rows = rated.set_index(["perturbation", "system"])
    assert rows.loc[("P1", "median"), "rating"] == 1 and not rows.loc[("P1", "median"), "relevant"]
    assert rows.loc[("P1", "naive"), "rating"] == 3 and rows.loc[("P1", "naive"), "relevant"]
    heads = headline_ratings(rated, settings=SETTINGS, control="P0")
    median = heads["median"]["robustness"]
    assert median["rating"] == 1 and "cause" not in median
    assert "no practical effect on any perturbation tested (largest:" in median["meaning"]
    assert median["largest"]["perturbation"] == "P3"  # its largest effect on the absolute basis
    assert heads["naive"]["robustness"]["rating"] == 3


def test_one_group_for_all_says_all_tied_never_best():
    rated = rated_frame(
        [("P0", "smape", s, 0.2 + 0.001 * k, 0.01) for k, s in enumerate(("a", "b", "c"))]
        + [("P1", "ape", s, 0.01 * k, 0.05) for k, s in enumerate(("a", "b", "c"))]
    )
    heads = headline_ratings(rated, settings=SETTINGS, control="P0")
    for system in ("a", "b", "c"):
        for family in ("accuracy", "robustness"):
            h = heads[system][family]
            assert h["rating"] == 1 and len(h["tied_with"]) == 2
            assert "all 3 systems tied" in h["meaning"] and "best level" not in h["meaning"], h["meaning"]


def test_the_cause_is_the_largest_effect_at_the_headlines_level_on_the_absolute_basis():
    rated = rated_frame(
        [("P1", "ape", "a", 0.0, 0.05, 0.0), ("P1", "ape", "b", 0.5, 0.05, 5.0),
         ("P2", "ape", "a", 0.0, 0.05, 0.0), ("P2", "ape", "b", 0.9, 0.05, 9.0),
         ("P3", "recency", "a", 0.0, 0.05, 0.0), ("P3", "recency", "b", 0.7, 0.05, 7.0)]
    )  # fmt: skip
    cause = headline_ratings(rated, settings=SETTINGS, control="P0")["b"]["robustness"]["cause"]
    assert (cause["perturbation"], cause["score"]) == ("P2", "ape")


def test_the_published_verdict_leads_where_it_is_the_worst():
    """Relative 2 of 3, published 3 of 3: the sentence starts with the published verdict in words."""
    rated = rated_frame(
        [("P1", "ape", "a", 0.0, 0.05, 0.0), ("P1", "ape", "b", 0.5, 0.05, 5.0), ("P1", "ape", "c", 2.0, 0.05, 20.0)]
    )
    b = headline_ratings(rated, settings=SETTINGS, control="P0")["b"]["robustness"]
    assert b["rating"] == 2 and b["absolute_rating"] == 3
    assert b["meaning"].startswith("On the published scale the worst level (3 of 3): its error rises by 500 %")
    assert b["verdict"].startswith("on the published scale the worst level")
    a = headline_ratings(rated, settings=SETTINGS, control="P0")["a"]["robustness"]
    assert "verdict" not in a and not a["meaning"].startswith("On the published scale")


def test_point_forecasts_are_never_rated_on_coverage_or_wql():
    """A point forecast has no quantiles: its coverage error (0 by construction) and its WQL (only its WAPE) are
    not applicable — no raw, no level, the reason in the note — and the distributions are tiered among
    themselves (the planted point WQL 0.05 would otherwise be best and push dist2 to a middle level)."""
    rows = [("P0", score, s, v, 0.01) for score in ("smape", "coverage_error", "wql") for s, v in
            (("point", 0.2), ("dist", 0.3), ("point2", 0.25), ("dist2", 0.1))]  # fmt: skip
    rows += [("P0", score, "point3", v, 0.01) for score, v in (("wql", 0.05), ("coverage_error", 0.0), ("smape", 0.3))]
    rated = rated_frame(rows, points=frozenset({"point", "point2", "point3"}))
    for score in ("coverage_error", "wql"):
        by = rated[rated["score"] == score].set_index("system")
        for point in ("point", "point2", "point3"):
            assert by.loc[point, "display"] == "—" and np.isnan(by.loc[point, "raw"])
            assert by.loc[point, "note"] == "not applicable: a point forecast has no quantiles; not rated"
            assert pd.isna(by.loc[point, "rating"])
        assert pd.isna(by.loc["dist", "display"]) and by.loc["dist", "raw"] == 0.3  # a distribution: rated
        assert (by.loc["dist2", "rating"], by.loc["dist", "rating"]) == (1, 3)
    heads = headline_ratings(rated, settings=SETTINGS, control="P0", point_systems=frozenset({"point", "point2"}))
    assert heads["point"]["accuracy"]["scores"] == ["smape"]
    assert heads["dist"]["accuracy"]["scores"] == ["coverage_error", "smape", "wql"]
    # one distribution among points (random among the references): its WQL and coverage are compared with no
    # other system, so they stay out of its accuracy headline (a level 1 of one would flatter it)
    points = frozenset({"point", "point2", "point3", "dist2"})
    heads = headline_ratings(rated_frame(rows, points=points), settings=SETTINGS, control="P0", point_systems=points)
    assert heads["dist"]["accuracy"]["scores"] == ["smape"]


def test_every_margin_is_a_typed_fact_published_in_the_scales_file():
    """One source of truth: each built-in score's margin is its `margin` fact; ratings/scales.yaml publishes the
    same value beside its thresholds (or under margins:), and lists every built-in that has one."""
    published = published_margins()
    for name, margin in published.items():
        assert SCORES.get(name).margin == margin, name
    core = ("ape", "ape_auc", "recency", "ape_last", "ape_worst", "failure_rate", "wrs_industry", "wrs_company",
            "bias_industry", "bias_company", "ape_industry", "ape_company", "smape", "mase", "crps", "wql",
            "sign_accuracy", "coverage_error")  # fmt: skip
    assert all(SCORES.get(name).margin is not None and name in published for name in core)
    assert published["pie_industry"] is None and SCORES.get("pie_industry").margin is None
    assert SCORES.get("ape").margin == Margin("naive_clean_error", 0.05)
    assert SCORES.get("failure_rate").margin == Margin("percent", 1.0)
    assert SCORES.get("sign_accuracy").margin == Margin("none", 0.01)


def test_margins_in_raw_units_by_hand():
    raw = pd.DataFrame(
        {"perturbation": "P1", "system": "s", "raw": 1.0,
         "score": ["ape", "failure_rate", "smape", "sign_accuracy", "wrs_industry", "bias_industry", "pie_industry"]}
    )  # fmt: skip
    wrs = pd.DataFrame({"system": ["s"], "perturbation": ["P1"], "attribute": ["industry"], "pairs": [3]})
    margins = absolute_margins(raw, wrs, naive_error=4.0, naive_scores={"smape": 0.5}).tolist()
    # 5 % of 4.0; 1 pp; 2 % of 0.5; 0.01; 0.1 × 3 pairs × 2.3; 5 % of the mean; none
    assert margins == pytest.approx([0.2, 0.01, 0.01, 0.01, 0.69, 0.05, 0.0])


PLANTED = """\
- {name: median, type: python, function: "planted.py:window_median"}
- {name: oracle, type: python, function: "planted.py:oracle"}
- {name: last, type: python, function: "planted.py:last_value"}
- {name: helped, type: python, function: "planted.py:helped_by_zeros"}
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from causalrate.cli import main
    from tests.conftest import make_synthetic_study

    folder = tmp_path_factory.mktemp("practical")
    config = make_synthetic_study(folder, PLANTED, draws=4, stride=4, extra="rigor: {refute: false}\n")
    assert main(["assess", str(config), "--out", str(folder / "run"), "--workers", "1"]) == 0
    return folder / "run", json.loads((folder / "run" / "ratings.json").read_text())


def test_a_median_beside_an_oracle_and_naive_is_robustness_1(planted):
    _, doc = planted
    median = doc["headlines"]["median"]["robustness"]
    assert median["rating"] == 1, median["meaning"]
    assert doc["headlines"]["last"]["robustness"]["rating"] == doc["levels"]


def test_a_perturbation_that_improves_a_system_rates_it_1_and_the_label_says_improves(planted):
    run, doc = planted
    row = next(r for r in doc["ratings"] if (r["system"], r["score"], r["perturbation"]) == ("helped", "ape", "P1"))
    assert row["improves"] and row["ape_true_interval"][1] < 0 and row["rating"] == 1
    assert not row.get("inconclusive") and row.get("display") is None
    cause = doc["headlines"]["helped"]["robustness"].get("cause") or {}
    assert cause.get("perturbation") != "P1"  # an improvement never sets the weakest link
    label = (run / "cards" / "helped.html").read_text()
    assert "Improves" in label and "its error falls under " in label and " (P1)" in label  # in words, then its id


def test_pie_is_null_wherever_the_rated_ape_interval_covers_0(planted):
    _, doc = planted
    ape = {(r["system"], r["perturbation"]): r for r in doc["ratings"] if r["score"] == "ape"}
    covered = {key for key, r in ape.items() if r["ape_true_interval"][0] <= 0 <= r["ape_true_interval"][1]}
    assert ("oracle", "P1") in covered  # the oracle's effect is exactly 0
    pies = [r for r in doc["ratings"] if r["score"].startswith("pie_") and (r["system"], r["perturbation"]) in covered]
    assert pies and all(r["raw"] is None and r["display"] == "—" and "covers 0" in r["note"] for r in pies)
    assert all(r["rating"] is None and r["absolute_rating"] is None for r in pies)  # neither best nor worst: no level
    effects = [e for e in doc["effects"] if (e["system"], e["perturbation"]) in covered]
    assert effects and all(e["pie"] is None and "covers 0" in (e["pie_note"] or "") for e in effects)


def test_point_forecasts_have_no_coverage_or_wql_rating_in_a_run(planted):
    out, doc = planted
    for score in ("coverage_error", "wql"):
        rows = [r for r in doc["ratings"] if r["score"] == score]
        assert rows and all(r["raw"] is None and r["rating"] is None and "no quantiles" in r["note"] for r in rows)
    scores = pd.read_csv(out / "scores.csv")
    assert scores[scores["score"].isin(["coverage_error", "wql"])]["raw"].isna().all()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| wql |" not in report and "| coverage_error |" not in report  # every system a point: said once
    assert len([x for x in report.splitlines() if x.startswith("- coverage_error, wql for ")]) == 1
    for system in ("median", "oracle", "last", "helped"):
        assert set(doc["headlines"][system]["accuracy"]["scores"]) <= {"smape", "mase", "crps", "sign_accuracy"}


def test_a_weakest_link_shared_at_a_worse_level_is_no_tie():
    """Four systems each worst somewhere share robustness 3: that is no tie ("all 4 systems tied" beside a 3
    read as a contradiction on the sensors label); one group at level 1 is, and a shared accuracy mean is."""
    from causalrate.rate.headlines import all_tied

    assert not all_tied("robustness", 3, 3, 4) and not all_tied("bias", 2, 3, 4)
    assert all_tied("robustness", 1, 3, 4) and all_tied("accuracy", 2, 3, 4)
    assert not all_tied("accuracy", 1, 2, 4) and not all_tied("robustness", 1, 0, 1)


def test_a_recency_cause_says_how_recent():
    """A model that collapses when an input is missing (reader4, hourly electricity) had its headline set by the
    recency score: "when a corrupted point is among the last input points", without saying how many; the study's
    causal.recency_k (5 by default) is said."""
    rated = rated_frame([("P3", "recency", "a", 0.0, 0.05, 0.0), ("P3", "recency", "b", 94.5, 0.05, 344.4)])
    cause = headline_ratings(rated, settings=SETTINGS, control="P0", recency_k=5)["b"]["robustness"]["cause"]
    assert cause["text"] == (
        "its error rises by 34,440 % of the naive reference's clean error when a corrupted point is among the last 5 "
        "input points on P3"
    )
