"""The cards speak the data's words (issue 41, items 6-7): operator descriptions say what happens to a value,
"What was tested" comes from the data, no false note, counts that match the store, Markdown without HTML
entities, each score in its headline's table, and a comparison chart on the headlines' own quantities."""

import json
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.cli import main
from causalrate.parameters import RatingSettings
from causalrate.perturb.operators import OPERATORS
from causalrate.rate.headlines import headline_ratings
from causalrate.rate.ratings import COLUMNS
from causalrate.report import label
from causalrate.report.cards import render_cards
from causalrate.report.comparison import scatter_points
from causalrate.report.templating import md
from causalrate.run import RatingsDocument, Run
from tests.conftest import make_synthetic_study

SYSTEMS = """\
- {name: naive, type: naive}
- {name: random, type: random}
- {name: median, type: python, function: "planted.py:window_median"}
"""
ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The paper's suite (newest-point forecasts included) on the synthetic CSV: naive, random, a median."""
    folder = tmp_path_factory.mktemp("wording")
    config = make_synthetic_study(folder, SYSTEMS, suite="paper", draws=3, stride=4)
    assert main(["assess", str(config), "--out", str(folder / "run"), "--workers", "1", "--no-cards"]) == 0
    render_cards(folder / "run", formats=("html", "md"))
    return folder / "run"


def edited_run(run: Path, folder: Path, edit) -> Path:
    """A copy of the run whose ratings.json is changed by edit(dict)."""
    copy = folder / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("cards"))
    doc = json.loads((copy / "ratings.json").read_text(encoding="utf-8"))
    edit(doc)
    (copy / "ratings.json").write_text(json.dumps(doc), encoding="utf-8")
    return copy


def test_operator_descriptions_say_what_happens_to_a_value():
    """No stock-market or other domain words: the data's context comes from the study, not the operator."""
    domain = ("split", "dividend", "fat-finger", "dollar", "cent", "feed", "returns", "days", "price", "stock")
    for name, cls in OPERATORS.items():
        words = cls.description.lower()
        assert not [w for w in domain if w in words], (name, cls.description)


def test_what_was_tested_comes_from_the_data(run, tmp_path):
    doc = Run.open(run).ratings
    lines = dict(label.tested(doc))
    data, period = lines["Data"], lines["Period"]
    frame = pd.read_csv(run.parent / "prices.csv")
    series = list(dict.fromkeys(frame["series"].astype(str)))
    assert data == "prices.csv"  # the file's name only, never the rater's folders
    assert lines["Series"].startswith(f"{len(series)}: {', '.join(series[:6])}")
    industries = ", ".join(sorted(set(frame["industry"])))
    assert f"industry ({len(set(frame['industry']))}: {industries})" in lines["Series"]  # the data's own attributes
    assert "company (" in lines["Series"]
    first, last = pd.to_datetime(frame["date"]).min(), pd.to_datetime(frame["date"]).max()
    assert period.startswith(f"{first:%Y-%m-%d} to {last:%Y-%m-%d}, ")
    assert "start" not in period and " end" not in period
    page = (run / "cards" / "naive.html").read_text(encoding="utf-8")
    assert str(run.parent) not in page
    assert str(run.parent) not in (run / "cards" / "naive.report.html").read_text(encoding="utf-8")

    def describe(d):
        d["provenance"]["config"]["data"]["description"] = "weekly sensor readings by site"

    described = RatingsDocument.read(edited_run(run, tmp_path, describe) / "ratings.json")
    assert dict(label.tested(described))["Data"] == "weekly sensor readings by site — prices.csv"


def test_a_python_system_is_a_user_model_not_statistical(run):
    doc = json.loads((run / "ratings.json").read_text(encoding="utf-8"))
    families = {s["name"]: s["family"] for s in doc["systems"]}
    assert families["median"] == "user model" and families["naive"] == "statistical"
    sub = re.search(r'<div class="sub">(.*?)</div>', (run / "cards" / "median.html").read_text()).group(1)
    assert "user model" in sub and "statistical" not in sub


def test_the_no_headline_note_shows_only_without_a_headline_section(run, tmp_path):
    note = "has no headline section"
    assert note not in (run / "cards" / "naive.html").read_text(encoding="utf-8")

    def no_bias(d):  # a headline family absent (a study whose data have no attribute): not a missing section
        for families in d["headlines"].values():
            families.pop("bias", None)

    without_bias = edited_run(run, tmp_path / "a", no_bias)
    render_cards(without_bias, systems=["naive"], formats=("html",))
    page = (without_bias / "cards" / "naive.html").read_text(encoding="utf-8")
    assert 'id="bias-rating"' in page and note not in page
    older = edited_run(run, tmp_path / "b", lambda d: d.pop("headlines"))
    render_cards(older, systems=["naive"], formats=("html",))
    assert note in (older / "cards" / "naive.html").read_text(encoding="utf-8")


def test_report_md_counts_every_stored_forecast(run):
    with sqlite3.connect(run / "forecasts.sqlite") as conn:
        stored = conn.execute("SELECT COUNT(*) FROM forecasts").fetchone()[0]
        at_last = conn.execute("SELECT COUNT(*) FROM forecasts WHERE perturbation LIKE '%@last'").fetchone()[0]
    assert at_last > 0  # the newest-point companions are stored: the count must include them
    doc = json.loads((run / "ratings.json").read_text(encoding="utf-8"))
    assert doc["counts"]["forecasts"] == stored
    header = (run / "report.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert f"{stored} forecasts stored" in header and " = " not in header


def test_markdown_holds_no_html_entities(run):
    texts = [(run / "report.md").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in sorted((run / "cards").glob("*.md"))]
    assert any("reference's" in t for t in texts)  # an apostrophe is written as one
    for text in texts:
        assert not ENTITY.findall(text)
    assert md("<script>a|b</script> x*y [z]") == r"\<script\>a\|b\</script\> x\*y \[z\]"


def test_each_score_is_in_its_headlines_table_in_the_report(run):
    page = (run / "cards" / "naive.report.html").read_text(encoding="utf-8")
    tables = dict(re.findall(r'<table class="ratings" id="([a-z]+)-\d+">(.*?)</table>', page, flags=re.S))
    scores = {kind: set(re.findall(r'data-score="([^"]+)"', body)) for kind, body in tables.items()}
    assert "failure_rate" in scores["robustness"]  # METHOD §6: failure rate joins the robustness headline
    assert 'data-score="failure_rate" data-perturbation="P0"' in tables["robustness"]  # its clean-input rate too
    assert "fragility_spread" in scores["other"] and "fragility_spread" not in scores["robustness"]  # no headline
    assert scores["accuracy"] >= {"mase", "smape"} and "failure_rate" not in scores["accuracy"]
    assert not any(s.startswith("wrs_") for s in scores["robustness"]) and "wrs_industry" in scores["bias"]


def test_accuracy_same_level_names_every_system_at_that_level():
    """Under the paper's rule a mean headline has no tie groups; its sentence still names who shares its level."""
    rows = []
    for system, (smape, mase) in {"a": (1.0, 1.0), "b": (1.1, 1.2), "c": (1.2, 1.1), "d": (3.0, 3.0)}.items():
        for score, raw in (("smape", smape), ("mase", mase)):
            rows.append({"perturbation": "P0", "score": score, "system": system, "raw": raw})
    rated = pd.DataFrame(rows)
    rated["rating"] = rated.groupby("score")["raw"].rank(method="min").map({1.0: 1, 2.0: 2, 3.0: 2, 4.0: 3})
    rated = rated.assign(
        rule="paper", absolute_rating=np.nan, tied_with=[[] for _ in rows], insufficient=False, note=None,
        display=None, quantity=np.nan, margin=0.0, relevant=True, improves=False,
    )[COLUMNS]  # fmt: skip
    heads = headline_ratings(rated, settings=RatingSettings(levels=3, rule="paper"), control="P0")
    levels = {s: h["accuracy"]["rating"] for s, h in heads.items()}
    assert levels["b"] == levels["c"]  # the check below needs a shared level
    for system, h in heads.items():
        peers = sorted(o for o, level in levels.items() if level == levels[system] and o != system)
        named = re.search(r"the same level as ([^(;.]*)", h["accuracy"]["meaning"])
        assert (named.group(1).strip().split(", ") if named else []) == peers, h["accuracy"]["meaning"]


def test_comparison_axes_are_the_headlines_quantities(run):
    """Naive, least robust by its headline (a corrupted newest value is its forecast), plots as least robust;
    the old axis (mean |APE| over P1-P3, without ape_last) put it among the most robust."""
    doc = Run.open(run).ratings
    points, left_out = scatter_points(doc)
    assert not left_out and set(points) == set(doc.system_names)
    robustness = {s: doc.headlines[s]["robustness"] for s in doc.system_names}
    for system, point in points.items():
        weakest = robustness[system].cause or robustness[system].largest  # no practical effect: its largest
        assert point["y"] == pytest.approx(weakest.quantity)
        assert point["y_lo"] <= point["y"] <= point["y_hi"]
        mase = next(r for r in doc.rows_of(system) if (r.score, r.perturbation) == ("mase", doc.control))
        assert point["x"] == pytest.approx(mase.quantity)
    assert robustness["naive"].cause.score == "ape_last"
    assert robustness["naive"].rating == max(h.rating for h in robustness.values())
    assert max(points, key=lambda s: points[s]["y"]) == "naive"
    mean_ape = {
        s: np.mean([r.raw for r in doc.rows_of(s) if r.score == "ape" and r.perturbation in ("P1", "P2", "P3")])
        for s in doc.system_names
    }
    assert mean_ape["naive"] < mean_ape["random"]  # the old axis: random above naive


def test_comparison_places_a_headline_without_cause_and_names_one_set_by_failures(run, tmp_path):
    """No cause (no practical effect anywhere): its largest effect on the same basis; a weakest link that is a
    failure rate has no value on that basis, so the system is named under the chart, never placed wrongly."""

    def edit(d):
        d["headlines"]["median"]["robustness"].pop("cause", None)
        d["headlines"]["random"]["robustness"]["cause"].update(score="failure_rate", text="5 % of its forecasts fail")

    doc = RatingsDocument.read(edited_run(run, tmp_path, edit) / "ratings.json")
    points, left_out = scatter_points(doc)
    effects = [
        r.quantity
        for r in doc.rows_of("median")
        if r.score in ("ape", "ape_last", "recency", "ape_worst") and r.perturbation != doc.control and r.quantity
    ]
    assert points["median"]["y"] == pytest.approx(max(effects))
    assert "random" not in points
    # "set by too many of its forecasts failed to measure …" did not parse: the cause follows a colon
    assert left_out["random"] == "its robustness headline is set by its weakest result: 5 % of its forecasts fail"


@pytest.mark.parametrize(
    ("data", "source", "shown"),
    [
        ({"source": "csv", "path": "/home/rater/private/load.csv"}, "/home/rater/private/load.csv", "load.csv"),
        ({"source": "parquet", "path": r"C:\Users\rater\load.parquet"}, r"C:\Users\rater\load.parquet", "load.parquet"),
        ({"source": "yfinance", "series": ["AAPL"]}, "yfinance cache /home/rater/.cache", "Yahoo Finance (yfinance)"),
    ],
)
def test_a_card_never_shows_the_raters_folders(run, tmp_path, data, source, shown):
    def edit(d):
        d["provenance"]["config"]["data"] = data
        d["provenance"]["data_source"] = source

    doc = RatingsDocument.read(edited_run(run, tmp_path, edit) / "ratings.json")
    assert dict(label.tested(doc))["Data"] == shown


def test_method_notes_speak_only_of_what_the_run_computed():
    """A study without a WRS score (sensors: one series, no attribute with two values) is not told how WRS is
    tested, in report.md or its detailed report; one with WRS scores and matched effects gets both notes."""
    from causalrate.report.outputs import MATCHING_NOTE, WRS_NOTE, method_note

    assert method_note({"wrs_industry", "ape"}, matched=True) == f"{WRS_NOTE} {MATCHING_NOTE}"
    assert method_note({"ape", "smape"}, matched=True) == MATCHING_NOTE
    assert method_note({"smape"}, matched=False) == ""
    root = Path(__file__).resolve().parents[1] / "ratings"
    for study, has_wrs in (("sensors", False), ("quickstart", True)):
        assert ("Welch's t-test at the stated" in (root / study / "report.md").read_text()) == has_wrs
        detailed = next((root / study / "cards").glob("*.report.html")).read_text()
        assert ("<strong>WRS</strong> counts" in detailed) == has_wrs
