"""The listing commands: every registry's built-ins from their own facts, and with --config a study's plugins."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from causalrate.causal.schemes import SCHEMES
from causalrate.cli import parser
from causalrate.data.characteristics import CHARACTERISTICS
from causalrate.forecast.metrics import METRICS
from causalrate.listings import LISTINGS
from causalrate.perturb.operators import OPERATORS
from causalrate.plugins import MODULE_PREFIX
from causalrate.score.scores import SCORES
from causalrate.systems import SYSTEMS
from tests.conftest import write_yaml

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_STUDY = ROOT / "examples" / "plugin" / "study.yaml"
# what examples/plugin/plugin.py registers, per listing (its scheme's generated scores are the study's too)
PLUGIN = {
    "perturbations": ["swap"],
    "systems": ["drift"],
    "scores": ["mae", "medae", "ape_calm_first", "pie_calm_first"],
    "metrics": [],
}
REGISTRIES = {"perturbations": OPERATORS, "systems": SYSTEMS, "scores": SCORES, "metrics": METRICS}


@pytest.fixture(autouse=True)
def registries_as_they_were():
    """The study's plugins are imported here: afterwards the registries and modules are as before, so other
    tests (the method document's list of every registered rule, the plugin example's run) see what they saw."""
    registries = (OPERATORS, SYSTEMS, SCORES, METRICS, SCHEMES, CHARACTERISTICS)
    saved = [dict(registry._entries) for registry in registries]
    modules = set(sys.modules)
    yield
    for registry, entries in zip(registries, saved, strict=True):
        registry._entries = entries
    for name in set(sys.modules) - modules:
        if name.startswith(MODULE_PREFIX):
            del sys.modules[name]


def names(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()]


@pytest.mark.parametrize("command", list(LISTINGS))
def test_a_listing_shows_the_built_ins_without_a_study_and_adds_its_plugins_with_one(cli, command):
    """Checked without, with and again without --config: a plugin imported in this process is still not listed
    when no study is given, and the study's entries come after the built-ins, each marked as the study's."""
    code, before, err = cli(command)
    assert code == 0 and err == "", err
    built_in = names(before)
    assert built_in and not set(built_in) & set(PLUGIN[command]), built_in
    code, out, err = cli(command, "--config", PLUGIN_STUDY)
    assert code == 0 and err == "", err
    listed = names(out)
    assert listed[: len(built_in)] == built_in and listed[len(built_in) :] == PLUGIN[command]
    for line in out.splitlines()[len(built_in) :]:
        assert line.endswith("  [study: plugin.py]"), line
    assert all(name in REGISTRIES[command] for name in listed)
    assert cli(command)[1] == before  # the plugin is imported now, and still not listed without the study
    columns = {len(line) - len(line.split(maxsplit=1)[1]) for line in out.splitlines()}
    assert len(columns) == 1, f"{command}: descriptions start at columns {columns}"


def test_scores_and_metrics_say_what_each_measures_from_its_own_facts(cli):
    out = cli("scores", "--config", PLUGIN_STUDY)[1]
    line = {line.split()[0]: line for line in out.splitlines()}
    for name in names(out):
        cls = SCORES.get(name)
        assert cls.description in line[name] and (cls.headline or "—") == line[name].split()[1], line[name]
    assert "headline: robustness" in line["ape"] and "interval: bootstrap over windows" in line["ape"]
    assert "headline: accuracy, its clean-input rows" in line["mae"] and "in no headline" in line["ape_calm_first"]
    assert "in no headline" in line["pie_industry"] and "interval: spread over draws" in line["pie_industry"]
    assert "in no headline" in line["fragility_spread"] and "interval: none" in line["fragility_spread"]
    assert "higher is better" in line["sign_accuracy"] and "per-forecast smape" in line["smape"]
    assert "scheme: calm_first" in line["ape_calm_first"]
    metrics = {line.split()[0]: line for line in cli("metrics")[1].splitlines()}
    assert set(metrics) == set(METRICS.names())
    for name, metric in METRICS.items():
        assert metric.description in metrics[name]
        assert ("lower is better" if metric.lower_is_better else "higher is better") in metrics[name]
    assert "also given: season" in metrics["mase"] and "reads the forecast samples" in metrics["crps"]


def test_systems_with_a_study_lists_its_python_systems(cli, tmp_path):
    (tmp_path / "model.py").write_text("def predict(inputs, horizon):\n    return inputs[:, -1:].repeat(horizon, 1)\n")
    study = write_yaml(
        tmp_path / "s.yaml",
        "name: own\ndata: {source: embedded, series: [AAPL]}\nwindows: {input_length: 20, horizon: 5, stride: 5}\n"
        "systems:\n  - {name: naive, type: naive}\n  - {name: mine, type: python, function: model.py:predict}\n",
    )
    code, out, err = cli("systems", "--config", study)
    assert code == 0, err
    name, rest = out.splitlines()[-1].split(maxsplit=1)
    assert (name, rest) == ("mine", f"the study's function model.py:predict  [type: python]  [study: {study}]")
    assert "mine" not in cli("systems")[1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "no such config file"),
        ("name: x\nsystems: [\n  - a: b\n", "not valid YAML (line"),
        ("- just\n- a list\n", "expected a mapping with 'systems:'"),
        ("name: x\nplugins: [missing.py]\nsystems: [{name: n, type: naive}]\n", "plugins: no file"),
    ],
)
def test_a_bad_config_is_exit_2_naming_the_file(cli, tmp_path, text, expected):
    config = tmp_path / "s.yaml"
    if text is not None:
        config.write_text(text)
    for command in LISTINGS:
        code, out, err = cli(command, "--config", config)
        assert code == 2 and out == "" and "Traceback" not in err, err
        assert str(config) in err and expected in err, err


def test_the_readme_lists_every_command_and_the_listings_options():
    """The README's Commands block names every command of the parser, and --config on each listing."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Commands")[1].split("```")[1]
    commands = next(a for a in parser()._actions if a.dest == "command").choices
    assert [c for c in commands if not re.search(rf"^causalrate {c}\b", block, re.M)] == []
    for command in LISTINGS:
        assert re.search(rf"^causalrate {command} \[--config STUDY\.yaml\]", block, re.M), command
