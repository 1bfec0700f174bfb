"""The label's and report's sentences read as a practitioner reads them (reader findings 8-20): no nested
parentheses, bias and WRS in words, dose-response rows described, a description said once, numbers agreeing
with their units, warnings without raw names, no one-value attributes, the reason for no bias score, one
wording for an effect whose interval covers 0, and score estimators that say more than the score's name."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from causalrate.causal.wrs import Grouping
from causalrate.perturb.operators import OPERATORS
from causalrate.perturb.suite import agreed
from causalrate.rate.headlines import cause_text, described_as
from causalrate.rate.ratings import NOT_APPLICABLE
from causalrate.report import label
from causalrate.report.headlines import headlines, perturbation_words, warnings
from causalrate.report.label import label_context, label_sentence, series_words
from causalrate.report.outputs import grouped_notes, render_report
from causalrate.report.templating import environment
from causalrate.run import RatingsDocument
from causalrate.score.bias_scores import register_dimension
from causalrate.score.confounding import no_effect_note
from causalrate.score.scores import SCORES

ROOT = Path(__file__).resolve().parents[1]
SENSORS = ROOT / "ratings" / "sensors" / "ratings.json"


def depth(text: str) -> int:
    """The deepest nesting of parentheses in a sentence."""
    level = deepest = 0
    for ch in text:
        level += (ch == "(") - (ch == ")")
        deepest = max(deepest, level)
    return deepest


def test_a_cause_puts_its_description_after_a_dash_not_in_nested_parentheses():
    said = cause_text("ape", "P3", 1.0, 0.25, False, "a value is missing (NaN)")
    assert said == "its error rises by 25 % of the naive reference's clean error on P3 — a value is missing (NaN)"
    failed = cause_text("ape", "drift", 1.0, 0.2, True, "the values drift away (calibration drift)")
    assert depth(failed) == 1 and failed.endswith("on drift — the values drift away (calibration drift); rated worst")


def test_bias_and_wrs_causes_say_what_differs_in_words():
    register_dimension("month")
    bias = cause_text("bias_month", "P1", 0.24, 0.24, False, "a value is recorded as 0")
    assert bias.startswith("one month's mean error differs from the others' by 24 % of the mean on P1")
    assert "(Bias month)" not in bias
    register_dimension("season")
    wrs = cause_text("wrs_season", "P1", 1.3, 1.3 / 2.3, False, "a value is recorded as 0")
    assert wrs.startswith("its errors differ between seasons (WRS, a weighted count of group pairs that differ: 1.3, ")
    assert "57 % of its maximum" in wrs and depth(wrs) == 1


def test_a_dose_response_row_is_described_as_its_severity_average():
    descriptions = {
        f"clip-dose@{k}": f"for {k} points the values above … are cut to it (saturation)" for k in range(1, 6)
    }
    descriptions["clip"] = "the values above … are cut (saturation)"
    assert described_as("clip-dose", descriptions) == "averaged over severity 1–5 of saturation"
    assert described_as("clip-dose@3", descriptions) == descriptions["clip-dose@3"]
    assert described_as("unknown", descriptions) == "unknown"
    said = cause_text("ape_auc", "clip-dose", 1.0, 0.1, False, described_as("clip-dose", descriptions))
    assert said.endswith("on clip-dose — averaged over severity 1–5 of saturation")


def test_the_label_says_a_perturbation_description_once():
    described = {
        "drift-dose@5": "the values drift away over 52 points, to 3 window standard deviations off (calibration drift)",
        "drift-dose@4": "the values drift away over 26 points, to 2 window standard deviations off (calibration drift)",
        "P3": "a value is missing (NaN)",
    }
    h = {
        "verdict": "on the published scale the worst level (3 of 3): its error rises by 235 % of the naive "
        f"reference's clean error on drift-dose@5 — {described['drift-dose@5']}",
        "cause": {
            "score": "ape",
            "perturbation": "drift-dose@4",
            "insufficient": False,
            "text": f"its error rises by 152 % of the naive reference's clean error on drift-dose@4 — "
            f"{described['drift-dose@4']}",
        },
    }
    said = label_sentence(h, described)
    assert said == (
        "On the published scale the worst level (3 of 3): its error rises by 235 % of the naive reference's clean "
        "error on calibration drift, severity 5. Relative to the others: set by its weakest result, "
        "APE on calibration drift, severity 4."
    )
    h["cause"] |= {"insufficient": True, "perturbation": "gap"}
    assert label_sentence(h, described).endswith(
        "Relative to the others: set by its weakest result, failed forecasts on gap."
    )
    old = {"verdict": "on the published scale the worst level (3 of 3): its error rises on drift-dose@5 "
           f"({described['drift-dose@5']})"}  # an older ratings.json's form  # fmt: skip
    assert "on calibration drift, severity 5. Relative to the others" in label_sentence(old, described)
    alone = {
        "cause": {"text": f"its error rises by 9 % on P3 — {described['P3']}", "score": "ape", "perturbation": "P3"}
    }
    assert label_sentence(alone, described) == f"Set by its weakest result: {alone['cause']['text']}."


def test_a_label_names_a_severity_grids_perturbations_in_words_never_by_their_ids():
    """The sensors labels said "set by its weakest result, APE (recent corruption) on drift-dose@4", "Under
    drift-dose@4 (calibration drift)" and "saturation, severity 3 (clip-dose@3)": a generated id a reader cannot
    read. They say the kind and the severity, as the label's warnings do; a short description keeps its id."""
    doc = RatingsDocument.read(SENSORS)
    for system in doc.system_names:
        context = label_context(doc, system, failures=0, report_href="report.html")
        page = environment().get_template("label.html.j2").render(**context, generated="")
        assert "dose@" not in re.sub(r"<[^>]+>", " ", page), system
    arima = label_context(doc, "arima", failures=0, report_href="report.html")
    robustness = next(h for h in arima["headlines"] if h["kind"] == "robustness")
    assert robustness["meaning"].endswith("APE (recent corruption) on calibration drift, severity 4."), robustness
    planted = doc.model_copy(deep=True)  # a fragility rule and an improvement on a severity grid's perturbation
    planted.heterogeneity["arima"] = {"clip-dose@3": planted.heterogeneity["arima"]["clip-dose@3"]}
    planted.heterogeneity["arima"]["clip-dose@3"].explained = 0.3
    planted.heterogeneity["arima"]["clip-dose@3"].rules[0].cate = 2.0
    planted.heterogeneity["arima"]["clip-dose@3"].rules[0].interval = [1.5, 2.5]  # a harm a reader could notice
    for row in planted.rows_of("arima"):
        row.improves = row.perturbation == "clip-dose@3"
    page = (
        environment()
        .get_template("label.html.j2")
        .render(**label_context(planted, "arima", failures=0, report_href="report.html"), generated="")
    )
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "Under saturation, severity 3: " in text and "its error falls under saturation, severity 3." in text
    assert "dose@" not in text
    quickstart = RatingsDocument.read(ROOT / "ratings" / "quickstart" / "ratings.json")
    assert label.in_words("P1", {p.id: p.description for p in quickstart.perturbations}) == "P1"


def test_a_count_of_one_takes_the_singular():
    offset = OPERATORS.get("offset").description.format(k=13, c=1)
    assert "1 window standard deviation high" in agreed(offset) and "13 points" in agreed(offset)
    assert agreed("for 1 points, 1.1 points, 11 points, 21 points") == "for 1 point, 1.1 points, 11 points, 21 points"
    drift = OPERATORS.get("drift").description.format(k=1, c=2)
    assert "over 1 point," in agreed(drift) and "2 window standard deviations" in agreed(drift)


def test_the_sensors_label_names_rows_in_words_and_says_why_it_has_no_bias_score():
    doc = RatingsDocument.read(SENSORS)
    # a score's code name before a perturbation id: "ape (clip-dose@4)", "ape_last (delay)", "pie_month (P1)"
    raw = re.compile(r"\b(?:" + "|".join(map(re.escape, SCORES.names())) + r") \(")
    for system in doc.system_names:
        for line in warnings(doc, system, failures=0):
            assert not raw.search(line), line
        bias = headlines(doc, system)["bias"]
        if bias.get("rating") is None and bias["source"] == "none":
            assert bias["meaning"] == "No bias score: one series, so no groups of the data to compare."
    assert doc.provenance.attributes and all(len(v) == 1 for v in doc.provenance.attributes.values())
    assert "attributes" not in series_words(doc)  # every attribute has one value: nothing tells series apart


def test_an_effect_whose_interval_covers_0_has_one_wording():
    assert (
        no_effect_note("APE_obs", -0.1, 0.2)
        == "undefined: the APE_obs interval [-0.1, 0.2] covers 0, no effect to explain"
    )
    assert no_effect_note("APE_true", -1, 1).startswith("undefined: the APE_true interval [")


def test_a_group_that_is_one_series_is_said_in_the_singular():
    labels = np.array(["a"] * 4 + ["b"] * 4 + ["c"] * 4)
    series = np.array(["s1"] * 4 + ["s2", "s3"] * 2 + ["s4", "s5"] * 2)
    grouping = Grouping.of(labels, attribute="region")
    assert grouping.single_series_note(series).startswith("1 of the 3 groups compared is a single series: ")
    series[4:8] = "s2"
    assert grouping.single_series_note(series).startswith("2 of the 3 groups compared are a single series each: ")
    series[:4] = "s1"  # every group one series ("6 of the 6 groups" on the quickstart's companies)
    series[8:] = "s4"
    assert grouping.single_series_note(series).startswith("all 3 groups compared are a single series each: ")


def test_score_estimators_say_more_than_the_name():
    register_dimension("month")
    for name, cls in SCORES.items():
        estimator = cls.estimator or ""
        assert estimator != (cls.label or name), name
        assert ", /" not in estimator, name
        assert "each pair adds up" not in (cls.description or ""), name


def test_report_notes_are_said_once_per_score_and_reason():
    row = SimpleNamespace
    na, gap = NOT_APPLICABLE, "undefined: the APE_true interval [0, 0] covers 0"
    cells = [(c, s, p) for c in ("coverage_error", "wql") for s in "ab" for p in ("P0", "P1")]
    rows = [row(system=s, perturbation=p, score=c, note=na) for c, s, p in cells]
    rows += [row(system="a", perturbation="P1", score="pie_month", note=gap)]
    rows += [row(system="b", perturbation="P3", score="pie_month", note=gap)]
    rows += [row(system="b", perturbation="P0", score="mase", note=None)]
    rows += [row(system="a", perturbation="P3", score="pie_region", note=gap)]
    assert grouped_notes(rows) == [  # type: ignore[arg-type]
        ("coverage_error, wql", na, "a, b on P0, P1"),  # one reason on the same rows of two scores: one line
        ("pie_month", gap, "a on P1; b on P3"),  # not every pair: said per system, never as a product
        ("pie_region", gap, "a on P3"),
    ]
    suite = [f"F{i}" for i in range(7)]  # more than six, every one of the score's: counted, not listed
    rows = [row(system=s, perturbation=p, score="wql", note=na) for s in "ab" for p in suite]
    assert grouped_notes(rows) == [("wql", na, "a, b on all 7 perturbations")]  # type: ignore[arg-type]
    rows += [row(system="a", perturbation="F7", score="wql", note=None)]  # not all of them: listed
    assert grouped_notes(rows) == [("wql", na, f"a, b on {', '.join(suite)}")]  # type: ignore[arg-type]


def test_a_study_of_one_series_says_once_what_its_intervals_can_show():
    """One series (sensors): every interval and tie resamples blocks of its own windows, so a real difference may
    not show; the label (in its Series line) and report.md each say so once, in words. Six series: nothing."""
    doc = RatingsDocument.read(SENSORS)
    note = "a difference between systems may be real but not shown"
    series = dict(label.tested(doc))["Series"]
    assert series.startswith("1: co2.co2 — one series only: ") and "blocks of its own 44 windows" in series
    page = (
        environment()
        .get_template("label.html.j2")
        .render(**label_context(doc, "naive", failures=0, report_href="r.html"), generated="")
    )
    assert page.count(note) == 1
    report = render_report(doc)
    assert report.count(note) == 1 and report.index(note) < report.index("## Headline ratings")
    quickstart = RatingsDocument.read(ROOT / "ratings" / "quickstart" / "ratings.json")
    assert quickstart.counts is not None and quickstart.counts.series == 6
    assert note not in render_report(quickstart) and note not in dict(label.tested(quickstart))["Series"]


def test_report_md_shows_the_robustness_rating_once():
    """report.md tabled `overall` and then the headlines, whose robustness column is `overall` again: with a
    headlines section it shows the headline table only; an older ratings.json (no headlines) keeps its overall
    table. The self-check's count is followed by one blank line, not three."""
    doc = RatingsDocument.read(ROOT / "ratings" / "quickstart" / "ratings.json")
    report = render_report(doc)
    assert "## Overall robustness rating" not in report and report.count("## Headline ratings") == 1
    assert all(f"| {s} | {doc.headlines[s]['robustness'].rating} (" in report for s in doc.system_names)
    assert "pass.\n\n## " in report
    older = render_report(doc.model_copy(update={"headlines": {}}))
    assert "## Overall robustness rating" in older and "## Headline ratings" not in older
    assert all(f"| {s} | {doc.overall[s]} of 3 |" in older for s in doc.system_names)


def test_a_label_names_scores_and_kinds_without_code_names_or_repeats():
    """ "gain (gain)" said the kind twice; "set by its weakest result, APE, recent corruption on P1" and "Bias
    month on P1" read as lists of code names: a kind is followed by its operator only where that adds a word, a
    score's qualifier is in parentheses, and a non-acronym label is lower case inside the sentence."""
    doc = RatingsDocument.read(SENSORS)
    kinds = dict(label.tested(doc))["Perturbations"]
    assert "gain (gain)" not in kinds and "a stuck sensor (stuck)" in kinds and ", gain, " in kinds
    verdict = "on the published scale the worst level (3 of 3): its error rises by 50 % on P2 — a value is halved"
    for score, said in (("recency", "APE (recent corruption)"), ("bias_industry", "bias by industry")):
        h = {"verdict": verdict, "cause": {"text": "another row", "score": score, "perturbation": "P1"}}
        assert label_sentence(h).endswith(f"Relative to the others: set by its weakest result, {said} on P1."), h
    # the accuracy box said its level twice ("Best level" / "The best level (the mean of its accuracy levels)."):
    # the sentence says what the level is the mean of
    quickstart = RatingsDocument.read(ROOT / "ratings" / "quickstart" / "ratings.json")
    accuracy = headlines(quickstart, "naive")["accuracy"]
    assert accuracy["scores"] == ["crps", "mase", "sign_accuracy", "smape"]
    assert label_sentence(accuracy) == "The mean of its levels on CRPS, MASE, sign accuracy and SMAPE, on clean input."


def test_the_unstable_warning_names_the_least_stable_rating():
    """Two unstable rows in alphabetical order said nothing about how unstable: the label names the least stable
    row with its share (the report lists every one), and the clean input in words, not as its description."""
    doc = RatingsDocument.read(ROOT / "ratings" / "quickstart" / "ratings.json")
    for system in doc.system_names:
        unstable = [r for r in doc.rows_of(system) if r.stable is False]
        (line,) = [w for w in warnings(doc, system, failures=0) if "unstable" in w]
        least = min(unstable, key=lambda r: r.stability)
        assert line.startswith(f"{len(unstable)} of {len(doc.rows_of(system))} ratings are unstable")
        assert line.endswith(f", kept in {100 * least.stability:.0f} %.") and least.stability < 0.8
    assert perturbation_words(doc, "P0") == "the clean input"  # not "no change: the clean input (control)"


def test_the_label_says_the_horizon_in_the_datas_time_and_the_report_counts_perturbations_as_the_label():
    """ "60 windows of 72 inputs → 24 forecasts" read as 24 forecasts in all: the label says how far ahead, in the
    data's own steps (hours, weeks, business days). report.md counted the clean control as a perturbation (43 on
    the sensors run, whose label lists 42), and MASE's meaning spoke of "the day-to-day change" on weekly CO2."""
    periods = {
        name: dict(label.tested(RatingsDocument.read(ROOT / "ratings" / name / "ratings.json")))["Period"]
        for name in ("electricity", "sensors", "quickstart", "domains")
    }
    assert periods["electricity"].endswith("; 60 windows of 72 inputs, each forecast 24 hours ahead")
    assert periods["sensors"].endswith("; 44 windows of 80 inputs, each forecast 13 weeks ahead")
    assert periods["quickstart"].endswith("; 450 windows of 80 inputs, each forecast 20 business days ahead")
    assert periods["domains"].endswith(" inputs, each forecast 12 steps ahead")  # mixed frequencies: steps
    assert not any("→" in p for p in periods.values())
    assert (label.steps_ahead(1, "monthly"), label.steps_ahead(6, "2h")) == ("1 month", "6 steps")
    doc = RatingsDocument.read(SENSORS)
    assert "44 windows, 42 perturbations and the clean control, 4 systems: 8800 forecasts" in render_report(doc)
    assert dict(label.tested(doc))["Perturbations"].startswith("42 perturbations of 7 kinds")
    assert "day" not in SCORES.get("mase").description


def test_a_collapse_reads_in_grouped_thousands():
    """Sensors (reader4): a model that returns 100 × its last value when an input is missing read "its error rises
    by 2073903 % of the naive reference's clean error" and "gap in the data: +2073585 %": grouped by thousands."""
    from causalrate.rate.headlines import percent
    from causalrate.report.faults import _rise_words

    assert (percent(20739.03), percent(2.28), percent(0.000372)) == ("2,073,903 %", "228 %", "0.037 %")
    assert (_rise_words(20735.85), _rise_words(-0.4), _rise_words(0.001)) == ("+2,073,585 %", "−40 %", "no change")


def test_an_undefined_pie_beside_a_fall_says_the_fall_not_no_effect():
    """Water demand (reader4): arima's error fell under P1 (APE_true -0.047, interval [-0.071, -0.023], beyond the
    margin 0.0192), yet its PIE% rows read "undefined: the APE 0 is below its margin 0.0192, no practical effect to
    explain". The note says the fall; an effect inside the margin, or an interval around 0, reads as before."""
    import pandas as pd

    from causalrate.rate.practical import pie_undefined

    raw = pd.DataFrame(
        {
            "score": ["ape"] * 3,
            "system": ["arima", "small", "unclear"],
            "perturbation": ["P1"] * 3,
            "raw": [0.0, 0.0178, 0.004],
            "margin": [0.0192] * 3,
        }
    )
    bounds = {"arima": (-0.0712, -0.0231), "small": (0.009, 0.026), "unclear": (-0.002, 0.011)}
    rigor = SimpleNamespace(row=lambda key: SimpleNamespace(ape_true_interval=bounds[key[2]]))
    notes = pie_undefined(raw, rigor)  # type: ignore[arg-type]
    assert notes[("arima", "P1")] == (
        "undefined: the perturbation lowers its error (APE_true interval [-0.0712, -0.0231]), no harm to explain"
    )
    below = "undefined: the APE 0.0178 is below its margin 0.0192, no practical effect to explain"
    assert notes[("small", "P1")] == below
    assert notes[("unclear", "P1")] == no_effect_note("APE_true", -0.002, 0.011)
