"""Issue 15: ratings that say what they claim — planted systems and hand-made cases, one per rule."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalrate.causal.effects import DrawSettings, draws_table, identify_schemes, summarise_effects
from causalrate.causal.estimate import Estimate, estimate_all
from causalrate.causal.selfcheck import judge
from causalrate.causal.wrs import Grouping, wrs
from causalrate.parameters import RatingSettings
from causalrate.rate.absolute import absolute_level, absolute_quantities, load_scales, scale_of
from causalrate.rate.ratings import attach_coverage, rate_scores
from causalrate.rate.tiers import PAIRED_TESTS, bootstrap_p_value, t_test_p_value, tier_ratings
from causalrate.score.bias import observed_bias
from causalrate.score.scores import SCORES, Evidence, Scale
from tests.conftest import assert_raw_in_intervals

PLANTED = """\
- {name: none, type: python, function: "planted.py:effect_none"}
- {name: tiny, type: python, function: "planted.py:effect_tiny"}
- {name: mid, type: python, function: "planted.py:effect_mid"}
- {name: huge, type: python, function: "planted.py:effect_huge"}
- {name: broken, type: python, function: "planted.py:always_fails"}
"""


def rows(doc, perturbation, score):
    return {r["system"]: r for r in doc["ratings"] if (r["perturbation"], r["score"]) == (perturbation, score)}


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    from causalrate.cli import main
    from tests.conftest import make_synthetic_study

    folder = tmp_path_factory.mktemp("rules")
    config = make_synthetic_study(folder, PLANTED, extra="rigor: {refute: false}\n", stride=4)
    # `broken` fails every forecast by design: the run is rated, then says so with exit 3 unless accepted
    assert main(["assess", str(config), "--out", str(folder / "run"), "--no-cards", "--allow-failed-systems"]) == 0
    return json.loads((folder / "run" / "ratings.json").read_text())


def test_always_failing_system_is_worst_everywhere(planted_run):
    doc = planted_run
    assert_raw_in_intervals(doc)
    assert doc["overall"]["broken"] == doc["levels"]
    # the worst measured system keeps the worst level too (weakest link, levels as positions): `broken`
    # does not push it up; the effect-free system is rated better
    assert doc["overall"]["huge"] == doc["levels"] and doc["overall"]["none"] < doc["levels"]
    assert doc["headlines"]["huge"]["robustness"]["tied_with"] == []  # never tied with the unmeasured one
    mine = [r for r in doc["ratings"] if r["system"] == "broken"]
    assert mine and all(r["insufficient"] and r["rating"] == doc["levels"] for r in mine)
    assert all("insufficient" in r["note"] for r in mine)
    for family in ("robustness", "bias", "accuracy"):
        assert doc["headlines"]["broken"][family]["rating"] == doc["levels"]


def test_tiny_effect_never_shares_a_level_with_a_1000x_larger_one(planted_run):
    ape = rows(planted_run, "P1", "ape")
    assert ape["huge"]["raw"] > 900 * ape["tiny"]["raw"] > 0
    assert ape["tiny"]["raw"] < ape["mid"]["raw"] < ape["huge"]["raw"]
    assert ape["tiny"]["rating"] < ape["huge"]["rating"]
    assert ape["tiny"]["rating"] <= ape["mid"]["rating"] <= ape["huge"]["rating"]
    assert "huge" not in ape["tiny"]["tied_with"]


def test_levels_are_positions_with_both_ends_anchored(planted_run):
    """Measured tie groups take levels by position: one group is 1; two or more reach from 1 to L."""
    levels = planted_run["levels"]
    for (p, score), part in pd.DataFrame(planted_run["ratings"]).groupby(["perturbation", "score"]):
        rated = (
            part[~part["insufficient"] & part["display"].isna()] if "display" in part else part[~part["insufficient"]]
        )
        used = sorted(set(rated["rating"]))
        if not used or len(set(rated["raw"].round(12))) == 1:
            continue
        assert used == [1] or (used[0] == 1 and used[-1] == levels), (p, score, used)


def test_tiers_on_hand_made_replicates():
    rng = np.random.default_rng(0)
    # a and b indistinguishable (same replicates ± noise), c clearly worse, d far worse
    base = rng.normal(0, 0.01, 200)
    reps = np.column_stack([1 + base, 1.001 + base + rng.normal(0, 0.01, 200), 2 + base, 50 + base])
    ratings, tied = tier_ratings(np.array([1.0, 1.001, 2.0, 50.0]), reps, levels=3)
    assert ratings.tolist() == [1, 1, 2, 3]
    assert tied[0] == [1] and tied[2] == []
    # three systems tied at the best value and one far away: two groups, so the far one is the worst level
    ratings, _ = tier_ratings(np.array([0.0, 0.0, 0.0, 2.3e-4]), None, levels=3)
    assert ratings.tolist() == [1, 1, 1, 3]


def draw_scores(per_draw: dict[str, np.ndarray], score: str = "ape_industry") -> pd.DataFrame:
    """Rate one score whose per-system replicates are `per_draw` and whose raw value is their mean."""
    systems = sorted(per_draw)
    raw = pd.DataFrame(
        {
            "perturbation": "P1",
            "score": score,
            "system": systems,
            "raw": [float(np.mean(per_draw[s])) for s in systems],
            "coverage": 1.0,
            "quantity": np.nan,
        }
    )
    out = rate_scores(raw, settings=RatingSettings(levels=3), replicates={(score, "P1"): per_draw})
    return out.set_index("system")


def test_draw_scores_separate_a_constant_gap_over_20_draws():
    # planted: b's per-draw APE is a's plus 0.5, each draw ± small noise. The mean over 20 draws is what
    # is rated, so the gap is many standard errors wide; a sign count over 20 draws can never reach 5 %.
    rng = np.random.default_rng(4)
    a = 1.0 + rng.normal(0, 0.05, 20)
    per_draw = {"a": a, "b": a + 0.5 + rng.normal(0, 0.05, 20)}
    out = draw_scores(per_draw)
    assert out.loc["a", "rating"] == 1 and out.loc["b", "rating"] == 3  # two groups: best and worst
    assert out.loc["a", "tied_with"] == []
    # the same replicates read as a window bootstrap (score `ape`) stay tied: min p = 2/21 > 0.05
    assert draw_scores(per_draw, "ape")["rating"].tolist() == [1, 1]


def test_draw_scores_tie_systems_that_differ_only_by_draw_noise():
    rng = np.random.default_rng(5)
    out = draw_scores({"a": 1.0 + rng.normal(0, 0.3, 20), "b": 1.0 + rng.normal(0, 0.3, 20)})
    assert out["rating"].tolist() == [1, 1] and out.loc["a", "tied_with"] == ["b"]
    # and the test keeps its size: equal means are called different in about 5 % of studies, not more
    separated = [t_test_p_value(rng.normal(0, 0.3, 20) - rng.normal(0, 0.3, 20)) < 0.05 for _ in range(2000)]
    assert 0.03 < np.mean(separated) < 0.07


def test_draw_test_is_scipys_paired_t_test():
    rng = np.random.default_rng(6)
    a, b = rng.normal(1.0, 0.2, 20), rng.normal(1.1, 0.2, 20)
    a[3] = np.nan  # a failed draw is dropped, its pair with it
    expected = stats.ttest_rel(a, b, nan_policy="omit").pvalue
    assert t_test_p_value(a - b) == pytest.approx(expected, rel=1e-10)
    assert PAIRED_TESTS[SCORES.get("ape_industry").resampling].p_value is t_test_p_value
    assert PAIRED_TESTS[SCORES.get("pie_company").resampling].p_value is t_test_p_value
    assert t_test_p_value(np.full(20, 0.5)) == 0.0  # no spread, a gap: certain
    assert t_test_p_value(np.zeros(20)) == 1.0  # no spread, no gap
    assert t_test_p_value(np.array([0.5, np.nan, np.nan])) == 1.0  # fewer than 2 finite draws: tied


def test_bootstrap_scores_keep_the_bootstrap_p_value():
    # hand-computed: d = [1, 2, 3, −1]: #{d ≤ 0} + 1 = 2, #{d ≥ 0} + 1 = 4, p = 2 · 2 / 5
    assert bootstrap_p_value(np.array([1.0, 2.0, 3.0, -1.0])) == pytest.approx(0.8)
    assert bootstrap_p_value(np.full(199, 0.1)) == pytest.approx(2 / 200)
    for score, cls in SCORES.items():
        if cls.resampling == "windows":
            assert PAIRED_TESTS[cls.resampling].p_value is bootstrap_p_value, score


def test_a_clearly_larger_deconfounded_ape_is_rated_worse(planted_run):
    # end to end (6 draws, min sign-count p 2/7): the 1000× larger planted effect is rated worse on the
    # deconfounded APE too, where the draws' sign count tied every system
    for scheme in ("industry", "company"):
        ape = rows(planted_run, "P1", f"ape_{scheme}")
        assert ape["huge"]["raw"] > 5 * ape["tiny"]["raw"]
        assert ape["tiny"]["rating"] < ape["huge"]["rating"], scheme
        assert "huge" not in ape["tiny"]["tied_with"], scheme


def test_insufficient_and_undefined_rows():
    raw = pd.DataFrame(
        {
            "perturbation": "P1",
            "score": "pie_industry",
            "system": ["a", "b", "c", "d"],
            "raw": [5.0, np.nan, 20.0, 1.0],
            "note": [None, "undefined: APE_obs interval covers 0", None, None],
            "coverage": [1.0, 1.0, 1.0, 0.5],
            "quantity": [5.0, np.nan, 20.0, 1.0],
        }
    )
    out = rate_scores(raw, settings=RatingSettings(levels=3)).set_index("system")
    assert out.loc["d", "insufficient"] and out.loc["d", "rating"] == 3 and out.loc["d", "absolute_rating"] == 3
    # undefined: no level on either scale (neither best nor worst), shown "—"
    assert pd.isna(out.loc["b", "rating"]) and pd.isna(out.loc["b", "absolute_rating"])
    assert out.loc["b", "display"] == "—" and not out.loc["b", "insufficient"]
    assert out.loc["a", "rating"] == 1 and out.loc["c", "rating"] == 3  # d (1.0) is insufficient, not best
    assert out.loc["a", "absolute_rating"] == 1 and out.loc["c", "absolute_rating"] == 2
    # levels are whole numbers or None, also beside an undefined row (they were 2.0 and NaN there: "2.0" in
    # scores.csv for that group only), and the rows come ordered by perturbation, score and system
    both = rate_scores(
        pd.concat([raw.assign(perturbation="P2", score="ape"), raw.iloc[::-1]]), settings=RatingSettings(levels=3)
    )
    assert list(zip(both["perturbation"], both["score"], both["system"], strict=True)) == [
        (p, score, s) for p, score in (("P1", "pie_industry"), ("P2", "ape")) for s in "abcd"
    ]
    for column in ("rating", "absolute_rating"):
        levels = both[column].tolist()
        assert [type(v) for v in levels] == [int, type(None), int, int] * 2, (column, levels)


def test_coverage_of_each_row_is_its_kind_and_a_grids_worst_member():
    """attach_coverage: ape reads the paired share, the failure rate the perturbed one; a severity grid's row
    (its family) the worst of its members; a pair with no forecasts 0 (rated insufficient, never well)."""
    coverage = pd.DataFrame(
        {
            "system": ["a", "a", "a", "b"],
            "perturbation": ["P1", "spike@1", "spike@2", "P1"],
            "perturbed": [1.0, 0.9, 0.7, 0.95],
            "paired": [0.8, 0.85, 0.6, 0.5],
        }
    )
    raw = pd.DataFrame(
        {
            "system": ["a", "a", "b", "a", "c"],
            "perturbation": ["P1", "P1", "P1", "spike", "P1"],
            "score": ["ape", "failure_rate", "ape", "ape", "ape"],
        },
        index=[10, 11, 12, 13, 14],
    )
    severity = {"spike@1": ("spike", 1.0), "spike@2": ("spike", 2.0)}
    assert SCORES.get("ape").coverage == "paired" and SCORES.get("failure_rate").coverage == "perturbed"
    found = attach_coverage(raw, coverage, severity)
    assert found.index.tolist() == [10, 11, 12, 13, 14] and found.tolist() == [0.8, 1.0, 0.5, 0.6, 0.0]


def test_pie_is_undefined_when_there_is_nothing_to_explain():
    effects = pd.DataFrame(
        {
            "system": ["flat", "moved"],
            "perturbation": "P1",
            "scheme": "industry",
            "ape_true": [0.0, 1.0],
            "ape_obs": [1e-4, 1.2],
            "ape_obs_lo": [-0.01, 1.1],
            "ape_obs_hi": [0.01, 1.3],
            "ape_adj": [0.0, 1.0],
            "pie": [1782.0, 16.7],
        }
    )
    evidence = Evidence(forecasts=pd.DataFrame(), wrs=pd.DataFrame(), effects=effects, control="P0", severity={})
    out = SCORES.get("pie_industry")().compute(evidence).set_index("system")
    assert np.isnan(out.loc["flat", "raw"]) and "covers 0" in out.loc["flat", "note"]
    assert out.loc["moved", "raw"] == 16.7 and pd.isna(out.loc["moved", "note"])


def test_bias_company_sees_a_bias_inside_a_pair_that_already_differs():
    rng = np.random.default_rng(1)
    n = 200
    company = np.repeat(["A", "B", "C", "D"], n)
    industry = np.repeat(["X", "X", "Y", "Y"], n)
    honest = rng.normal(1.0, 0.05, 4 * n) + np.where(company == "B", 0.3, 0.0)  # A vs B differ already
    biased = honest + np.where(company == "B", 0.5, 0.0)  # and a system makes B worse still
    w_honest, _ = wrs(honest, company, within=industry)
    w_biased, _ = wrs(biased, company, within=industry)
    assert w_honest == w_biased >= 2.3  # A–B saturated (2.3) for both; C–D the same for both: WRS cannot tell
    b_honest = observed_bias(honest, Grouping.of(company, industry))
    b_biased = observed_bias(biased, Grouping.of(company, industry))
    # by hand: |mean B − mean A| / overall mean
    assert b_honest == pytest.approx(0.3 / np.mean(honest), rel=0.1)
    assert b_biased == pytest.approx(0.8 / np.mean(biased), rel=0.1)
    assert b_biased > 2 * b_honest


def test_published_scale_reads_and_cuts():
    scales = load_scales()
    assert {"ape", "failure_rate", "wrs_industry", "bias_company"} <= set(scales)
    assert all(s.rationale for s in scales.values())
    ape = scales["ape"]
    assert [absolute_level(x, ape) for x in (0.01, 0.05, 0.2, 0.9, np.nan)] == [1, 1, 2, 3, None]
    sign = scales["sign_accuracy"]  # a skill ratio to naive's ½: 0.6 → 1.2, 0.5 → 1.0, 0.3 → 0.6
    assert sign.basis == "naive_ratio"
    assert [absolute_level(x, sign) for x in (1.2, 1.0, 0.6)] == [1, 2, 3]
    mase = scales["mase"]  # MASE ÷ naive's MASE on the same windows: naive itself is 1.0, level 1
    assert mase.basis == "naive_ratio" and [absolute_level(x, mase) for x in (1.0, 1.2, 2.0)] == [1, 2, 3]


def test_a_score_declares_its_own_absolute_scale(monkeypatch):
    """A score's `absolute_scale` (a plugin's) is its published scale; the built-ins' come from scales.yaml."""
    own = Scale("percent", (5.0, 10.0))
    monkeypatch.setattr(SCORES.get("wql"), "absolute_scale", own)
    assert scale_of("wql") is own and scale_of("ape") == load_scales()["ape"] and scale_of("unknown") is None
    raw = pd.DataFrame({"perturbation": ["P0"], "score": ["wql"], "system": ["a"], "raw": [0.07]})
    wrs = pd.DataFrame(columns=["system", "perturbation", "attribute", "pairs"])
    quantity = absolute_quantities(raw, wrs, naive_error=1.0, naive_scores={})
    assert quantity.tolist() == [pytest.approx(7.0)] and absolute_level(quantity[0], own) == 2


def _confounded_problem():
    """Industry drives both the outcome level and (scheme `industry`) who is perturbed: APE_obs is biased."""
    rng = np.random.default_rng(2)
    n = 600
    industry = np.repeat(["Alpha", "Beta"], n // 2)
    table = pd.DataFrame({"industry": industry, "company": np.repeat(["A1", "A2", "B1", "B2"], n // 4)})
    clean = np.where(industry == "Alpha", 5.0, 1.0) + rng.normal(0, 0.1, n)
    outcomes = {"sys": pd.DataFrame({"P0": clean, "P1": clean + 0.5 + rng.normal(0, 0.1, n)})}
    settings = DrawSettings(schemes=("industry",), draws=10, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=0)
    return table, outcomes, settings


def test_self_check_passes_matching_and_fails_a_broken_estimator(monkeypatch):
    table, outcomes, settings = _confounded_problem()
    ident = identify_schemes(settings, ["industry", "company"])

    def run():
        draws = draws_table(
            estimate_all(windows=table, outcomes=outcomes, control="P0", settings=settings, identification=ident)
        )
        return judge(summarise_effects(draws))

    (good,) = run()
    assert good["passed"], good
    # an estimator that "deconfounds" by returning the naive difference
    monkeypatch.setattr(Estimate, "ape_adj", property(lambda e: e.ape_obs))
    (bad,) = run()
    assert not bad["passed"] and "did not move" in bad["reason"]
    assert abs(bad["ape_obs"] - bad["ape_true"]) > 1.0  # the planted confounding bias


def test_paper_rule_reproduces_the_v2_quickstart_ratings_exactly():
    """rule: paper, scale: relative on the raw scores of the v2 reference gives every one of its ratings."""
    from pathlib import Path

    old = json.loads((Path(__file__).parent / "fixtures" / "quickstart_ratings_v2.json").read_text())
    frame = pd.DataFrame(old["ratings"])
    raw = frame.assign(raw=frame["raw"].astype(float), coverage=1.0, quantity=np.nan)
    rated = rate_scores(raw.drop(columns=["rating"]), settings=RatingSettings(levels=3, rule="paper", scale="relative"))
    got = rated.merge(frame, on=["perturbation", "score", "system"], suffixes=("", "_v2"))
    withheld = np.where(got["inconclusive"], np.maximum(got["rating"], 2), got["rating"])  # the rigor layer's ≥ 2
    assert len(got) == len(frame) == 164
    assert (withheld == got["rating_v2"]).all()
    assert set(rated["rule"]) == {"paper"} and rated["absolute_rating"].isna().all()


def test_a_uniformly_fragile_system_gains_nothing_from_an_even_spread():
    """`random` hurts everywhere alike (spread 0) while ARIMA's small effect is uneven: the robustness
    headline must follow the size of the effect, not its spread (the quickstart once tied them)."""
    from causalrate.rate.headlines import robustness_rows

    rated = pd.DataFrame(
        [
            {
                "system": s,
                "perturbation": "P1",
                "score": score,
                "rating": r,
                "display": str(r),
                "raw": x,
                "insufficient": False,
            }
            for s, score, r, x in [
                ("arima", "ape", 1, 0.01),
                ("random", "ape", 3, 0.5),
                ("arima", "fragility_spread", 3, 0.2),
                ("random", "fragility_spread", 1, 0.0),
            ]
        ]
    )
    rows = robustness_rows(rated, control="P0")
    assert set(rows["score"]) == {"ape"}
    assert rows.groupby("system")["rating"].mean().to_dict() == {"arima": 1.0, "random": 3.0}


def test_too_few_replicates_tie_everything_and_are_warned():
    """8 systems, one far worse than seven equal ones in every paired replicate: with 100 replicates its
    smallest bootstrap p (2/101) cannot pass Benjamini–Hochberg over 28 pairs, so it is tied with them (the
    electricity study's planted `biased` read 'all 8 systems tied'); the run warns, and with 200 it is apart."""
    from causalrate.rate.tiers import resolution_warning

    rng = np.random.default_rng(0)

    def levels(b: int) -> np.ndarray:
        reps = rng.normal(1.0, 0.01, (b, 8))
        reps[:, 7] += 1.0  # the outlier: worse in every replicate
        return tier_ratings(reps.mean(axis=0), reps, levels=3)[0]

    assert list(levels(100)) == [1] * 8
    assert list(levels(200)) == [1] * 7 + [3]
    warning = resolution_warning(100, 8)
    assert warning is not None and "use at least 159" in warning and "28 pairs" in warning
    assert resolution_warning(159, 8) is None and resolution_warning(100, 5) is None  # 2/101 ≤ 2·0.05/5
