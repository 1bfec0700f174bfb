"""A practitioner's reading of the cards (the label says each thing once and in words, a fragility rule only where
the map holds) and a user-study kit in the run's own bias dimensions, not the quickstart's "industry"."""

import json
import re
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.causal.schemes import attribute_scheme
from causalrate.cli import main
from causalrate.report.cards import fragility_rules, render_cards
from causalrate.report.comparison import normalised_scores, radar_labels
from causalrate.report.faults import fault_lines, fault_table
from causalrate.report.headlines import headlines, warnings
from causalrate.report.label import COVARIATE_WORDS, NO_HARM, NO_RULE, label_context, plain_rule
from causalrate.report.render import LABEL_HEIGHT, Session
from causalrate.report.templating import environment
from causalrate.run import RatingsDocument
from causalrate.score.scores import register_dimension
from tests.conftest import write_yaml

ROOT = Path(__file__).resolve().parents[1]
ELECTRICITY = ROOT / "ratings" / "electricity" / "ratings.json"  # 8 systems, ties at every level, fragility maps


def label_boxes(doc: RatingsDocument, system: str) -> dict[str, str]:
    """The text of each headline box and of the fragility paragraph of the system's rendered label."""
    context = label_context(doc, system, failures=0, report_href="report.html")
    page = environment().get_template("label.html.j2").render(**context, generated="")
    boxes = {}
    for kind in ("robustness", "bias", "accuracy"):
        box = page.split(f'id="headline-{kind}"')[1].split('<div class="head"')[0].split("</section>")[0]
        boxes[f"headline-{kind}"] = box
    boxes["fragility"] = page.split('id="fragility">')[1].split("</p>")[0] if 'id="fragility"' in page else ""
    boxes = {part: unescape(re.sub(r"<[^>]+>", " ", text)) for part, text in boxes.items()}
    return boxes


def test_each_headline_box_names_the_systems_at_its_level_once():
    """Neither "the same level as X" in the sentence and "Tied with X" beside it, nor a list that disagrees with the
    other systems' big numbers (the accuracy tie group is narrower than its level); "all N tied" lists nobody."""
    doc = RatingsDocument.read(ELECTRICITY)
    heads = {s: headlines(doc, s) for s in doc.system_names}
    for system in doc.system_names:
        boxes = label_boxes(doc, system)
        for kind in ("robustness", "bias", "accuracy"):
            box = " ".join(boxes[f"headline-{kind}"].split())
            assert "Tied with" not in box and box.count("same level as") <= 1, (system, kind, box)
            level = heads[system][kind]["rating"]
            same = sorted(o for o in doc.system_names if o != system and heads[o][kind]["rating"] == level)
            if len(same) == len(doc.system_names) - 1 and (kind == "accuracy" or level == 1):
                assert f"All {len(doc.system_names)} systems tied" in box and "same level as" not in box
            elif same:
                assert f"The same level as {', '.join(same)}" in box, (system, kind, box)
            else:
                assert "same level as" not in box, (system, kind, box)
    # the case that showed both lists: a tie group narrower than its level (autoets: tied with autotheta and
    # holtwinters, its level also seasonal_naive's) — the box lists the level
    assert heads["autoets"]["accuracy"]["tied_with"] == ["autotheta", "holtwinters"]
    assert "The same level as autotheta, holtwinters, seasonal_naive" in " ".join(
        label_boxes(doc, "autoets")["headline-accuracy"].split()
    )


def test_fragility_rule_only_where_the_map_holds_and_only_a_harm():
    """The label's "most fragile" rule is the largest practically relevant harm (≥ the APE's margin δ, its interval
    above 0): a rule of a map that explains something on held-out windows, or, where the map explains nothing, the
    perturbation's effect on every window alike; it names its perturbation's description and speaks of window
    characteristics in words."""
    doc = RatingsDocument.read(ELECTRICITY)
    described = {p.id: p.description for p in doc.perturbations}
    for system in doc.system_names:
        shown = " ".join(label_boxes(doc, system)["fragility"].split())
        ape = {r.perturbation: r for r in doc.rows_of(system) if r.score == "ape"}
        candidates = []
        for p, m in doc.heterogeneity[system].items():
            margin = ape[p].margin
            if m.explained and m.explained > 0:
                candidates += [(r.cate, p) for r in m.rules if r.cate >= margin and r.cate > 0 and r.interval[0] > 0]
            elif ape[p].raw >= margin and ape[p].raw > 0 and ape[p].ape_true_interval[0] > 0:
                candidates.append((ape[p].raw, p))
        if not candidates:  # a map that holds found no noticeable harm; no map holds: nothing stands out
            holds = any(m.explained is None or m.explained > 0 for m in doc.heterogeneity[system].values())
            assert shown == (NO_HARM if holds else NO_RULE), (system, shown)
            continue
        cate, perturbation = max(candidates)
        assert shown.startswith(f"Under {perturbation} ({described[perturbation]}): "), (system, shown)
        assert f"{cate:.3g}" in shown
        assert not any(name in shown for name in COVARIATE_WORDS if name != "level"), shown
    # the reference's holtwinters: its P1 map explains nothing held out, yet P1 raises its error on every window
    assert " ".join(label_boxes(doc, "holtwinters")["fragility"].split()) == (
        "Under P1 (a value is recorded as 0): its error rises by 0.126 on every window alike (no window property "
        "predicts where it is hurt more) (95 % interval of the effect [0.0832, 0.168])."
    )
    # planted: the electricity maps of autoets explain nothing held out (its P1 tree split on trend strength and the
    # ADF p-value in-sample, 4.3× the average) and its P1 effect's interval covers 0; a map that holds is shown, a
    # larger fall of the error never is
    assert " ".join(label_boxes(doc, "autoets")["fragility"].split()) == NO_RULE
    planted = doc.model_copy(deep=True)
    p1 = planted.heterogeneity["autoets"]["P1"]
    p1.explained = 0.3
    p1.rules[-1].cate = -5.0  # a subgroup where the error falls far: no fragility
    shown = " ".join(label_boxes(planted, "autoets")["fragility"].split())
    assert shown.startswith("Under P1 (a value is recorded as 0): effect 4.3× the average (0.116 vs 0.0271) when")
    assert "the input's trend strength (0 to 1) ≤ 0.9641" in shown and "trend_strength" not in shown
    assert "the stationarity test's p-value (ADF; low = stationary) ≤ 0.0008632" in shown


def test_fragility_rule_is_a_harm_a_reader_could_notice():
    """Planted on the reference's autotheta (its P1 map holds: 0.303 where trend strength ≤ 0.92). A rule whose
    effect is below the margin δ, or whose interval reaches 0, is no fragility: a window-average model's label
    said "most fragile … effect -0.094× the average (0.000875 vs -0.0093)", a 15th of δ, its interval covering 0."""
    doc = RatingsDocument.read(ELECTRICITY)
    margin = next(r.margin for r in doc.rows_of("autotheta") if r.score == "ape" and r.perturbation == "P1")
    assert " ".join(label_boxes(doc, "autotheta")["fragility"].split()).startswith("Under P1 ")
    for cate, interval in ((margin / 15, [margin / 30, margin / 10]), (2 * margin, [-0.001, 4 * margin])):
        planted = doc.model_copy(deep=True)
        for rule in planted.heterogeneity["autotheta"]["P1"].rules:
            rule.cate, rule.interval = min(rule.cate, cate), interval
        assert " ".join(label_boxes(planted, "autotheta")["fragility"].split()) == NO_HARM, (cate, interval)


def test_most_fragile_is_a_collapse_on_every_window_not_a_smaller_subgroup():
    """Planted: a model that collapses under P3 on every window (its map explains nothing: the same everywhere), and
    has a subgroup rule under P1 a hundred times smaller. Its label showed the P1 rule as where it is most fragile
    (a model that returns 100 × its last value when any input is missing, on monthly water demand)."""
    doc = RatingsDocument.read(ELECTRICITY)
    planted = doc.model_copy(deep=True)
    p1, p3 = planted.heterogeneity["autotheta"]["P1"], planted.heterogeneity["autotheta"]["P3"]
    assert p1.explained > 0 and not p3.explained
    ape = next(r for r in planted.rows_of("autotheta") if r.score == "ape" and r.perturbation == "P3")
    ape.raw, ape.ape_true_interval = 90.4, [87.6, 93.2]
    shown = " ".join(label_boxes(planted, "autotheta")["fragility"].split())
    assert shown == (
        "Under P3 (a value is missing (NaN)): its error rises by 90.4 on every window alike (no window property "
        "predicts where it is hurt more) (95 % interval of the effect [87.6, 93.2])."
    )


def test_electricity_labels_fit_one_screen(tmp_path):
    """The eight labels of the electricity study (8 systems: long tie lists) fit LABEL_HEIGHT; with the systems
    at a level listed twice, five of them were 1,306-1,385 px tall."""
    from tests.test_cards import browser_or_skip

    executable = browser_or_skip()
    doc = RatingsDocument.read(ELECTRICITY)
    env = environment()
    with Session(executable) as session:
        for system in doc.system_names:
            page = tmp_path / f"{system}.html"
            context = label_context(doc, system, failures=0, report_href="report.html")
            page.write_text(env.get_template("label.html.j2").render(**context, generated="Generated"), "utf-8")
            session.open(page)
            height = session.page.evaluate("document.documentElement.scrollHeight")
            assert height <= LABEL_HEIGHT, (system, height)


def test_missing_values_line_says_who_handles_them():
    """ "Missing values: own handling" told a reader nothing: the label says the system handles them itself."""
    doc = RatingsDocument.read(ELECTRICITY)
    page = (
        environment()
        .get_template("label.html.j2")
        .render(**label_context(doc, "naive", failures=0, report_href="r.html"), generated="")
    )
    line = unescape(re.sub(r"<[^>]+>", " ", page.split('id="missing-values">')[1].split("</tr>")[0]))
    assert " ".join(line.split()) == "Missing values handled by the system itself (it accepts NaN)"


def test_plain_rule_names_characteristics_not_attributes():
    assert plain_rule("effect 2× the average (2 vs 1) when 10 < level ≤ 20 and volatility > 0.1") == (
        "effect 2× the average (2 vs 1) when 10 < the input's mean level ≤ 20 and "
        "the input's volatility (spread of its relative changes) > 0.1"
    )
    # a data attribute compared by value is already words, whatever it is called
    assert plain_rule("effect 2× the average (2 vs 1) when level is high") == (
        "effect 2× the average (2 vs 1) when level is high"
    )
    assert plain_rule("effect 0 on every window (no covariate separates the windows)") == (
        "effect 0 on every window (no covariate separates the windows)"
    )


def regional_study(folder: Path) -> Path:
    """Four series in two regions, two sites each (nested), no 'industry': a planted system 40 % too high in one
    region. Rows: long layout, business days."""
    rng = np.random.default_rng(5)
    dates = pd.bdate_range("2021-01-04", periods=150)
    walk = np.cumsum(rng.normal(0, 0.01, dates.size))
    rows = []
    for sid, region, site in [
        ("a1", "north", "n1"),
        ("a2", "north", "n2"),
        ("b1", "south", "s1"),
        ("b2", "south", "s2"),
    ]:
        value = 100 * np.exp(walk + rng.normal(0, 0.003, dates.size))
        rows.append(pd.DataFrame({"date": dates, "series": sid, "value": value, "region": region, "site": site}))
    pd.concat(rows).to_csv(folder / "load.csv", index=False)
    return write_yaml(
        folder / "study.yaml",
        """\
        name: regional
        seed: 2
        data: {source: csv, path: load.csv, layout: long, attribute_columns: [region, site]}
        windows: {input_length: 40, horizon: 10, stride: 5}
        perturbations:
          - {id: P0, operator: none}
          - {id: P1, operator: drop_to_zero}
          - {id: P2, operator: halve}
        outcome: rmax_scaled
        causal: {draws: 2}
        heterogeneity: {enabled: false}
        systems:
          - {name: naive, type: naive}
          - {name: random, type: random}
          - {name: north_high, type: biased, attribute: region, value: north, strength: 0.4}
        """,
    )


@pytest.fixture(scope="module")
def regional_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("regional")
    config = regional_study(folder)
    assert main(["assess", str(config), "--out", str(folder / "run"), "--workers", "1", "--no-cards"]) == 0
    return folder / "run"


def test_user_study_kit_asks_about_the_runs_own_bias_dimensions(regional_run, tmp_path):
    """No 'industry' in a kit of a study without one: the question, the form, the README and the figures name its
    region and site, and the key's "least biased" is the worst WRS level over both dimensions (bias headline)."""
    run, kit = regional_run, tmp_path / "kit"
    assert (
        main(
            [
                "study",
                "export",
                str(run),
                "--out",
                str(kit),
                "--questions",
                "4",
                "--per-question",
                "2",
                "--participants",
                "2",
            ]
        )
        == 0
    )
    questionnaire = json.loads((kit / "questionnaire.json").read_text())
    assert questionnaire["bias_dimensions"] == ["region", "site"]
    asked = "Which system is least biased (its errors depend least on the region or site)?"
    assert questionnaire["items"]["least_biased"]["text"] == asked
    for name in ("form.html", "README.md", "questionnaire.csv", "questionnaire.json"):
        text = (kit / name).read_text()
        assert "industry" not in text.lower(), name
    assert "depend least on the region or site" in (kit / "form.html").read_text()
    assert "depend least on the region or site" in (kit / "README.md").read_text()
    doc = json.loads((run / "ratings.json").read_text())
    rating = {(r["perturbation"], r["score"], r["system"]): r["rating"] for r in doc["ratings"]}
    key = json.loads((kit / "answer_key.json").read_text())["questions"]
    for q in questionnaire["questions"]:
        k = key[q["id"]]
        assert k["bias_scores"] == ["wrs_region", "wrs_site"]
        worst = {
            label: max(rating[(q["perturbation"], s, name)] for s in ("wrs_region", "wrs_site"))
            for label, name in k["systems"].items()
        }
        assert k["least_biased"] == sorted(label for label, w in worst.items() if w == min(worst.values()))
        for a in worst:
            for b in worst:
                assert (worst[a] < worst[b]) == (k["bias_rank"][a] < k["bias_rank"][b])
        for figure in q["figures"].values():
            assert (kit / figure).read_bytes().startswith(b"\x89PNG")
    # planted: the system 40 % too high in the north is the most biased, alone, wherever it is asked about
    asked = [k for k in key.values() if "north_high" in k["systems"].values()]
    assert asked
    for k in asked:
        label = next(x for x, name in k["systems"].items() if name == "north_high")
        assert label not in k["least_biased"] and k["bias_rank"][label] == max(k["bias_rank"].values()) > 1, k


def test_report_and_comparison_pages_say_what_a_level_and_a_tie_are(regional_run):
    """ "1 = best of the N systems compared (…)" lists N names, this one first; a tie is "not different both
    significantly and by more than δ" (rate.tiers), never only "not significantly different"."""
    render_cards(regional_run, formats=("html",))

    def text(name: str) -> str:
        return " ".join(unescape(re.sub(r"<[^>]+>", " ", (regional_run / "cards" / name).read_text())).split())

    report, comparison = text("naive.report.html"), text("comparison.html")
    assert "1 = best of the 3 systems compared (this one and random, north_high), 3 = worst" in report
    assert "not both significant (95 %, Benjamini–Hochberg) and larger than the score's margin δ" in report
    assert "both significantly (95 %, Benjamini–Hochberg) and by more than the score's margin δ" in comparison
    assert "not significantly different at 95 %" not in comparison


def test_score_panels_show_the_runs_own_dimensions_not_another_studys():
    """The radar and the comparison's small multiples take their axes from the scores the run rated: on the
    electricity study (attributes month and season) every panel showed "WRS by industry", "WRS by company" and
    "APE, domain-confounded" … as empty (n/a) axes and had no axis for its own WRS by month or by season. Every
    attribute's WRS is an axis, whatever its name (METHOD §4)."""
    for attribute in ("month", "season"):  # as Run.open registers a run's dimensions
        register_dimension(attribute)
        attribute_scheme(attribute)
    doc = RatingsDocument.read(ELECTRICITY)
    axes = radar_labels(doc)
    assert {"WRS by month", "WRS by season", "APE, month-confounded", "APE", "MASE"} <= set(axes)
    assert not [a for a in axes if any(word in a for word in ("industry", "company", "domain"))], axes
    normalised = normalised_scores(doc)
    assert all(len(values) == len(axes) and np.isfinite(values).any() for values in normalised.values())
    quickstart = RatingsDocument.read(ROOT / "ratings" / "quickstart" / "ratings.json")
    assert {"WRS by industry", "WRS by company"} <= set(radar_labels(quickstart))
    assert not [a for a in radar_labels(quickstart) if "month" in a or "domain" in a]


def test_a_fault_whose_forecasts_failed_is_said_so_not_no_change():
    """Planted on the reference sensors run: naive's forecasts fail on every window with the outage still on at
    the newest point (a median of the last five readings returns NaN there), so its newest-point APE is
    insufficient and rated worst. The label's fault line read "gap in the data: no change", the report's table had
    no newest-point row: both say the forecasts failed."""
    doc = RatingsDocument.read(ROOT / "ratings" / "sensors" / "ratings.json")
    planted = doc.model_copy(deep=True)
    newest = next(r for r in planted.rows_of("naive") if r.score == "ape_last" and r.perturbation == "gap")
    newest.raw, newest.insufficient, newest.rating = None, True, planted.levels
    for row in planted.faults:
        if row.system == "naive" and row.fault == "gap":
            row.rise_newest = row.ape_newest = None
    gap = next(line for line in fault_lines(planted, "naive") if line.startswith("gap in the data: "))
    assert gap.endswith(" (at the newest point: too many of its forecasts failed)"), gap
    table = fault_table(planted, "naive")
    assert table is not None
    assert next(r for r in table["rows"] if r["entry"] == "gap" and "newest" in r["name"])["cells"] == {3: "failed"}
    # and where the fault itself could not be rated, its rise from the windows that were left is not shown
    ape = next(r for r in planted.rows_of("naive") if r.score == "ape" and r.perturbation == "gap")
    ape.insufficient = True
    gap = next(line for line in fault_lines(planted, "naive") if line.startswith("gap in the data: "))
    assert gap.startswith("gap in the data: too many of its forecasts failed (at the newest point: ")


def test_an_improvement_is_said_to_be_the_average_over_every_window():
    """Water demand (reader4): arima's APE under P1 improves (its interval lies below 0), while the same P1 at the
    newest point raises its error by 632 % of the naive reference's clean error and sets its robustness headline.
    The warning "its error falls under a value is recorded as 0 (P1)" read as a contradiction of the headline: it
    says the fall is the average over every window, the changed point anywhere in the input."""
    doc = RatingsDocument.read(ELECTRICITY)
    planted = doc.model_copy(deep=True)
    ape = next(r for r in planted.rows_of("arima") if r.score == "ape" and r.perturbation == "P1")
    ape.improves = True
    said = [w for w in warnings(planted, "arima", failures=0) if w.startswith("Improves")]
    assert said == [
        "Improves, rated 1 there (an improvement is no harm): averaged over every window, the changed point anywhere "
        "in the input, its error falls under a value is recorded as 0 (P1)."
    ]


def test_the_detailed_reports_fragility_rules_name_characteristics_in_words():
    """The label said "the input's trend strength (0 to 1) ≤ 0.9238" and the detailed report, for the same rule,
    "trend_strength ≤ 0.9238" (electricity's autotheta; "level ≤ 8790", "seasonality_strength ≤ 0.2776" on reader4's
    collapsing model): the report words them as the label does."""
    doc = RatingsDocument.read(ELECTRICITY)
    rules = [r for found in fragility_rules(doc, "autotheta") for r in found["rules"]]
    assert any("the input's trend strength (0 to 1) ≤ 0.9238" in r for r in rules), rules
    assert not any(name in r for r in rules for name in ("trend_strength", "seasonality_strength", "adf_pvalue"))
