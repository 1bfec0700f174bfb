"""The user-facing documents stay true: the method document covers every registered rule, the README and the
reference page's facts hold, and the README keeps to what a user needs first."""

import json
import re
from pathlib import Path

from causalrate.causal.schemes import SCHEMES
from causalrate.perturb.operators import OPERATORS
from causalrate.score.metrics import METRICS
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
        missing = [name for name in registry.names() if f"`{name}`" not in METHOD]
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


def test_reference_wrs_numbers_are_the_reference_runs():
    """The Method decisions paragraph on rmax_scaled states the reference run's wrs_industry values."""
    doc = json.loads((ROOT / "ratings" / "quickstart" / "ratings.json").read_text())
    wrs = {(r["system"], r["perturbation"]): r["raw"] for r in doc["ratings"] if r["score"] == "wrs_industry"}
    stated = {"biased": (5.2, 5.9, 6.9), "naive": (1.2, 2.6, 4.6), "arima": (0.6, 2.6, 4.6), "random": (4.6, 6.9, 6.9)}
    for system, values in stated.items():
        assert tuple(wrs[system, p] for p in ("P1", "P2", "P3")) == values, system
        assert "/".join(f"{v:g}" for v in values) in " ".join(REFERENCE.split()), system
    gap = {r["system"]: r["raw"] for r in doc["ratings"] if (r["score"], r["perturbation"]) == ("bias_industry", "P1")}
    assert f"{gap['biased']:.2f}" in REFERENCE and max(v for s, v in gap.items() if s != "biased") <= 0.12
