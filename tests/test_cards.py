"""Rating cards and the comparison page: content, escaping, file names, determinism, a real browser."""

import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from causalrate.cli import main
from causalrate.report.cards import chromium, find_chromium, render_cards, slugify
from tests.conftest import make_synthetic_study

HOSTILE = "<script>alert(1)</script>"
SYSTEMS = f"""\
- {{name: "{HOSTILE}", type: python, function: "planted.py:window_min", family: "t<b>s</b>", parameters: 1000}}
- {{name: "../../escape", type: python, function: "planted.py:window_median", parameters: 2000000}}
- {{name: naive, type: naive}}
- {{name: biased, type: biased, value: Alpha}}
"""


def browser_or_skip() -> str:
    found = find_chromium()
    if found is None:
        if os.environ.get("CAUSALRATE_REQUIRE_BROWSER"):
            pytest.fail("Chromium is required here (CAUSALRATE_REQUIRE_BROWSER is set) but was not found")
        pytest.skip("Chromium not installed (apt-get install chromium)")
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cards")
    config = make_synthetic_study(folder, SYSTEMS, draws=3, stride=4)
    assert main(["assess", str(config), "--out", str(folder / "run"), "--workers", "1", "--no-cards"]) == 0
    return folder / "run"


class Cells(HTMLParser):
    """Collects the text of every rating cell and of the elements with an id."""

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

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        for kind, key in self._open:
            if kind == "cell":
                self.cells[key] = self.cells.get(key, "") + data
            elif kind == "id":
                self.ids[key] = self.ids.get(key, "") + data


def test_cards_escape_and_sanitise(run):
    written = render_cards(run, formats=("html", "md"))
    cards = run / "cards"
    assert all(p.resolve().parent == cards.resolve() for p in written)
    assert sorted(p.name for p in cards.glob("*.html")) == [
        "biased.html",
        "comparison.html",
        "escape.html",
        "naive.html",
        "script-alert-1-script.html",
    ]
    html = (cards / "script-alert-1-script.html").read_text()
    assert HOSTILE not in html and "<b>s</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "t&lt;b&gt;s&lt;/b&gt;" in html
    comparison = (cards / "comparison.html").read_text()
    assert HOSTILE not in comparison and "&lt;script&gt;" in comparison
    assert "<script" not in html.lower() and "<script" not in comparison.lower()  # no JavaScript at all
    assert "http://" not in html and "https://" not in html  # self-contained: no network
    for img in re.findall(r"<img [^>]*>", html):
        assert 'src="data:image/png;base64,' in img and 'alt="' in img and 'alt=""' not in img
    md = (cards / "naive.md").read_text()
    for target in re.findall(r"\]\(([^)]+)\)", md):
        assert (cards / target).is_file()


def test_same_run_same_card_bytes_but_the_timestamp(run):
    render_cards(run, formats=("html", "md"))
    first = {p.name: p.read_bytes() for p in (run / "cards").iterdir()}
    shutil.rmtree(run / "cards")
    render_cards(run, formats=("html", "md"))
    second = {p.name: p.read_bytes() for p in (run / "cards").iterdir()}
    assert first.keys() == second.keys()
    stamp = re.compile(rb"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")
    for name in first:
        assert stamp.sub(b"", first[name]) == stamp.sub(b"", second[name]), name


def test_card_in_a_real_browser(run):
    browser = browser_or_skip()
    render_cards(run, formats=("html", "png"))
    doc = json.loads((run / "ratings.json").read_text())
    for system, slug in (("naive", "naive"), (HOSTILE, "script-alert-1-script")):
        dom = chromium(browser, "--dump-dom", (run / "cards" / f"{slug}.html").resolve().as_uri()).stdout.decode()
        parsed = Cells()
        parsed.feed(dom)
        assert parsed.ids["system-name"] == system  # rendered as text, never executed
        assert parsed.ids["overall-rating"].strip() == str(doc["overall"][system])
        mine = [r for r in doc["ratings"] if r["system"] == system]
        assert mine
        for r in mine:
            shown = r.get("display") or str(r["rating"])  # "≥ k" when inconclusive
            assert parsed.cells[(r["score"], r["perturbation"])].strip().startswith(shown)
        with Image.open(run / "cards" / f"{slug}.png") as image:
            pixels = np.asarray(image.convert("L"), dtype=float)
        assert pixels.shape[0] > 1500 and pixels.shape[1] == 1000
        assert pixels.std() > 20 and (pixels < 100).mean() > 0.01  # not blank: text and figures drawn


def test_card_command_errors(run, cli, tmp_path):
    assert cli("card", tmp_path / "nowhere")[0] == 2
    code, _, err = cli("card", run, "--system", "ghost")
    assert code == 2 and "ghost" in err
    code, _, err = cli("card", run, "--format", "pdf")
    assert code == 2 and "pdf" in err
    code, out, _ = cli("card", run, "--system", "naive", "--format", "md")
    assert code == 0 and out.strip().endswith("naive.md")


def test_slugify():
    taken: set[str] = set()
    assert slugify("../../etc/passwd", taken) == "etc-passwd"
    assert slugify("etc passwd", taken) == "etc-passwd-2"
    assert slugify("....", taken) == "system"
    assert "/" not in slugify("a/b\\c", taken) and ".." not in slugify("a..b", taken)
