"""One meaning per name (issue 42 item 4): a score's headline and the rows that join it are two typed facts,
`headline` and `rows`, read by the headlines, the comparison page, the skill-ratio basis and the listing; the
deprecated `family` is still read, with a DeprecationWarning and a line on stderr."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import causalrate.pipeline  # noqa: F401 - registers every built-in score (recency's included)
from causalrate.plugins import MODULE_PREFIX
from causalrate.rate.absolute import naive_scores
from causalrate.report.comparison import _mean_robustness
from causalrate.report.estimators import facts
from causalrate.run import RatingsDocument
from causalrate.score.scores import SCORES, Score, joins_headline
from tests.conftest import write_yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def scores_as_they_were():
    """A plugin registered here leaves with its test."""
    saved, modules = dict(SCORES._entries), set(sys.modules)
    yield
    SCORES._entries = saved
    for name in set(sys.modules) - modules:
        if name.startswith(MODULE_PREFIX):
            del sys.modules[name]


def test_each_headline_is_joined_by_its_scores_on_the_rows_they_name():
    """Planted rows of built-in scores: robustness takes the APE-type rows and the failure rate on every input
    (the clean input's too), bias the WRS rows of perturbed inputs, accuracy the clean input's only; the
    confounding scores, the fragility spread and a score this version does not know join none."""
    rows = [
        ("ape", "P1"),
        ("ape_last", "P1@last"),
        ("failure_rate", "P0"),
        ("failure_rate", "P1"),
        ("smape", "P0"),
        ("smape", "P1"),
        ("wrs_industry", "P1"),
        ("bias_company", "P1"),
        ("ape_industry", "P1"),
        ("pie_industry", "P1"),
        ("fragility_spread", "P1"),
        ("from_a_newer_version", "P1"),
    ]
    frame = pd.DataFrame(rows, columns=["score", "perturbation"])
    joined = {h: [r for r, j in zip(rows, joins_headline(frame, h, control="P0"), strict=True) if j] for h in
              ("robustness", "bias", "accuracy")}  # fmt: skip
    assert joined == {
        "robustness": [("ape", "P1"), ("ape_last", "P1@last"), ("failure_rate", "P0"), ("failure_rate", "P1")],
        "bias": [("wrs_industry", "P1"), ("bias_company", "P1")],
        "accuracy": [("smape", "P0")],
    }


def _score(**facts) -> type[Score]:
    return type("Old", (Score,), {"compute": lambda self, evidence: None, "on_control": True, **facts})


@pytest.mark.parametrize(
    ("family", "headline", "rows"),
    [
        ("robustness", "robustness", "all"),
        ("bias", "bias", "perturbed"),
        ("accuracy", "accuracy", "clean"),
        ("confounding", None, None),
        ("fragility", None, None),
        ("diagnostic", None, None),
    ],
)
def test_the_deprecated_family_is_read_as_the_headline_and_rows_it_decided(family, headline, rows, caplog):
    words = f"`family = {family!r}` is deprecated and read as headline = {headline!r}, rows = {rows!r}"
    with pytest.warns(DeprecationWarning, match=re.escape(words)):
        old = _score(family=family)
    assert (old.headline, old.rows) == (headline, rows)
    assert words in caplog.text and "Old in" in caplog.text  # the line on stderr names the class and its file
    SCORES.validate("old_score", old)  # and it keeps the contract


def test_a_fact_declared_beside_the_deprecated_family_wins():
    with pytest.warns(DeprecationWarning, match="read as headline = 'accuracy', rows = 'all'"):
        old = _score(family="accuracy", rows="all")
    assert (old.headline, old.rows) == ("accuracy", "all")


def test_a_score_with_the_new_facts_gets_no_deprecation_note(recwarn, caplog):
    new = _score(headline="accuracy", rows="clean")
    SCORES.validate("new_score", new)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)] and "deprecated" not in caplog.text


PLUGIN = """
from causalrate.score.scores import SCORES, MetricScore


@SCORES.register("mae_old")
class MaeOld(MetricScore):
    family = "accuracy"
    metric = "mae"


@SCORES.register("mae_new")
class MaeNew(MetricScore):
    headline = "accuracy"
    rows = "clean"
    metric = "mae"
"""


def test_a_plugin_with_the_old_word_is_listed_like_one_with_the_new_and_warned_about_on_stderr(cli, tmp_path):
    (tmp_path / "plugin.py").write_text(PLUGIN)
    study = write_yaml(
        tmp_path / "s.yaml",
        "name: old\nplugins: [plugin.py]\ndata: {source: embedded, series: [AAPL]}\n"
        "windows: {input_length: 20, horizon: 5, stride: 5}\nsystems: [{name: naive, type: naive}]\n",
    )
    code, out, err = cli("scores", "--config", study)
    assert code == 0, err
    note = [line for line in err.splitlines() if "deprecated" in line]
    assert len(note) == 1 and note[0].startswith("causalrate: warning: score class MaeOld in "), err
    assert str(tmp_path / "plugin.py") in note[0] and "write those facts instead" in note[0]
    line = {row.split()[0]: row for row in out.splitlines()}
    assert line["mae_old"].split()[1] == "accuracy" and "headline: accuracy, its clean-input rows" in line["mae_old"]
    assert line["mae_old"].replace("mae_old", "mae_new") == line["mae_new"]
    assert "headline: robustness, all its rows" in line["failure_rate"]  # its clean-input rate too
    assert "headline: bias, its perturbed-input rows" in line["wrs_industry"]
    assert line["ape_industry"].split()[1] == "—" and "in no headline" in line["ape_industry"]


def test_the_comparison_pages_mean_robustness_averages_only_the_robustness_rows():
    """The reference quickstart's ratings: the mean over the rows of the robustness scores (an independent list,
    METHOD §6.5: the APE-type scores and the failure rate, its clean-input rate included), not over every score
    that is not an accuracy score (bias, confounding and fragility rows were counted before)."""
    doc = RatingsDocument.read(ROOT / "ratings" / "quickstart" / "ratings.json")
    robustness = {"ape", "ape_last", "recency", "ape_worst", "ape_auc", "failure_rate"}
    frame = pd.DataFrame([(r.system, r.score, r.rating) for r in doc.ratings], columns=["system", "score", "rating"])
    expected = frame[frame["score"].isin(robustness)].groupby("system")["rating"].mean()
    pd.testing.assert_series_equal(_mean_robustness(doc), expected, check_names=False)
    others = frame[frame["score"].map(lambda s: facts(s).headline != "accuracy" and s not in robustness)]
    assert set(others["score"]) >= {"wrs_industry", "ape_industry", "fragility_spread"}  # left out now


def test_the_skill_ratio_basis_is_every_score_on_the_naive_ratio_basis():
    """naive_scores: the naive reference's mean metric on the clean windows for each score whose scale or margin
    is on the naive_ratio basis (smape, mase, crps, sign_accuracy, wql) — none for the others."""
    rng = np.random.default_rng(0)
    inputs = 100 + np.cumsum(rng.standard_normal((4, 30)), axis=1)
    truth = inputs[:, -1:] + np.cumsum(rng.standard_normal((4, 5)), axis=1)
    found = naive_scores(inputs, truth, season=1)
    assert set(found) == {"smape", "mase", "crps", "wql", "sign_accuracy"}
    last = inputs[:, -1:]
    assert found["smape"] == pytest.approx(np.mean(2 * np.abs(truth - last) / (np.abs(truth) + np.abs(last))))
    assert found["sign_accuracy"] == pytest.approx(0.5)  # a flat forecast calls no direction: ½ per step
    scale = np.mean(np.abs(np.diff(inputs, axis=1)), axis=1)  # season 1: the mean day-to-day change
    assert found["mase"] == pytest.approx(np.mean(np.mean(np.abs(truth - last), axis=1) / scale))


def test_the_built_in_scores_register_in_their_tables_order():
    """score/scores.py is split by responsibility; importing it still registers the built-ins in the order every
    table and ratings.json lists them (bias, effects, confounding, window means, then recency's), before any
    score registered later (a plugin's, a data attribute's)."""
    from causalrate.causal.schemes import SCHEMES

    schemes = [  # the built-in schemes: not one generated for an earlier test's data attribute (region)
        name
        for name, s in SCHEMES.items()
        if s.rated and s.__module__.startswith("causalrate.") and getattr(s, "generated_for", None) is None
    ]
    expected = [
        *("wrs_industry", "wrs_domain", "wrs_company", "wrs_volatility", "bias_industry", "bias_domain"),
        *("bias_company", "ape", "ape_auc", "fragility_spread"),
        *(f"ape_{s}" for s in schemes),
        *(f"pie_{s}" for s in schemes),
        *("smape", "mase", "crps", "wql", "coverage_error", "sign_accuracy", "failure_rate"),
        *("recency", "ape_worst", "ape_last"),
    ]
    assert SCORES.names()[: len(expected)] == expected
    assert schemes == ["industry", "company", "domain"]
