"""The quickstart end to end: outputs, the issue's acceptance checks, reference ratings, determinism."""

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from causalrate.cli import main
from causalrate.report.render import find_chromium
from tests.conftest import assert_raw_in_intervals

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "ratings" / "quickstart"


def load(run: Path) -> dict:
    return json.loads((run / "ratings.json").read_text())


def rows(doc: dict, perturbation: str, score: str) -> dict[str, dict]:
    return {r["system"]: r for r in doc["ratings"] if r["perturbation"] == perturbation and r["score"] == score}


def test_outputs_and_schema(quickstart):
    for name in ("ratings.json", "scores.csv", "report.md", "forecasts.sqlite"):
        assert (quickstart / name).is_file()
    cards = {p.name for p in (quickstart / "cards").iterdir()}
    kinds = [".html", ".report.html", ".md", ".model-card.json", ".model-index.yaml"]
    if find_chromium():
        kinds += [".png", ".pdf"]  # the label, rendered
    expected = {f"{s}{kind}" for s in ("naive", "arima", "random", "biased") for kind in kinds}
    assert expected | {"comparison.html", "index.html"} <= cards
    doc = load(quickstart)
    assert doc["schema"] == "causalrate/ratings-v3" and doc["direction"] == "1 = best" and doc["levels"] == 3
    assert [s["name"] for s in doc["systems"]] == ["naive", "arima", "random", "biased"]
    scores = {
        "wrs_industry",
        "wrs_company",
        "bias_industry",
        "bias_company",
        "ape",
        "recency",
        "ape_industry",
        "ape_company",
        "pie_industry",
        "pie_company",
        "smape",
        "mase",
        "crps",
        "wql",
        "coverage_error",
        "sign_accuracy",
        "failure_rate",
        "fragility_spread",
    }
    for p in ("P1", "P2", "P3"):  # and the newest point of each, measured directly (issue 28)
        assert {r["score"] for r in doc["ratings"] if r["perturbation"] == p} == scores | {"ape_last"}
    # P3 forward-filled, for the systems that take NaN (all four references do): the same scores
    assert {r["score"] for r in doc["ratings"] if r["perturbation"] == "P3+ffill"} == scores | {"ape_last"}
    assert {r["score"] for r in doc["ratings"] if r["perturbation"] == "P0"} == {
        "smape",
        "mase",
        "crps",
        "wql",
        "coverage_error",
        "sign_accuracy",
        "failure_rate",
    }
    assert set(doc["overall"]) == {"naive", "arima", "random", "biased"}
    # cyclic placement: the last input point is hit, so naive is not "perfectly robust" by accident
    assert min(r["raw"] for r in doc["ratings"] if r["score"] == "ape" and r["system"] == "naive") > 0
    assert {r["bin"] for r in doc["recency_profile"]} == {"1", "2-5", "6-20", "21-80"}
    # 16 observational distributions per system: 4 perturbations (P3+ffill too: arima takes NaN) × 4 schemes
    assert len([e for e in doc["effects"] if e["system"] == "arima"]) == 16
    assert {"config", "data_hash", "versions", "seed"} <= set(doc["provenance"])
    assert "APE_true" in (quickstart / "report.md").read_text()
    # the rigor layer: intervals, stability, power on APE, BH counts, refutations
    ape = [r for r in doc["ratings"] if r["score"] == "ape"]
    assert all({"interval", "stability", "p_value", "power", "n_min", "inconclusive"} <= set(r) for r in ape)
    assert set(doc["overall_stability"]) == set(doc["overall"])
    assert doc["wrs_tests"] and {"pairs", "rejections_bh_5pct"} <= set(doc["wrs_tests"][0])
    assert {r["refuter"] for r in doc["refutations"]} == {"placebo_treatment", "random_common_cause", "data_subset"}
    # the fragility map: every system × perturbation; arima breaks when the perturbed point is recent
    assert {(s, p) for s, per in doc["heterogeneity"].items() for p in per} == {
        (s, p) for s in doc["overall"] for p in ("P1", "P2", "P3", "P3+ffill")
    }
    arima = doc["heterogeneity"]["arima"]["P1"]
    assert arima["drivers"][0]["covariate"] == "distance" and "among the last" in arima["rules"][0]["text"]
    assert "Where it is fragile" in (quickstart / "cards" / "arima.report.html").read_text()


def test_acceptance_checks(quickstart):
    doc = load(quickstart)
    assert_raw_in_intervals(doc)
    # issue 15: biased is worst on bias, and no card headline calls it most robust
    bias = {s: h["bias"]["rating"] for s, h in doc["headlines"].items()}
    assert bias["biased"] == max(bias.values()) > min(bias.values())
    assert set(doc["overall"]) == set(doc["headlines"]) and all(c["passed"] for c in doc["checks"])
    assert "most robust" not in (quickstart / "cards" / "biased.html").read_text()
    for p in ("P1", "P2", "P3"):
        # the planted bias has the largest magnitude everywhere; WRS saturates per pair (random's errors
        # also differ by industry, honestly), so WRS only has to rank biased above its honest base, naive
        gap = rows(doc, p, "bias_industry")
        assert gap["biased"]["raw"] == max(r["raw"] for r in gap.values()) > 2 * gap["naive"]["raw"]
        wrs = rows(doc, p, "wrs_industry")
        assert wrs["biased"]["raw"] > wrs["naive"]["raw"]
    for p in ("P0", "P1", "P2", "P3"):
        smape = rows(doc, p, "smape")
        assert smape["random"]["raw"] == max(r["raw"] for r in smape.values())
    for e in doc["effects"]:
        if e["system"] == "biased" and e["scheme"] == "industry":
            assert abs(e["ape_adj"] - e["ape_true"]) < abs(e["ape_obs"] - e["ape_true"])


# Raw scores move in the 5th-6th digit across CPUs and BLAS builds with the same library versions (ARIMA's
# optimiser above all), and a small effect (a difference of two close errors) or a PIE% with a small
# denominator moves much more in relative terms: a value is compared to within DRIFT_REL of the largest
# value of the same quantity in the run. Ratings must not move at all. Same-machine determinism is
# checked byte for byte below.
DRIFT_REL = 1e-3
EFFECTS = ("ape_true", "ape_obs", "ape_adj", "pie")


def _close(a: float | None, b: float | None, scale: float, tolerance: float = DRIFT_REL) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance * scale)


def _scale(values) -> float:
    return max((abs(v) for v in values if v is not None), default=0.0)


def drift(new: dict, ref: dict, *, tolerance: float = DRIFT_REL) -> list[str]:
    """Where a run differs from the reference: any rating, or a raw score / effect beyond the tolerance (a share of
    the largest value of the same quantity in the run)."""
    problems = [] if new["overall"] == ref["overall"] else [f"overall {new['overall']} != {ref['overall']}"]
    key = lambda r: (r["perturbation"], r["score"], r["system"])  # noqa: E731
    new_rows, ref_rows = sorted(new["ratings"], key=key), sorted(ref["ratings"], key=key)
    if [key(r) for r in new_rows] != [key(r) for r in ref_rows]:
        return [*problems, "the rated (perturbation, score, system) rows differ"]
    score_scale = {r["score"]: _scale(x["raw"] for x in ref_rows if x["score"] == r["score"]) for r in ref_rows}
    for a, b in zip(new_rows, ref_rows, strict=True):
        if a["rating"] != b["rating"]:
            problems.append(f"{key(a)}: rating {a['rating']} != {b['rating']}")
        if not _close(a["raw"], b["raw"], score_scale[b["score"]], tolerance):
            problems.append(f"{key(a)}: raw {a['raw']} != {b['raw']}")
    effect_scale = {field: _scale(e[field] for e in ref["effects"]) for field in EFFECTS}
    for a, b in zip(new["effects"], ref["effects"], strict=True):
        problems += [
            f"{a['system']} {a['perturbation']} {a['scheme']}: {field} {a[field]} != {b[field]}"
            for field in EFFECTS
            if not _close(a[field], b[field], effect_scale[field], tolerance)
        ]
    for field in ("data_hash", "config"):
        if new["provenance"][field] != ref["provenance"][field]:
            problems.append(f"provenance.{field} differs")
    return problems


def test_reference_ratings_do_not_drift(quickstart):
    """ratings/quickstart is what this study produces; regenerate with `python -m tests.make_reference`."""
    assert drift(load(quickstart), load(REFERENCE)) == []


def test_drift_check_tolerates_float_noise_but_no_rating_change():
    ref = load(REFERENCE)
    copy = lambda: json.loads(json.dumps(ref))  # noqa: E731
    noisy = copy()
    for row in noisy["ratings"]:
        row["raw"] = None if row["raw"] is None else row["raw"] * (1 + 3e-5)  # what another CPU/BLAS gives
    for field in EFFECTS:  # a small effect moves by a share of the largest one, not of itself
        largest = max(abs(e[field]) for e in ref["effects"] if e[field] is not None)
        for effect in noisy["effects"]:
            if effect[field] is not None:  # PIE% undefined (null) stays undefined
                effect[field] += 2e-4 * largest
    assert drift(noisy, ref) == []
    flipped = copy()
    next(r for r in flipped["ratings"] if r["rating"] is not None)["rating"] += 1
    problems = drift(flipped, ref)
    assert len(problems) == 1 and "rating" in problems[0]
    moved = copy()
    defined = [e for e in moved["effects"] if e["pie"] is not None]
    smallest = min(defined, key=lambda e: abs(e["pie"]))
    smallest["pie"] += 0.01 * max(abs(e["pie"]) for e in defined)
    problems = drift(moved, ref)
    assert len(problems) == 1 and "pie" in problems[0]


def test_same_config_and_seed_give_identical_bytes(synthetic_study, tmp_path):
    systems = (
        "- {name: naive, type: naive}\n- {name: random, type: random}\n- {name: biased, type: biased, value: Alpha}\n"
    )
    config = synthetic_study(systems, draws=4, stride=4)
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["assess", str(config), "--out", str(one), "--workers", "1", "--no-cards"]) == 0
    assert main(["assess", str(config), "--out", str(two), "--workers", "2", "--no-cards"]) == 0
    assert (one / "ratings.json").read_bytes() == (two / "ratings.json").read_bytes()
    assert (
        main(["assess", str(config), "--out", str(two), "--workers", "2", "--seed", "9", "--overwrite", "--no-cards"])
        == 0
    )
    assert (one / "ratings.json").read_bytes() != (two / "ratings.json").read_bytes()


def test_identical_bytes_across_processes(synthetic_study, tmp_path):
    """Python's hash randomisation differs per process: nothing in ratings.json may depend on it."""
    import os
    import subprocess
    import sys

    config = synthetic_study("- {name: naive, type: naive}\n", draws=2, stride=10)
    outs = []
    for k, hashseed in enumerate(("1", "2")):
        out = tmp_path / f"p{k}"
        env = {**os.environ, "PYTHONHASHSEED": hashseed, "CAUSALRATE_CACHE_DIR": str(tmp_path / f"c{k}")}
        cmd = [sys.executable, "-m", "causalrate", "assess", str(config), "--out", str(out), "--no-cards"]
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        outs.append((out / "ratings.json").read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.e2e
def test_model_yaml_is_assessed_against_the_reference_systems(tmp_path, cli):
    shutil.copy(Path(__file__).parent / "planted.py", tmp_path / "planted.py")
    (tmp_path / "model.yaml").write_text(
        'model: {name: "my median", type: python, function: "planted.py:window_median"}\nwindows: {stride: 10}\n'
    )
    code, _, err = cli("assess", tmp_path / "model.yaml", "--out", tmp_path / "run", "--workers", "2", "--no-cards")
    assert code == 0, err
    # the quickstart's setup: the reference systems' forecasts are the published ones wherever the input is the same
    # (at stride 10 the cyclic placement differs, so some perturbed inputs are new): every clean window at least
    published = re.search(r"([\d,]+) from the published reference forecasts \(naive, arima, biased\)", err)
    assert published and int(published.group(1).replace(",", "")) >= 3 * 90, err
    doc = load(tmp_path / "run")
    assert [s["name"] for s in doc["systems"]] == ["my median", "naive", "arima", "random", "biased"]
    assert doc["study"] == "my-median" and doc["outcome"] == "rmax_scaled"
    assert doc["counts"]["series"] == 6


def test_clean_accuracy_intervals_are_as_wide_as_a_moving_block_bootstrap_allows(quickstart):
    """Issue 29: the clean-accuracy intervals respect the windows' overlap. An independent moving-block
    bootstrap (blocks of 10 consecutive windows per series, 2,000 replicates, written here with numpy) gives
    a floor: no interval is narrower than 0.9 × its width (the slack is the two bootstraps' Monte Carlo noise)."""
    import numpy as np

    from causalrate.run import Run

    doc = load(quickstart)
    with Run.open(quickstart).store() as store:
        every = store.forecasts()
    frame = every[every["perturbation"] == "P0"]
    rng = np.random.default_rng(29)
    for (system, score), row in {
        (r["system"], r["score"]): r for r in doc["ratings"] if r["perturbation"] == "P0"
    }.items():
        if score not in ("smape", "mase"):
            continue
        mine = frame[frame["system"] == system]
        means = np.zeros(2000)
        for _, part in mine.groupby("series"):
            values = part.sort_values("window")[score].to_numpy()
            starts = rng.integers(0, values.size - 10 + 1, size=(2000, -(-values.size // 10)))
            drawn = values[(starts[:, :, None] + np.arange(10)).reshape(2000, -1)[:, : values.size]]
            means += drawn.sum(axis=1)
        means /= len(mine)
        floor = np.subtract(*np.percentile(means, [97.5, 2.5]))
        lo, hi = row["interval"]
        assert hi - lo >= 0.9 * floor, (system, score, hi - lo, floor)
