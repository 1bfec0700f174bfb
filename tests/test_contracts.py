"""Plugin contracts (issue 32, item 1): one harness over every registered entry, built-ins included, and each
plugin mistake that used to change a rating silently now stops the run with exit 2, naming the plugin."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import causalrate.pipeline  # noqa: F401 - registers every built-in score (recency's included)
from causalrate.causal.schemes import SCHEMES
from causalrate.contracts import ContractError, guarded
from causalrate.data.characteristics import CHARACTERISTICS
from causalrate.forecast.metrics import METRICS, Metric
from causalrate.perturb.operators import OPERATORS, Operator, checked_output, reach
from causalrate.rate.headlines import HEADLINES
from causalrate.score.scores import HEADLINE_NAMES, SCORES, MetricScore, Score, estimator_text
from causalrate.systems import SYSTEMS

ROOT = Path(__file__).resolve().parents[1]
REGISTRIES = {
    "scores": SCORES,
    "operators": OPERATORS,
    "systems": SYSTEMS,
    "schemes": SCHEMES,
    "metrics": METRICS,
    "characteristics": CHARACTERISTICS,
}
ENTRIES = [
    pytest.param(registry, name, id=f"{kind}:{name}") for kind, registry in REGISTRIES.items() for name in registry
]


# --- the harness: every registered entry keeps its registry's contract -------------------------------------


@pytest.mark.parametrize(("registry", "name"), ENTRIES)
def test_every_registered_entry_keeps_its_contract(registry, name):
    registry.validate(name, registry.get(name))  # the facts' types and the registry's consistency check


@pytest.mark.parametrize("registry", list(REGISTRIES.values()), ids=list(REGISTRIES))
def test_every_registry_declares_a_contract(registry):
    assert registry.names()
    assert registry.facts or registry is CHARACTERISTICS  # a characteristic is a function: its signature is checked
    assert registry._checks


def test_headlines_are_exactly_the_headline_names():
    assert tuple(HEADLINES) == HEADLINE_NAMES
    assert Score.headline is None and Score.rows is None  # a score that declares no headline joins none


def _operator_input(rows: int = 6, n: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    values = 100 + np.cumsum(rng.standard_normal((rows, n)), axis=1)
    mask = np.zeros((rows, n), dtype=bool)
    mask[np.arange(rows), rng.integers(1, n, rows)] = True
    return values, mask, np.arange(rows, dtype=np.uint64)


@pytest.mark.parametrize("name", [n for n in OPERATORS if n != "combined"])
def test_every_operator_output_keeps_its_contract(name):
    """Each operator, run on a batch, returns the input's shape, floats, and changes no point outside its reach."""
    operator = OPERATORS.get(name)()
    values, mask, seeds = _operator_input()
    params = dict(operator.params)
    if operator.calibrated:
        params["calibration"] = np.full(len(values), 0.1)
    out = operator.apply(values.copy(), mask, seeds=seeds, **params)
    checked_output(operator, values, out, reach(operator, mask))


def test_combined_checks_each_part():
    values, mask, seeds = _operator_input()
    halve, shift = OPERATORS.get("halve")(), OPERATORS.get("level_shift")()
    parts = [(halve, mask, {}), (shift, np.roll(mask, 3, axis=1), {"c": 1.0})]
    out = OPERATORS.get("combined")().apply(values.copy(), mask, seeds=seeds, parts=parts)
    allowed = reach(halve, mask) | reach(shift, parts[1][1])
    checked_output(OPERATORS.get("combined")(), values, out, allowed)


# --- registration: a wrong fact is refused before the entry is stored ---------------------------------------


def _score(**facts):
    return type("Wrong", (Score,), {"compute": lambda self, evidence: None, **facts})


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        ({"headline": "robustnes"}, ["headline = 'robustnes'", "'robustness', 'bias', 'accuracy' or None"]),
        ({"headline": "bias"}, ["headline = 'bias' needs `rows`", "'clean', 'perturbed' or 'all'"]),
        ({"headline": "bias", "rows": "clean"}, ["rows = 'clean'", "on_control is False"]),
        ({"headline": "bias", "rows": "every"}, ["rows = 'every'", "'clean', 'perturbed', 'all' or None"]),
        ({"family": "robustnes"}, ["family = 'robustnes'", "'robustness'", "'diagnostic'", "deprecated"]),
        ({"family": "bias", "headline": "accuracy"}, ["family = 'bias' (deprecated)", "disagree"]),
        ({"resampling": "window"}, ["resampling = 'window'", "'windows', 'draws', 'none'"]),
        ({"replicates": "windows"}, ["`replicates` is a method", "`resampling`"]),
        ({"resampling": "windows"}, ["needs a `metric`, window_values(evidence) or replicates()"]),
        ({"coverage": "all"}, ["coverage = 'all'", "'perturbed', 'paired'"]),
        ({"radar": 1}, ["radar = 1", "a bool"]),
        ({"resampling": "draws"}, ["needs `scheme`"]),
    ],
)
def test_a_wrong_score_fact_is_refused_naming_the_score(facts, words):
    with pytest.raises(ContractError) as raised:
        SCORES.register("contract_test_score")(_score(**facts))
    message = str(raised.value)
    assert "score 'contract_test_score'" in message and "Wrong in" in message
    for word in words:
        assert word in message
    assert "contract_test_score" not in SCORES


def test_a_score_without_estimator_text_is_described_by_its_facts():
    """The report names what each number is: a score's `estimator`, else the mean of its metric, else its
    description — never its label twice ("MAE (MAE)")."""
    assert estimator_text(type("M", (MetricScore,), {"metric": "mae", "label": "MAE"})) == "mean MAE over forecasts"
    assert estimator_text(_score(label="Spread", description="how far apart")) == "how far apart"
    assert estimator_text(SCORES.get("pie_industry"), 20) == "mean over 20 draws of PIE%"
    assert estimator_text(SCORES.get("smape"), 20) == "mean SMAPE over forecasts"  # only draws scores count draws


def test_wrong_operator_and_system_facts_are_refused():
    bad_kind = type("Op", (Operator,), {"kind": "semantics", "apply": lambda self, v, m, **k: v})
    with pytest.raises(ContractError, match=r"kind = 'semantics'.*'semantic', 'syntactic', 'control'"):
        OPERATORS.register("contract_test_op")(bad_kind)
    unnamed = type("Op", (Operator,), {"description": "times {factr:g}", "apply": lambda self, v, m, **k: v})
    with pytest.raises(ContractError, match=r"description names \['factr'\]"):
        OPERATORS.register("contract_test_op")(unnamed)
    from causalrate.systems import System

    bad_output = type("Sys", (System,), {"output": "quantile", "forecast": lambda self, batch: None})
    with pytest.raises(ContractError, match=r"output = 'quantile'.*'point', 'quantiles', 'samples'"):
        SYSTEMS.register("contract_test_system")(bad_output)
    nan_string = type("Sys", (System,), {"accepts_nan": "no", "forecast": lambda self, batch: None})
    with pytest.raises(ContractError, match=r"accepts_nan = 'no'.*a bool"):
        SYSTEMS.register("contract_test_system")(nan_string)
    assert "contract_test_op" not in OPERATORS and "contract_test_system" not in SYSTEMS


def test_operator_output_check_names_what_is_wrong():
    values, mask, _ = _operator_input()
    halve = OPERATORS.get("halve")()
    with pytest.raises(ContractError, match=r"'halve'.*shape \(6, 29\) for input of shape \(6, 30\)"):
        checked_output(halve, values, values[:, 1:], mask)
    with pytest.raises(ContractError, match=r"'halve'.*dtype int64"):
        checked_output(halve, values, values.astype(np.int64), mask)
    with pytest.raises(ContractError, match=r"'halve'.*changed points it may not touch"):
        checked_output(halve, values, values / 2, mask)
    with_nan = values.copy()
    with_nan[0, 0] = np.nan  # missing input: NaN stays NaN, and that is no change
    checked_output(halve, with_nan, np.where(mask, with_nan / 2, with_nan), mask)


# --- through a study's plugins: each mistake stops the run with exit 2, naming the plugin -----------------

STUDY = """\
name: contracts
seed: 0
plugins: [plugin.py]
data:
  source: embedded
  series: [AAPL, JPM]
  start: 2022-01-01
  end: 2022-12-31
windows: {{input_length: 40, horizon: 10, stride: 10}}
perturbations:
  - {{id: P0, operator: none}}
  - {{id: P1, operator: {operator}}}
outcome: rmax_scaled
systems:
  - {{name: naive, type: naive}}
  - {{name: seasonal, type: seasonal_naive}}
causal:
  schemes: [{schemes}]
  draws: 4
rigor: {{refute: false}}
rating:
  levels: 2
"""

HEADER = """\
import numpy as np
import pandas as pd
from causalrate.perturb.operators import OPERATORS, Operator
from causalrate.score.scores import SCORES, MetricScore, Score
from causalrate.causal.schemes import SCHEMES, Scheme
from causalrate.forecast.metrics import metric
"""


def _assess(
    tmp_path: Path, plugin: str, *, operator: str = "drop_to_zero", schemes: str = "uniform"
) -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "plugin.py").write_text(HEADER + textwrap.dedent(plugin))
    (tmp_path / "study.yaml").write_text(STUDY.format(operator=operator, schemes=schemes))
    command = ["assess", str(tmp_path / "study.yaml"), "--no-cards", "--out", str(tmp_path / "run")]
    return subprocess.run(
        [sys.executable, "-m", "causalrate", *command],
        cwd=ROOT,
        env={**os.environ, "CAUSALRATE_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=240,
    )


SCORE_PLUGIN = """
@SCORES.register("{name}")
class {cls}(Score):
    headline = "robustness"
    rows = "perturbed"
{facts}
    def compute(self, evidence):
        first = evidence.effects.drop_duplicates(["system", "perturbation"])
        frame = first[["system", "perturbation"]].assign(raw=first["ape_true"].abs().to_numpy())
        {frame}
"""

OPERATOR_PLUGIN = """
@OPERATORS.register("{name}")
class {cls}(Operator):
    def apply(self, values, mask, *, seeds, **params):
        {body}
"""

MISTAKES = {
    "bad headline string": (
        SCORE_PLUGIN.format(
            name="typo_headline", cls="TypoHeadline", facts='    headline = "robustnes"', frame="return frame"
        ),
        "drop_to_zero",
        ["score 'typo_headline'", "TypoHeadline", "headline = 'robustnes'", "'robustness'"],
    ),
    "bad resampling string": (
        SCORE_PLUGIN.format(
            name="typo_resampling", cls="TypoRes", facts='    resampling = "window"', frame="return frame"
        ),
        "drop_to_zero",
        ["score 'typo_resampling'", "TypoRes", "resampling = 'window'", "'windows', 'draws', 'none'"],
    ),
    "score frame with value": (
        SCORE_PLUGIN.format(
            name="value_frame", cls="ValueFrame", facts="", frame="return frame.rename(columns={'raw': 'value'})"
        ),
        "drop_to_zero",
        ["score 'value_frame'", "ValueFrame", "missing ['raw']", "unknown ['value']"],
    ),
    "score frame with duplicated rows": (
        SCORE_PLUGIN.format(name="twice", cls="Twice", facts="", frame="return pd.concat([frame, frame])"),
        "drop_to_zero",
        ["score 'twice'", "Twice", "duplicated row(s)", "one row per (system, perturbation)"],
    ),
    "operator wrong shape": (
        OPERATOR_PLUGIN.format(name="short", cls="Short", body="return values[:, :-1]"),
        "short",
        ["perturbation operator 'short'", "Short", "shape", "expected the input's shape"],
    ),
    "operator touching unmasked points": (
        OPERATOR_PLUGIN.format(name="everywhere", cls="Everywhere", body="return values * 1.5"),
        "everywhere",
        ["perturbation operator 'everywhere'", "Everywhere", "changed points it may not touch", "touches = 'mask'"],
    ),
}


SCHEME_PLUGIN = """
@SCHEMES.register("{name}")
class {cls}(Scheme):
    rated = False
    {body}
"""

# issue 42: the mistakes that changed ratings silently or ended in a traceback; each now stops before forecasting
LATER_MISTAKES = {
    "score returning NaN raws": (
        SCORE_PLUGIN.format(name="nan_raw", cls="NanRaw", facts="", frame="return frame.assign(raw=np.nan)"),
        "drop_to_zero",
        ["score 'nan_raw'", "NanRaw", "non-finite raw value(s)", "NaN with a `note`"],
    ),
    "score returning inf raws": (
        SCORE_PLUGIN.format(name="inf_raw", cls="InfRaw", facts="", frame="return frame.assign(raw=np.inf)"),
        "drop_to_zero",
        ["score 'inf_raw'", "InfRaw", "non-finite raw value(s), e.g. inf"],
    ),
    "MetricScore subclass declaring no headline": (
        """
        @SCORES.register("mae_again")
        class MaeAgain(MetricScore):
            metric = "mae"
        """,
        "drop_to_zero",
        ["score 'mae_again'", "MaeAgain", "inherits headline = 'accuracy'", "declaring it"],
    ),
    "metric typo": (
        """
        @SCORES.register("typo_metric")
        class TypoMetric(MetricScore):
            headline = "accuracy"
            metric = "maee"
        """,
        "drop_to_zero",
        ["score 'typo_metric'", "TypoMetric", "metric = 'maee' is no registered metric", "'mae'"],
    ),
    "higher-is-better metric rated as lower-is-better": (
        """
        @SCORES.register("sign_backwards")
        class SignBackwards(MetricScore):
            headline = "accuracy"
            metric = "sign_accuracy"
        """,
        "drop_to_zero",
        ["score 'sign_backwards'", "SignBackwards", "higher_is_better = False", "higher-is-better"],
    ),
    "exception in compute": (
        SCORE_PLUGIN.format(name="crash", cls="Crash", facts="", frame="return 1 / 0"),
        "drop_to_zero",
        ["score 'crash'", "Crash", "compute(evidence) raised ZeroDivisionError", "plugin.py:"],
    ),
    "exception in replicates": (
        SCORE_PLUGIN.format(name="bad_reps", cls="BadReps", facts='    resampling = "windows"', frame="return frame")
        + "\n    def replicates(self, evidence, resampler):\n        raise RuntimeError('no replicates')\n",
        "drop_to_zero",
        ["score 'bad_reps'", "BadReps", "replicates(evidence, resampler) raised RuntimeError: no replicates"],
    ),
    "operator widening its mask in place": (
        OPERATOR_PLUGIN.format(name="widen", cls="Widen", body="mask[:, :5] = True; values[mask] = 0.0; return values"),
        "widen",
        ["perturbation operator 'widen'", "Widen", "apply() raised ValueError", "read-only"],
    ),
    "exception in an operator": (
        OPERATOR_PLUGIN.format(name="boom", cls="Boom", body="raise KeyError('boom')"),
        "boom",
        ["perturbation operator 'boom'", "Boom", "apply() raised KeyError", "plugin.py:"],
    ),
    "calibrate changing the series in place": (
        """
        @OPERATORS.register("mutating")
        class Mutating(Operator):
            calibrated = True
            def calibrate(self, series, **params):
                series *= 2.0
                return 1.0
            def apply(self, values, mask, *, seeds, calibration, **params):
                return np.where(mask, values + calibration[:, None], values)
        """,
        "mutating",
        ["perturbation operator 'mutating'", "Mutating", "calibrate() raised ValueError", "read-only"],
    ),
    "exception in a metric": (
        """
        @metric("exploding", "raises")
        def exploding(truth, forecast, clean_input):
            raise ArithmeticError("overflow in my metric")
        """,
        "drop_to_zero",
        ["metric 'exploding'", "exploding", "ArithmeticError: overflow in my metric"],
    ),
    "scheme probability above 1": (
        SCHEME_PLUGIN.format(
            name="bad_probs",
            cls="BadProbs",
            body="def probabilities(self, table, *, high, low):\n        return np.full(len(table), 1.7)",
        ),
        "drop_to_zero",
        ["assignment scheme 'bad_probs'", "BadProbs", "outside [0, 1], e.g. 1.7"],
    ),
    "scheme probabilities of the wrong length": (
        SCHEME_PLUGIN.format(
            name="short_probs",
            cls="ShortProbs",
            body="def probabilities(self, table, *, high, low):\n        return np.full(3, 0.5)",
        ),
        "drop_to_zero",
        ["assignment scheme 'short_probs'", "ShortProbs", "expected"],
    ),
    "scheme draw not boolean": (
        SCHEME_PLUGIN.format(
            name="float_draw",
            cls="FloatDraw",
            body="def draw(self, table, *, high, low, rng):\n        return rng.random(len(table))",
        ),
        "drop_to_zero",
        ["assignment scheme 'float_draw'", "FloatDraw", "expected", "bools"],
    ),
    "re-registering a built-in name": (
        """
        from causalrate.systems import SYSTEMS, System

        @SYSTEMS.register("naive")
        class MyNaive(System):
            def forecast(self, batch):
                return None
        """,
        "drop_to_zero",
        ["system type 'naive'", "MyNaive", "already registered"],
    ),
    "scheme perturbing every window": (  # sweep 2: listed as "the run has no 'always' scheme" although it was
        SCHEME_PLUGIN.format(
            name="always",
            cls="Always",
            body="def probabilities(self, table, *, high, low):\n        return np.ones(len(table))",
        ),
        "drop_to_zero",
        ["assignment scheme 'always'", "Always", "returned 1 for every window", "perturbs every window"],
    ),
}
SCHEMES_OF = {
    "always": "uniform, always",
    "bad_probs": "uniform, bad_probs",
    "short_probs": "uniform, short_probs",
    "float_draw": "float_draw",
}


@pytest.mark.parametrize("mistake", list(LATER_MISTAKES))
def test_a_later_plugin_mistake_stops_the_run_before_forecasting(tmp_path, mistake):
    plugin, operator, words = LATER_MISTAKES[mistake]
    scheme = next((s for name, s in SCHEMES_OF.items() if f'"{name}"' in plugin), "uniform")
    done = _assess(tmp_path, plugin, operator=operator, schemes=scheme)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert str(tmp_path / "plugin.py") in done.stderr
    assert not (tmp_path / "run" / "forecasts.sqlite").exists()  # stopped before the run's store was made


def test_watched_stops_a_plugin_even_inside_a_built_in_it_calls_and_never_a_built_in_alone(caplog):
    """The limit is the plugin's: hit while the plugin's score runs a built-in metric, the plugin is named; a
    built-in that runs long on its own (a large study's analysis) is neither noted nor stopped."""
    import time

    from causalrate.contracts import watched

    class SlowScore:  # defined here, outside causalrate: a plugin's
        pass

    mae = METRICS.get("mae")
    stopped = r"score 'slow' \(.*SlowScore.*\): compute\(evidence\) ran past 0.4 s in"
    with (
        pytest.raises(ContractError, match=stopped),
        watched("check", limit=0.4, every=0.1),
        guarded("score", "slow", SlowScore, "compute(evidence)"),
        guarded("metric", "mae", mae, "computing it"),
    ):
        while True:
            pass
    assert "score 'slow'" in caplog.text and "compute(evidence) has run for" in caplog.text
    caplog.clear()
    with watched("check", limit=0.2, every=0.1), guarded("metric", "mae", mae, "computing it"):
        time.sleep(0.5)  # a built-in's time: never stopped, never noted
    assert caplog.text == ""


def test_a_plugin_that_hangs_in_the_pre_forecast_check_is_named_while_it_runs_then_stopped(tmp_path):
    """A plugin score's compute that never returns hung the run in silence before any forecast: every
    PREFLIGHT_NOTE seconds it is named on stderr, and at PREFLIGHT_LIMIT it is stopped, exit 2 naming it."""
    plugin = SCORE_PLUGIN.format(name="forever", cls="Forever", facts="", frame="while True:\n            pass")
    (tmp_path / "plugin.py").write_text(HEADER + textwrap.dedent(plugin))
    (tmp_path / "study.yaml").write_text(STUDY.format(operator="drop_to_zero", schemes="uniform"))
    command = ["assess", str(tmp_path / "study.yaml"), "--no-cards", "--out", str(tmp_path / "run")]
    shortened = (  # the limits of a test: 0.5 s between notes, stopped at 2 s (300 s in use)
        "import sys, causalrate.pipeline as p; from causalrate.cli import main; "
        f"p.PREFLIGHT_LIMIT, p.PREFLIGHT_NOTE = 2.0, 0.5; sys.exit(main({command!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", shortened],
        cwd=ROOT,
        env={**os.environ, "CAUSALRATE_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    note = "pre-forecast check: score 'forever' (Forever in " + str(tmp_path / "plugin.py")
    assert note in done.stderr and "compute(evidence) has run for 1 s (stopped at 2 s)" in done.stderr, done.stderr
    assert "score 'forever' (Forever in" in done.stderr.splitlines()[-1]
    assert "compute(evidence) ran past 2 s in the pre-forecast check" in done.stderr.splitlines()[-1], done.stderr
    assert not (tmp_path / "run" / "forecasts.sqlite").exists()


def test_what_a_plugin_prints_goes_to_stderr_leaving_stdout_to_the_command(tmp_path):
    """A plugin printing at import and in its compute: its lines were mixed into stdout, which scripts read
    (`path=$(causalrate export RUN)`); they go to stderr, and the ratings are made as without them."""
    printing = 'print("plugin imported")\n' + SCORE_PLUGIN.format(
        name="chatty", cls="Chatty", facts="", frame='print("computing chatty")\n        return frame'
    )
    done = _assess(tmp_path, printing)
    assert done.returncode == 0, done.stderr
    assert "plugin imported" in done.stderr and "computing chatty" in done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"wrote {tmp_path / 'run'}/ratings.json, scores.csv, report.md, forecasts.sqlite in "), line
    exported = subprocess.run(
        [sys.executable, "-m", "causalrate", "export", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True
    )
    assert exported.returncode == 0 and exported.stdout == f"{tmp_path / 'run' / 'forecasts.parquet'}\n", exported
    assert "plugin imported" in exported.stderr


def test_a_noted_nan_is_undefined_and_built_in_rows_are_unchanged(tmp_path):
    plugin = SCORE_PLUGIN.format(
        name="noted", cls="Noted", facts="", frame="return frame.assign(raw=np.nan, note='undefined: no data')"
    )
    done = _assess(tmp_path / "with", plugin)
    assert done.returncode == 0, done.stderr
    baseline = _assess(tmp_path / "without", "")
    assert baseline.returncode == 0, baseline.stderr
    rows = {
        run: json.loads((tmp_path / run / "run" / "ratings.json").read_text())["ratings"] for run in ("with", "without")
    }
    noted = [r for r in rows["with"] if r["score"] == "noted"]
    assert noted and all(r["note"] == "undefined: no data" for r in noted)
    assert [r for r in rows["with"] if r["score"] != "noted"] == rows["without"]


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_plugin_mistake_stops_the_run_naming_the_plugin(tmp_path, mistake):
    plugin, operator, words = MISTAKES[mistake]
    done = _assess(tmp_path, plugin, operator=operator)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert str(tmp_path / "plugin.py") in done.stderr  # the file the class is in


def test_a_plugin_score_without_a_headline_joins_none(tmp_path):
    plugin = """
    @SCORES.register("spread_diag")
    class SpreadDiagnostic(Score):
        def compute(self, evidence):  # every row far worse for naive: in a headline it would set naive's
            first = evidence.effects.drop_duplicates(["system", "perturbation"])
            raw = np.where(first["system"] == "naive", 1e6, 0.0)
            return first[["system", "perturbation"]].assign(raw=raw)
    """
    done = _assess(tmp_path, plugin)
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert {r["score"] for r in doc["ratings"]} >= {"spread_diag"}  # rated and shown
    for system, headlines in doc["headlines"].items():
        for name, headline in headlines.items():
            assert "spread_diag" not in headline["scores"], (system, name)


def test_a_score_frame_for_an_unknown_perturbation_is_refused():
    from causalrate.score.scores import Evidence, check_frame

    forecasts = pd.DataFrame({"system": ["a", "a"], "perturbation": ["P0", "P1"]})
    evidence = Evidence(
        forecasts=forecasts, wrs=pd.DataFrame(), effects=pd.DataFrame(), control="P0", severity={"P1": ("G", 0.5)}
    )
    ok = pd.DataFrame({"system": ["a", "a"], "perturbation": ["P1", "G"], "raw": [1.0, 2.0]})
    check_frame("ape", SCORES.get("ape"), ok, evidence)  # a severity grid's id is a known row
    with pytest.raises(ContractError, match=r"unknown perturbation\(s\) \['P9'\]"):
        check_frame("ape", SCORES.get("ape"), ok.assign(perturbation=["P1", "P9"]), evidence)
    with pytest.raises(ContractError, match=r"unknown system\(s\) \['b'\]"):
        check_frame("ape", SCORES.get("ape"), ok.assign(system=["a", "b"]), evidence)
    with pytest.raises(ContractError, match=r"raw values of dtype"):
        check_frame("ape", SCORES.get("ape"), ok.assign(raw=["1", "2"]), evidence)
    with pytest.raises(ContractError, match=r"returned a list"):
        check_frame("ape", SCORES.get("ape"), [], evidence)


def test_a_built_in_nan_without_a_note_means_failed_forecasts_and_says_so():
    """Decided (issue 42): a built-in's NaN without a note means the forecasts the score needs failed (a plugin's is
    refused by check_frame), so it is insufficient, rated worst, and its note says that, also at full coverage
    (it read "could not be computed"); a structural reason is a note, i.e. undefined (middle level, "—")."""
    from causalrate.rate.ratings import RatingSettings, rate_scores

    def rows(note: list[str | None]) -> pd.DataFrame:
        return pd.DataFrame(
            {"perturbation": "P1", "score": "recency", "system": ["a", "b", "c"], "raw": [0.1, np.nan, 0.3],
             "note": note, "coverage": 1.0, "quantity": [0.1, np.nan, 0.3]}
        )  # fmt: skip

    failed = rate_scores(rows([None, None, None]), settings=RatingSettings(levels=3)).set_index("system")
    assert failed.loc["b", ["insufficient", "rating", "absolute_rating"]].tolist() == [True, 3, 3]
    assert failed.loc["b", "note"].startswith("insufficient: its forecasts failed on the windows this score needs")
    noted = rate_scores(rows([None, "undefined: why", None]), settings=RatingSettings(levels=3)).set_index("system")
    assert noted.loc["b", ["insufficient", "display"]].tolist() == [False, "—"] and noted.loc["b", "rating"] != 3


# --- sweep 2: what a plugin returns or raises, beyond the cases above ----------------------------------------


@pytest.mark.parametrize(
    ("returned", "words"),
    [  # a generator, text and a short array were tracebacks after forecasting; a scalar was broadcast silently
        (lambda t, f, c: (v for v in t[:, 0]), "returned a generator"),
        (lambda t, f, c: 1.0, "returned a float"),
        (lambda t, f, c: np.zeros(len(t) - 1), "returned an array of shape (3,) and dtype float64"),
        (lambda t, f, c: np.full(len(t), "x"), "returned an array of shape (4,) and dtype <U1"),
        (lambda t, f, c: np.zeros((len(t), 2)), "returned an array of shape (4, 2)"),
    ],
)
def test_a_metric_returning_other_than_one_number_per_forecast_is_refused(returned, words):
    broken = Metric(name="m1", fn=returned, description="broken")
    truth = np.ones((4, 3))
    with pytest.raises(ContractError) as caught:
        broken(truth, truth, truth)
    message = str(caught.value)
    assert "metric 'm1'" in message and words in message and "expected 4 numbers" in message, message
    fine = Metric(name="m2", fn=lambda t, f, c: np.arange(len(t)), description="fine")(truth, truth, truth)
    assert fine.dtype == float and fine.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_sys_exit_inside_a_plugin_is_exit_2_not_a_silent_exit_0(tmp_path):
    """raise SystemExit(0) in a score's compute or an operator's apply ended the run with exit 0, nothing rated."""
    plugin = SCORE_PLUGIN.format(name="quits", cls="Quits", facts="", frame="raise SystemExit(0)")
    done = _assess(tmp_path, plugin)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "score 'quits'" in done.stderr and "compute(evidence) raised SystemExit: 0" in done.stderr, done.stderr
    quits = guarded("perturbation operator", "quits", object, "apply()")
    with pytest.raises(ContractError, match=r"apply\(\) raised SystemExit: 3"), quits:
        sys.exit(3)


def test_a_score_computing_no_rows_is_listed_as_not_rated(tmp_path):
    """A score whose compute returned an empty frame vanished: in neither the ratings nor not_rated."""
    plugin = SCORE_PLUGIN.format(name="nothing", cls="Nothing", facts="", frame="return frame.iloc[:0]")
    done = _assess(tmp_path, plugin)
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "run" / "ratings.json").read_text())
    assert "returned no rows" in document["not_rated"]["nothing"], document["not_rated"]
    assert not any(row["score"] == "nothing" for row in document["ratings"])


def test_a_rated_plugin_scheme_gets_its_scores_rated(tmp_path):
    """A plugin scheme whose name is no data attribute lost its ape_/pie_ scores without a word (in neither the
    ratings nor not_rated): its name was taken for an attribute the data lacks."""
    plugin = """
    @SCHEMES.register("coin")
    class Coin(Scheme):
        description = "one fair coin per window"
        def probabilities(self, table, *, high, low):
            return np.full(len(table), 0.5)
    """
    done = _assess(tmp_path, plugin, schemes="uniform, coin")
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "run" / "ratings.json").read_text())
    scores = {row["score"] for row in document["ratings"]}
    assert {"ape_coin", "pie_coin"} <= scores, (scores, document["not_rated"])
