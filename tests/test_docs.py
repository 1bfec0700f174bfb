"""The user-facing documents stay true: the method document covers every registered rule, the README and the
reference page's facts hold, and the README keeps to what a user needs first."""

import json
import re
from pathlib import Path

from causalrate.causal.schemes import SCHEMES
from causalrate.forecast.metrics import METRICS
from causalrate.perturb.operators import OPERATORS
from causalrate.score.scores import SCORES
from causalrate.systems import SYSTEMS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
REFERENCE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
METHOD = (ROOT / "docs" / "method.md").read_text(encoding="utf-8")


def test_readme_links_the_project_method_document():
    assert "](docs/method.md)" in README and "../shared" not in README


def test_method_document_names_every_registered_rule():
    for registry in (OPERATORS, SCORES, SCHEMES, SYSTEMS, METRICS):
        generated = {n for n, e in registry.items() if getattr(e, "generated_for", None)}  # a data attribute's
        missing = [name for name in registry.names() if f"`{name}`" not in METHOD and name not in generated]
        assert not missing, f"docs/method.md does not describe {missing}"


def test_readme_is_in_a_newcomers_order_and_says_where_to_look():
    """What it is, install and run, what you get (the label's location), your own model, your own data, commands;
    the reference material lives in docs/, and every docs link of the README resolves."""
    headings = [line[3:] for line in README.splitlines() if line.startswith("## ")]
    assert headings[:5] == [
        "Install and run", "What you get and where to look", "Assess your own model", "Your own data", "Commands",
    ]
    assert "runs/quickstart/cards/index.html" in README
    for target in {link.split("#")[0] for link in re.findall(r"\]\((docs/[^)]+)\)", README)}:
        assert (ROOT / target).is_file(), target


def test_reference_lists_every_operator():
    section = REFERENCE.split("### Perturbations, severity grids")[1].split("A **severity grid**")[0]
    assert [name for name in OPERATORS.names() if f"`{name}`" not in section] == []


def test_reference_bias_finding_is_the_reference_runs():
    """The Method decisions paragraph on rmax_scaled quotes no per-system WRS numbers (they move whenever the
    reference is regenerated) and its qualitative finding holds in the reference run: `biased` has the largest
    bias_industry gap on P1, P2 and P3, and the bias headline rates it at the worst level."""
    doc = json.loads((ROOT / "ratings" / "quickstart" / "ratings.json").read_text())
    paragraph = " ".join(REFERENCE.split("**Quickstart outcome is `rmax_scaled`")[1].split("\n- **")[0].split())
    assert not re.search(r"\d\.\d/\d\.\d", paragraph), "per-system WRS numbers are quoted"
    for p in ("P1", "P2", "P3"):
        gap = {r["system"]: r["raw"] for r in doc["ratings"] if (r["score"], r["perturbation"]) == ("bias_industry", p)}
        assert max(gap, key=gap.get) == "biased", (p, gap)
    assert "largest gap" in paragraph and "worst level" in paragraph
    assert doc["headlines"]["biased"]["bias"]["rating"] == doc["levels"]
