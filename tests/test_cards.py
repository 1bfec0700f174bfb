"""Cards: label, detailed report, machine-readable cards, comparison and index — content, escaping,
file names, determinism, the sections of newer ratings.json files, and a real browser."""

import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import numpy as np
import pytest
import yaml
from markupsafe import escape
from PIL import Image

from causalrate.cli import main
from causalrate.report.cards import render_cards, slugify
from causalrate.report.comparison_charts import pareto_front, robustness_accuracy
from causalrate.report.figures import system_colours
from causalrate.report.label import label_context, label_sentence
from causalrate.report.machine import model_card, schema
from causalrate.report.render import LABEL_HEIGHT, PICTURE_ONLY, WIDTH, Session, find_chromium
from causalrate.report.svg import Scale, log_ticks, nice_ticks
from causalrate.report.templating import environment
from causalrate.run import RatingsDocument
from tests.card_fixtures import augment_run
from tests.conftest import make_synthetic_study

HOSTILE = "<script>alert(1)</script>"
SYSTEMS = f"""\
- {{name: "{HOSTILE}", type: python, function: "planted.py:window_min", family: "t<b>s</b>", parameters: 1000}}
- {{name: "../../escape", type: python, function: "planted.py:window_median", parameters: 2000000}}
- {{name: naive, type: naive}}
- {{name: biased, type: biased, value: Alpha}}
- {{name: deaf, type: python, function: "planted.py:ignores_input"}}
"""
SLUGS = {
    HOSTILE: "script-alert-1-script",
    "../../escape": "escape",
    "naive": "naive",
    "biased": "biased",
    "deaf": "deaf",
}


def browser_or_skip() -> str:
    found = find_chromium()
    if found is None:
        if os.environ.get("CAUSALRATE_REQUIRE_BROWSER"):
            pytest.fail("Chromium is required here (CAUSALRATE_REQUIRE_BROWSER is set) but was not found")
        pytest.skip("Chromium not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cards")
    config = make_synthetic_study(folder, SYSTEMS, draws=3, stride=4)
    assert main(["assess", str(config), "--out", str(folder / "run"), "--workers", "1", "--no-cards"]) == 0
    return folder / "run"


@pytest.fixture(scope="module")
def run_v3(run, tmp_path_factory) -> Path:
    """The same run with every section of the agreed ratings-v3 additions (tests/card_fixtures.py)."""
    return augment_run(run, tmp_path_factory.mktemp("cards-v3") / "run")


class Texts(HTMLParser):
    """Collects the text of every rating cell (data-score) and of every element with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}
        self.ids: dict[str, str] = {}
        self._open: list[tuple[str, object]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-score" in a:
            self._open.append(("cell", (a["data-score"], a["data-perturbation"])))
        elif "id" in a:
            self._open.append(("id", a["id"]))
        else:
            self._open.append(("", None))
        if tag in ("br", "img", "meta"):
            self._open.pop()

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        for kind, key in self._open:
            if kind == "cell":
                self.cells[key] = self.cells.get(key, "") + data
            elif kind == "id":
                self.ids[key] = self.ids.get(key, "") + data


def texts(path: Path) -> Texts:
    parsed = Texts()
    parsed.feed(path.read_text(encoding="utf-8"))
    return parsed


def test_pages_escape_and_sanitise(run):
    written = render_cards(run, formats=("html", "md", "json", "yaml"))
    cards = run / "cards"
    assert all(p.resolve().parent == cards.resolve() for p in written)
    assert sorted(p.name for p in cards.glob("*.html")) == sorted(
        [
            "comparison.html",
            "index.html",
            *(f"{s}.html" for s in SLUGS.values()),
            *(f"{s}.report.html" for s in SLUGS.values()),
        ]
    )
    slug = SLUGS[HOSTILE]
    for name in (f"{slug}.html", f"{slug}.report.html", "comparison.html", "index.html"):
        html = (cards / name).read_text()
        assert HOSTILE not in html and "<b>s</b>" not in html, name
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, name
        assert "<script" not in html.lower(), name  # no JavaScript at all
        assert "http://" not in html and "https://" not in html, name  # self-contained: no network
        for img in re.findall(r"<img [^>]*>", html):
            assert 'src="data:image/svg+xml;base64,' in img and 'alt="' in img and 'alt=""' not in img
    assert "t&lt;b&gt;s&lt;/b&gt;" in (cards / f"{slug}.html").read_text()
    md = (cards / "naive.md").read_text()
    for target in re.findall(r"\]\(([^)]+)\)", md):
        assert (cards / target).is_file()
    # a headline's ties are the systems at its level (accuracy: at its mean level), not a 95 % test
    assert "| stability | tied with |" in md and "tied with (95 %)" not in md


def test_label_and_report_show_the_ratings_of_ratings_json(run):
    """The label's three headlines are ratings.json's `headlines`; without them (a v2 file) they fall back
    to overall / worst WRS / clean MASE."""
    render_cards(run, formats=("html",))
    doc = json.loads((run / "ratings.json").read_text())
    for system, slug in SLUGS.items():
        label = texts(run / "cards" / f"{slug}.html")
        assert label.ids["system-name"] == system  # rendered as text, never executed
        for family in ("robustness", "bias", "accuracy"):
            expected = doc["headlines"][system][family]["rating"]
            assert label.ids[f"{family}-rating"].strip() == ("—" if expected is None else str(expected))
        assert ("fragility" in label.ids) == bool(doc.get("heterogeneity", {}).get(system))
        assert label.ids["report-link"] == "detailed report"
        report = texts(run / "cards" / f"{slug}.report.html")
        mine = [r for r in doc["ratings"] if r["system"] == system and r["perturbation"].startswith("P")]
        assert mine
        for r in mine:
            shown = r.get("display") or str(r["rating"])  # "≥ k" when inconclusive
            assert report.cells[(r["score"], r["perturbation"])].strip().startswith(shown)


def test_label_falls_back_without_headlines(run, tmp_path):
    """A ratings-v2 file has no headlines: robustness = overall, bias = worst WRS, accuracy = clean MASE."""
    old = tmp_path / "v2"
    shutil.copytree(run, old, ignore=shutil.ignore_patterns("cards"))
    doc = json.loads((old / "ratings.json").read_text())
    for key in ("headlines", "checks"):
        doc.pop(key, None)
    (old / "ratings.json").write_text(json.dumps(doc))
    render_cards(old, formats=("html",))
    for system, slug in SLUGS.items():
        label = texts(old / "cards" / f"{slug}.html")
        assert label.ids["robustness-rating"].strip() == str(doc["overall"][system])
        mase = next(
            r for r in doc["ratings"] if r["system"] == system and r["score"] == "mase" and r["perturbation"] == "P0"
        )
        assert label.ids["accuracy-rating"].strip() == str(mase["rating"])
        wrs = [r["rating"] for r in doc["ratings"] if r["system"] == system and r["score"].startswith("wrs_")]
        assert label.ids["bias-rating"].strip() == str(max(wrs))


def test_report_labels_say_estimator_and_aggregation(run):
    render_cards(run, systems=["naive"], formats=("html",))
    html = (run / "cards" / "naive.report.html").read_text()
    assert "|mean over 3 draws of APE_adj|" in html  # the ratings rows of ape_industry / ape_company
    assert "APE_adj (mean over 3 draws)" in html  # the signed estimate in the effects and refutation tables
    assert re.search(r"<th>APE_adj</th>", html) is None  # never a bare, ambiguous label


def test_where_it_hurt_most_only_when_a_perturbation_raised_the_error(run):
    render_cards(run, systems=["deaf", HOSTILE], formats=("html",))
    assert "Where the perturbation hurt most" not in (run / "cards" / "deaf.report.html").read_text()
    assert "Where the perturbation hurt most" in (run / "cards" / f"{SLUGS[HOSTILE]}.report.html").read_text()


def test_new_sections_are_shown_when_present(run_v3):
    render_cards(run_v3, formats=("html", "json", "yaml"))
    doc = json.loads((run_v3 / "ratings.json").read_text())
    cards = run_v3 / "cards"
    first, last = doc["systems"][0]["name"], doc["systems"][-1]["name"]
    report_pages = {slug: (cards / f"{slug}.report.html").read_text() for slug in SLUGS.values()}
    for system, slug in SLUGS.items():
        label = texts(cards / f"{slug}.html")
        page = (cards / f"{slug}.html").read_text()
        for kind in ("robustness", "bias", "accuracy"):
            h = doc["headlines"][system][kind]
            assert label.ids[f"{kind}-rating"].strip() == str(h["rating"])
            said = label_sentence(h)  # the label says the headline's cause; the report its whole meaning
            assert said.replace("&", "&amp;") in page or said in label.ids[f"headline-{kind}"]
            assert str(escape(h["meaning"])) in report_pages[slug]  # as Jinja escapes it
            box = label.ids[f"headline-{kind}"]
            if h["tied_with"] and "systems tied" not in box:  # the tie group is among the systems at its level
                same = box.partition("The same level as ")[2].partition("On the published scale")[0]
                assert all(name in same for name in h["tied_with"]), (box, h["tied_with"])
        assert "industry = Alpha and price level &gt; 500" in page  # the top fragility rule
        report = (cards / f"{slug}.report.html").read_text()
        assert "Recency profile" in report and "Where it is fragile" in report and 'id="checks"' in report
    assert "Self-check failed" in texts(cards / f"{SLUGS[first]}.html").ids["warnings"]
    assert "Insufficient data" in texts(cards / f"{SLUGS[last]}.html").ids["warnings"]
    card = json.loads((cards / f"{SLUGS[last]}.model-card.json").read_text())
    kinds = {m["type"] for m in card["quantitative_analysis"]["performance_metrics"]}
    assert {"robustness_rating", "bias_rating", "accuracy_rating"} <= kinds
    for kind, h in doc["headlines"][last].items():
        assert (f"{kind}_absolute_rating" in kinds) == (h["absolute_rating"] is not None)
    assert any("Insufficient" in x["description"] for x in card["considerations"]["limitations"])


def test_model_card_follows_the_schema_and_the_schema_rejects_a_broken_one(run):
    written = render_cards(run, formats=("json",))
    doc = json.loads((run / "ratings.json").read_text())
    for path in (p for p in written if p.name.endswith(".model-card.json")):
        card = json.loads(path.read_text())
        jsonschema.validate(card, schema())
        metrics = card["quantitative_analysis"]["performance_metrics"]
        system = card["model_details"]["name"]
        for r in (r for r in doc["ratings"] if r["system"] == system):
            rated = [
                m
                for m in metrics
                if m["type"] == f"{r['score']}_rating" and m["slice"] == f"perturbation={r['perturbation']}"
            ]
            # an undefined row (rating null) has no level, so no rating metric
            assert [float(m["value"]) for m in rated] == ([] if r["rating"] is None else [r["rating"]])
            if r.get("interval") and None not in r["interval"] and r.get("raw") is not None:
                raw = next(
                    m for m in metrics if m["type"] == r["score"] and m["slice"] == f"perturbation={r['perturbation']}"
                )
                assert float(raw["confidence_interval"]["lower_bound"]) == pytest.approx(r["interval"][0])
                assert float(raw["confidence_interval"]["upper_bound"]) == pytest.approx(r["interval"][1])
        broken = json.loads(json.dumps(card))
        del broken["quantitative_analysis"]["performance_metrics"][-1]["value"]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema())
    undeclared = RatingsDocument.read(run / "ratings.json")
    undeclared.systems[0].architecture = None  # nothing declared: the card names the system type instead
    card = model_card(undeclared, undeclared.systems[0].name, failures=0, report="x")
    jsonschema.validate(card, schema())
    assert card["model_parameters"]["model_architecture"] == undeclared.systems[0].type


def test_model_index_yaml_parses_and_carries_every_rating(run_v3):
    render_cards(run_v3, formats=("yaml",))
    doc = json.loads((run_v3 / "ratings.json").read_text())
    for system, slug in SLUGS.items():
        block = yaml.safe_load((run_v3 / "cards" / f"{slug}.model-index.yaml").read_text())
        (entry,) = block["model-index"]
        assert entry["name"] == system
        (result,) = entry["results"]
        assert result["task"]["type"] == "time-series-forecasting" and result["dataset"]["name"]
        metrics = result["metrics"]
        assert all(set(m) == {"type", "value", "name"} for m in metrics)
        for kind in ("robustness", "bias", "accuracy"):
            assert {
                "type": f"causalrate/{kind}-rating",
                "value": doc["headlines"][system][kind]["rating"],
            }.items() <= next(m for m in metrics if m["type"] == f"causalrate/{kind}-rating").items()
        for r in (r for r in doc["ratings"] if r["system"] == system):
            found = [
                m
                for m in metrics
                if m["type"] == f"causalrate/{r['score']}-rating" and f"under {r['perturbation']}:" in m["name"]
            ]
            expected = [] if r["rating"] is None else [r["rating"]]  # an undefined row has no level to report
            assert [m["value"] for m in found] == expected, (system, r["score"], r["perturbation"])


def test_same_run_same_bytes_but_the_timestamp(run):
    formats = ("html", "md", "json", "yaml")
    render_cards(run, formats=formats)
    first = {p.name: p.read_bytes() for p in (run / "cards").iterdir()}
    shutil.rmtree(run / "cards")
    render_cards(run, formats=formats)
    second = {p.name: p.read_bytes() for p in (run / "cards").iterdir()}
    assert first.keys() == second.keys()
    stamp = re.compile(rb"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")
    for name in first:
        assert stamp.sub(b"", first[name]) == stamp.sub(b"", second[name]), name


def test_one_colour_per_system_everywhere(run):
    render_cards(run, formats=("html",))
    doc = json.loads((run / "ratings.json").read_text())
    colours = system_colours([s["name"] for s in doc["systems"]])
    assert len(set(colours.values())) == len(colours)  # five systems, five colours
    assert not {"#0072B2", "#E69F00", "#D55E00"} & set(list(colours.values())[:4])  # clear of the level colours
    for page in ("comparison.html", "index.html"):
        swatches = re.findall(
            r'swatch" style="background: (#[0-9A-Fa-f]{6})"></span>([^<]+)<', (run / "cards" / page).read_text()
        )
        names = {
            s["name"].replace("<", "&lt;").replace(">", "&gt;"): c
            for s, c in zip(doc["systems"], colours.values(), strict=True)
        }
        assert swatches and all(names[name] == colour for colour, name in swatches)


def test_figures_are_svg_files_that_parse(run):
    """The Markdown report's figures are standalone SVG documents with a size (what an <img> needs)."""
    render_cards(run, formats=("md",))
    found = sorted((run / "cards").glob("*.svg"))
    assert {p.name.split(".")[1] for p in found} >= {"radar", "ape", "balance"}
    for path in found:
        root = ElementTree.parse(path).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg", path.name
        assert float(root.get("width")) > 300 and float(root.get("height")) > 100, path.name
        assert len(root) > 5 and "nan" not in path.read_text().lower(), path.name  # drawn, no NaN coordinate


def test_svg_ticks_and_scales():
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-0.013, 0.047) == [0.0, 0.02, 0.04]  # step 0.012 rounds up to 0.02
    assert nice_ticks(3.0, 7.2) == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert Scale(0.0, 10.0, 100.0, 300.0)(2.5) == 150.0  # linear: a quarter of the way
    assert Scale(10.0, 1000.0, 0.0, 200.0, log=True)(100.0) == 100.0  # log: 100 is halfway from 10 to 1000
    assert Scale(0.0, 1.0, 250.0, 50.0)(1.0) == 50.0  # y grows upwards: pixels run the other way


def test_log_ticks_and_the_robustness_axis_turns_logarithmic_only_when_effects_span_a_decade():
    assert log_ticks(0.003, 0.5) == [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    assert log_ticks(1e-4, 10.0) == [1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0]  # decades only beyond eight ticks

    def chart(effects: dict[str, float]) -> str:
        points = {
            s: {"x": 3.0 + i, "x_lo": 2.9 + i, "x_hi": 3.1 + i, "y": y, "y_lo": 0.0, "y_hi": 1.5 * y}
            for i, (s, y) in enumerate(effects.items())
        }
        return robustness_accuracy(
            points,
            colours=dict.fromkeys(effects, "#000"),
            markers=dict.fromkeys(effects, "o"),
            x_label="MASE",
            y_label="APE",
        )

    spread = chart({"naive": 0.006, "arima": 0.012, "random": 0.34})
    assert "(log scale)" in spread and "nan" not in spread.lower()
    assert "(log scale)" not in chart({"naive": 0.2, "arima": 0.3, "random": 0.34})
    assert "(log scale)" not in chart({"naive": 0.0, "random": 0.34})  # an effect of 0 has no log


def test_pareto_front():
    points = {"a": (1.0, 5.0), "b": (2.0, 2.0), "c": (3.0, 3.0), "d": (5.0, 1.0), "e": (2.0, 2.0)}
    assert pareto_front(points) == ["a", "b", "e", "d"]  # c is beaten by b on both; ties both stay


def test_groups_only_with_two_or_more(run, run_v3):
    render_cards(run, formats=("html",))
    page = (run / "cards" / "comparison.html").read_text()
    assert "<h3>Modality</h3>" not in page  # every system is numeric: one group, not shown
    assert "<h3>Family</h3>" in page  # t<b>s</b>, statistical (naive, biased) and user model (python): three groups


def test_pages_in_a_real_browser(run_v3):
    """Every page: no horizontal overflow, every image loaded, no network request; the label fits one screen
    and prints on one page; PNGs are sized to their page (never cut)."""
    executable = browser_or_skip()
    written = render_cards(run_v3)
    cards = run_v3 / "cards"
    assert {p.name for p in written} >= {f"{s}.{x}" for s in SLUGS.values() for x in ("png", "pdf")} | {
        "comparison.png"
    }
    pages = sorted(cards.glob("*.html"))
    with Session(executable) as session:
        for page in pages:
            session.open(page)
            width = session.page.evaluate("document.documentElement.scrollWidth")
            assert width <= WIDTH, (page.name, width)
            boxes = session.page.eval_on_selector_all(".scroll", "els => els.map(e => e.scrollWidth - e.clientWidth)")
            assert all(extra <= 1 for extra in boxes), (page.name, boxes)  # no table scrolls sideways: none cut
            images = session.page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth])")
            assert all(done and natural > 0 for done, natural in images), page.name
            height = session.page.evaluate("document.documentElement.scrollHeight")
            if not page.name.endswith(".report.html") and page.name not in ("comparison.html", "index.html"):
                assert height <= LABEL_HEIGHT, (page.name, height)
        assert session.blocked == []
        # the interception works: a page that asks for the network is caught
        probe = cards / "probe.html"
        probe.write_text(
            '<img src="http://example.invalid/x.png"><link rel="stylesheet" href="https://example.invalid/s.css">'
        )
        session.open(probe)
        assert len(session.blocked) == 2
        probe.unlink()
        letter = session.pdf(cards / f"{SLUGS[HOSTILE]}.html", cards / "letter.pdf", paper="Letter")
        assert len(re.findall(rb"/Type\s*/Page(?!s)", letter.read_bytes())) == 1  # one US Letter page too
        letter.unlink()
    for slug in SLUGS.values():
        pdf = (cards / f"{slug}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page(?!s)", pdf)) == 1, slug
        with Image.open(cards / f"{slug}.png") as image:
            pixels = np.asarray(image.convert("L"), dtype=float)
        assert pixels.shape[1] == WIDTH and 600 < pixels.shape[0] <= LABEL_HEIGHT
        assert pixels.std() > 20 and (pixels < 100).mean() > 0.01  # not blank: text drawn
        assert (pixels[-20:] > 250).all()  # the bottom is page margin: nothing cut off
    with Image.open(cards / "comparison.png") as image:
        assert image.size[0] == WIDTH and image.size[1] > LABEL_HEIGHT  # the whole page, not a window of it


def test_card_command_errors(run, cli, tmp_path):
    assert cli("card", tmp_path / "nowhere")[0] == 2
    code, _, err = cli("card", run, "--system", "ghost")
    assert code == 2 and "ghost" in err
    code, _, err = cli("card", run, "--format", "docx")
    assert code == 2 and "docx" in err
    code, out, _ = cli("card", run, "--system", "naive", "--format", "md")
    assert code == 0 and any(line.endswith("naive.md") for line in out.split())


def test_the_browser_started_first_is_closed_when_the_command_fails(run, cli, tmp_path):
    """`card` and `rate` start Chromium before they read the run (render.picture_renderer): a command that then
    fails (exit 2) leaves no renderer thread, no browser behind; one that succeeds renders through it."""
    browser_or_skip()
    import gc
    import threading

    def renderers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "causalrate-render"]

    for args in (
        ("card", tmp_path / "nowhere"),  # load_run_plugins fails: before render_cards is reached
        ("card", run, "--system", "ghost"),
        ("card", run, "--format", "html,png,docx"),
        ("rate", run, "--systems", "ghost", "--out", tmp_path / "again"),
    ):
        code, _, err = cli(*args)
        assert code == 2 and "Traceback" not in err, (args, err)
        assert renderers() == [], args
    code, out, _ = cli("card", run, "--system", "naive", "--format", "png")
    assert code == 0 and str(run / "cards" / "naive.png") in out.split() and not renderers()
    # the command imported its modules with the collector off and froze them (cli._loading): on the way out the
    # collector is on again and nothing stays frozen (main also runs in-process, as here)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_slugify():
    taken: set[str] = set()
    assert slugify("../../etc/passwd", taken) == "etc-passwd"
    assert slugify("etc passwd", taken) == "etc-passwd-2"
    assert slugify("....", taken) == "system"
    assert "/" not in slugify("a/b\\c", taken) and ".." not in slugify("a..b", taken)


def test_eval_results_follow_the_hugging_face_layout(run_v3, monkeypatch):
    """Issue 31: `<slug>.eval_results.yaml` beside model-index: dataset id and revision, value, date, source."""
    from causalrate.report.machine import eval_results_schema

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01
    render_cards(run_v3, formats=("yaml",))
    doc = json.loads((run_v3 / "ratings.json").read_text())
    for system, slug in SLUGS.items():
        entries = yaml.safe_load((run_v3 / "cards" / f"{slug}.eval_results.yaml").read_text())
        jsonschema.validate(entries, eval_results_schema())
        assert {e["date"] for e in entries} == {"2026-01-01"}
        assert {e["dataset"]["revision"] for e in entries} == {doc["provenance"]["data_hash"][:16]}
        raws = [r for r in doc["ratings"] if r["system"] == system and r.get("raw") is not None]
        assert len([e for e in entries if e["dataset"]["task_id"].count("/") == 2]) == len(raws)
        assert all("trained on: unknown" in e["notes"] for e in entries)
    broken = [{"dataset": {"id": "causalrate/csv", "task_id": "x"}, "value": 1.0, "source": {"name": "y"}}]
    with pytest.raises(jsonschema.ValidationError, match="'date' is a required property"):
        jsonschema.validate(broken, eval_results_schema())


def test_twenty_systems_get_distinct_looks_and_never_a_badge_colour():
    """Issue 31: beyond eight systems colours no longer repeat alone, and none takes a rating badge's colour."""
    from causalrate.report.figures import system_colours, system_markers

    names = [f"s{i}" for i in range(20)]
    colours, markers = system_colours(names), system_markers(names)
    looks = {(colours[n], markers[n]) for n in names}
    assert len(looks) == 20
    levels_css = (Path(__file__).parents[1] / "causalrate/report/templates/_levels.css.j2").read_text()
    badges = {c.lower() for c in re.findall(r"#[0-9A-Fa-f]{6}", levels_css)}
    assert {"#0072b2", "#e69f00", "#d55e00"} <= badges
    assert not badges & {c.lower() for c in colours.values()}


def test_comparison_page_holds_twenty_systems(tmp_path):
    """Issue 31: 20 systems on one comparison page: every one in every table and figure legend, and the PNG
    as wide as what it shows (no column cut) and without the table of every rating (the HTML's), in the browser."""
    executable = browser_or_skip()
    names = [f"sys{i:02d}-{'median' if i % 2 else 'min'}" for i in range(20)]
    systems = "".join(
        f'- {{name: {n}, type: python, function: "planted.py:window_{n.split("-")[1]}"}}\n' for n in names
    )
    config = make_synthetic_study(
        tmp_path, systems, draws=2, stride=16, extra="rigor: {bootstrap_size: 0, refute: false}\n"
    )
    assert main(["assess", str(config), "--out", str(tmp_path / "run"), "--workers", "2", "--no-cards"]) == 0
    render_cards(tmp_path / "run", png_required=True)
    page = (tmp_path / "run" / "cards" / "comparison.html").read_text()
    assert all(page.count(f">{n}<") >= 2 for n in names)  # the headline table and the per-score table
    with Session(executable) as session:
        session.open(tmp_path / "run" / "cards" / "comparison.html")
        table = session.page.evaluate("document.getElementById('ratings').scrollWidth")  # the table, not its box
        tall = session.page.evaluate("document.documentElement.scrollHeight")
        session.page.add_style_tag(content=PICTURE_ONLY)  # the PNG's page: the table of every rating left out
        shown = session.page.evaluate("document.documentElement.scrollWidth")
    assert table > WIDTH  # the HTML keeps every rating of every system
    with Image.open(tmp_path / "run" / "cards" / "comparison.png") as image:
        assert image.size[0] >= shown and LABEL_HEIGHT < image.size[1] < tall  # whole, one-glance: no table


LABEL_MARGIN = 60  # px a shipped study's label keeps below LABEL_HEIGHT: a longer sentence stays on one page
LABEL_BOTTOM = "Math.ceil(document.getElementById('label').getBoundingClientRect().bottom)"


@pytest.mark.parametrize("study", ["quickstart", "domains", "electricity", "sensors"])
def test_every_reference_label_fits_one_page(study, tmp_path):
    """Each shipped study's label (ratings/<study>) fits LABEL_HEIGHT with LABEL_MARGIN to spare: one printed
    page, whatever the suite's size (the sensors suite has 43 perturbations and long descriptions; its
    seasonal_naive label ended 4 px above the limit, 1,296 px, before the label was shortened)."""
    executable = browser_or_skip()
    doc = RatingsDocument.read(Path(__file__).resolve().parents[1] / "ratings" / study / "ratings.json")
    template = environment().get_template("label.html.j2")
    with Session(executable) as session:
        for system in doc.system_names:
            page = tmp_path / f"{system}.html"
            context = label_context(doc, system, failures=0, report_href="report.html")
            page.write_text(template.render(**context, generated="generated"), encoding="utf-8")
            session.open(page)
            bottom = session.page.evaluate(LABEL_BOTTOM)
            assert bottom <= LABEL_HEIGHT - LABEL_MARGIN, (study, system, bottom)


def with_systems(doc: RatingsDocument, n: int) -> RatingsDocument:
    """The electricity ratings with n systems: its first n, or its 8 and copies of its statsforecast systems."""
    raw = json.loads(doc.to_json())
    names = [s["name"] for s in raw["systems"]]
    keep = set(names[:n])
    raw["systems"] = [s for s in raw["systems"] if s["name"] in keep]
    raw["ratings"] = [r for r in raw["ratings"] if r["system"] in keep]
    raw["headlines"] = {k: v for k, v in raw["headlines"].items() if k in keep}
    for i in range(n - len(names)):
        source, copy = names[5 + i % 3], f"{names[5 + i % 3]}_copy{i + 1}"
        raw["systems"].append({**next(s for s in raw["systems"] if s["name"] == source), "name": copy})
        raw["ratings"] += [{**r, "system": copy} for r in raw["ratings"] if r["system"] == source]
        raw["headlines"][copy] = raw["headlines"][source]
    return RatingsDocument.model_validate(raw)


@pytest.mark.parametrize("n", [2, 4, 8, 10])
def test_the_headline_boxes_hold_for_2_to_10_systems(n, tmp_path):
    """With 8 systems the accuracy box was squeezed to 194 px (its level in words and the "1 = best, 3 = worst,
    8 systems compared" legend broken over five lines, taller than the number beside them): every box keeps
    room for its level in words beside the number, the legend is said once (beside the name), a box lists at
    most 5 systems at its level, and the label fits one page, from 2 to 10 systems."""
    executable = browser_or_skip()
    electricity = Path(__file__).resolve().parents[1] / "ratings" / "electricity" / "ratings.json"
    doc = with_systems(RatingsDocument.read(electricity), n)
    assert len(doc.system_names) == n
    template = environment().get_template("label.html.j2")
    boxes = """[...document.querySelectorAll('.head')].map(e => [e.getBoundingClientRect().width,
        e.querySelector('.words').getBoundingClientRect().height,
        e.querySelector('.num').getBoundingClientRect().height])"""
    with Session(executable) as session:
        for system in doc.system_names:
            page = tmp_path / f"{system}.html"
            context = label_context(doc, system, failures=0, report_href="report.html")
            html = template.render(**context, generated="generated")
            page.write_text(html, encoding="utf-8")
            session.open(page)
            for width, words, number in session.page.evaluate(boxes):
                assert width >= 240 and words <= number, (n, system, width, words)  # the level's words beside it
            assert session.page.evaluate(LABEL_BOTTOM) <= LABEL_HEIGHT, (n, system)
            assert html.count("= worst") == 1 and f"among the {n} systems compared" in html
            for h in context["headlines"]:
                assert h["same"].count(", ") <= 4, h["same"]
