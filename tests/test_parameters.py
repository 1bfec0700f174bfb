"""Parameters resolved once (issue 42 item 5): prepare() derives every parameter the stages use into one typed,
frozen object (Study.parameters); the stages read it and nothing else, and ratings.json's provenance records it."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from causalrate.config import load_config
from causalrate.parameters import RatingSettings
from causalrate.pipeline import analyze, synthetic_forecasts
from causalrate.report.outputs import ratings_document
from causalrate.report.templating import environment, level_class
from causalrate.run import RatingsDocument
from causalrate.study import prepare

NAIVE = "- {name: naive, type: naive}\n- {name: random, type: random}\n"


def _study(synthetic_study, extra: str = "", stride: int = 5):
    config, base_dir = load_config(synthetic_study(NAIVE, draws=2, stride=stride, extra=extra))
    return prepare(config, base_dir=base_dir)


def test_parameters_are_resolved_from_the_config_and_data(synthetic_study):
    """Hand-computed: n 40, d 10, stride 5 → block ⌈50 / 5⌉ = 10 windows; the naive bases from the last value."""
    study = _study(synthetic_study, extra="rating: {levels: 4}\nforecast: {timeout: 2.5}\n")
    params = study.parameters
    assert params.block_length == params.wrs_bandwidth == 10
    assert params.rating == RatingSettings(levels=4, rule="tiers", scale="both", min_coverage=0.8)
    assert params.season == study.dataset.season
    inputs, truth = study.windows.inputs, study.windows.truth
    # the study's outcome, rmax_scaled, of the last value repeated: max |error| / mean |input|, per window
    by_hand = float(np.mean(np.abs(truth - inputs[:, -1:]).max(axis=1) / np.abs(inputs).mean(axis=1)))
    assert params.naive_error == pytest.approx(by_hand, rel=1e-12)
    assert params.min_effect == pytest.approx(0.05 * by_hand, rel=1e-12)  # rigor.min_effect's default share
    smape = np.abs(truth - inputs[:, -1:]) / ((np.abs(truth) + np.abs(inputs[:, -1:])) / 2)
    assert params.naive_scores["smape"] == pytest.approx(float(smape.mean()), rel=1e-12)
    assert params.batch_timeout(8) == 20.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.block_length = 3  # type: ignore[misc]


def test_configured_block_and_the_paper_rule(synthetic_study):
    """rigor.block_length overrides the dependence run; rule: paper takes WRS's windows as independent."""
    params = _study(synthetic_study, extra="rigor: {block_length: 3}\nrating: {rule: paper}\n").parameters
    assert (params.block_length, params.wrs_bandwidth, params.rating.rule) == (3, 0, "paper")


def test_every_stage_reads_the_resolved_parameters(synthetic_study, monkeypatch):
    """The analysis, the headlines and ratings.json follow Study.parameters, not the config: a block length, WRS
    bandwidth and levels changed in the parameters alone reach the bootstrap, WRS's tests and the document."""
    import causalrate.pipeline
    import causalrate.uncertainty.rigor

    seen: dict[str, list[int]] = {"block": [], "bandwidth": []}
    rigor, pipeline = causalrate.uncertainty.rigor, causalrate.pipeline
    counts, wrs = rigor.block_counts, pipeline.wrs_scores
    monkeypatch.setattr(rigor, "block_counts", lambda *a, **kw: seen["block"].append(kw["block"]) or counts(*a, **kw))
    monkeypatch.setattr(
        pipeline, "wrs_scores", lambda *a, **kw: seen["bandwidth"].append(kw["bandwidth"]) or wrs(*a, **kw)
    )
    study = _study(synthetic_study, extra="rigor: {bootstrap_size: 20, refute: false}\nheterogeneity: {enabled: false}")
    assert study.config.rating.levels == 3 and study.parameters.block_length == 10
    changed = dataclasses.replace(
        study.parameters, rating=RatingSettings(levels=5), block_length=2, wrs_bandwidth=1, timeout=7.0
    )
    study = dataclasses.replace(study, parameters=changed)
    result = analyze(study, synthetic_forecasts(study))
    assert seen == {"block": [2], "bandwidth": [1]}
    doc = ratings_document(study, result)
    assert doc.levels == 5 and "to 5 (worst)" in doc.meaning
    assert max(r.rating for r in doc.ratings if r.rating is not None) == 5  # the worst group's position at L = 5
    assert {h.rating for heads in doc.headlines.values() for h in heads.values()} <= set(range(1, 6))
    recorded = doc.provenance.parameters
    assert recorded is not None
    assert (recorded.levels, recorded.block_length, recorded.wrs_bandwidth, recorded.timeout) == (5, 2, 1, 7.0)
    assert recorded.naive_error == pytest.approx(changed.naive_error, rel=1e-9)
    assert recorded.min_effect == pytest.approx(changed.min_effect, rel=1e-9)
    ape_rows = [r for r in doc.ratings if r.score == "ape" and r.min_effect is not None]
    assert ape_rows and all(r.min_effect == pytest.approx(changed.min_effect, rel=1e-9) for r in ape_rows)


def test_provenance_parameters_round_trip_and_older_files_read(synthetic_study, tmp_path):
    study = _study(synthetic_study, extra="rigor: {bootstrap_size: 0}\nheterogeneity: {enabled: false}")
    doc = ratings_document(study, analyze(study, synthetic_forecasts(study)))
    path = tmp_path / "ratings.json"
    path.write_text(doc.to_json(), encoding="utf-8")
    raw = json.loads(path.read_text())
    recorded = raw["provenance"]["parameters"]
    assert set(recorded) == {
        "season", "block_length", "wrs_bandwidth", "levels", "rule", "scale", "min_coverage", "naive_error",
        "min_effect", "naive_scores", "timeout",
    }  # fmt: skip
    assert recorded["levels"] == raw["levels"] and recorded["season"] == raw["provenance"]["season"]
    assert all(math.isfinite(v) for v in recorded["naive_scores"].values() if v is not None)
    assert RatingsDocument.read(path).provenance.parameters == doc.provenance.parameters
    del raw["provenance"]["parameters"]  # a run made before the section existed
    path.write_text(json.dumps(raw), encoding="utf-8")
    assert RatingsDocument.read(path).provenance.parameters is None


@pytest.mark.parametrize("rating", [None, 1, 2, 3])
def test_templates_colour_levels_with_the_one_function(rating):
    """The badge macro (every page's rating cells) and the label's reference ratings call level_class."""
    env = environment()
    badge = env.from_string('{% import "_macros.j2" as m %}{{ m.badge(rating, 3) }}').render(rating=rating)
    assert f'class="badge {level_class(rating, 3)}"' in badge
    mini = env.from_string("{{ rating | level_class(3) }}").render(rating=rating)
    assert mini == level_class(rating, 3)
