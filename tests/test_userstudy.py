"""User-study kit: export on the quickstart run, a simulated cohort with planted effects, malformed
answer files, and the HTML form driven in headless Chromium."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.cli import main
from causalrate.userstudy.analyze import kendall_tau
from causalrate.userstudy.export import ITEMS


@pytest.fixture(scope="module")
def kit(quickstart, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kit") / "kit"
    assert main(["study", "export", str(quickstart), "--out", str(out), "--participants", "40", "--seed", "7"]) == 0
    return out


def load(kit: Path, name: str) -> dict:
    return json.loads((kit / name).read_text())


def test_kit_is_complete_deterministic_and_counterbalanced(kit, quickstart, tmp_path):
    for name in [
        "README.md",
        "consent.md",
        "form.html",
        "questionnaire.json",
        "questionnaire.csv",
        "answer_key.json",
        "assignments.csv",
        "assignments.json",
        "kit.json",
    ]:
        assert (kit / name).is_file(), name
    assert "PLACEHOLDER" in (kit / "consent.md").read_text()
    questions = load(kit, "questionnaire.json")["questions"]
    assert len(questions) == 8
    for q in questions:
        for figure in q["figures"].values():
            assert (kit / figure).read_bytes().startswith(b"\x89PNG")
    rows = list(csv.DictReader((kit / "questionnaire.csv").open()))
    assert len(rows) == 8 * len(ITEMS)
    plan = load(kit, "assignments.json")["participants"]
    firsts = []
    for steps in plan.values():
        assert sorted(s["question"] for s in steps) == sorted(q["id"] for q in questions)
        assert [s["condition"] for s in steps].count("ratings") == 4
        firsts.append(steps[0]["condition"])
    assert firsts.count("ratings") == firsts.count("plain") == 20  # block order balanced
    assert len({tuple(s["question"] for s in steps) for steps in plan.values()}) > 30  # orders differ
    again = tmp_path / "again"
    assert main(["study", "export", str(quickstart), "--out", str(again), "--participants", "40", "--seed", "7"]) == 0
    for name in ["questionnaire.json", "answer_key.json", "assignments.json", "stimuli/Q03-ratings.png", "form.html"]:
        assert (again / name).read_bytes() == (kit / name).read_bytes(), name


def test_answer_key_follows_the_ratings(kit, quickstart):
    doc = json.loads((quickstart / "ratings.json").read_text())
    rating = {(r["perturbation"], r["score"], r["system"]): r["rating"] for r in doc["ratings"]}
    key = load(kit, "answer_key.json")["questions"]
    for q in load(kit, "questionnaire.json")["questions"]:
        k = key[q["id"]]
        ape = {label: rating[(q["perturbation"], "ape", name)] for label, name in k["systems"].items()}
        assert k["most_robust"] == sorted(label for label, r in ape.items() if r == min(ape.values()))
        for a in ape:
            for b in ape:
                assert (ape[a] < ape[b]) == (k["robustness_rank"][a] < k["robustness_rank"][b])


def test_kendall_tau_against_scipy_and_by_hand():
    assert kendall_tau("A>B>C", {"A": 1, "B": 2, "C": 3}) == pytest.approx(1.0)
    assert kendall_tau("C>B>A", {"A": 1, "B": 2, "C": 3}) == pytest.approx(-1.0)
    assert kendall_tau("B>A>C", {"A": 1, "B": 2, "C": 3}) == pytest.approx(1 / 3)  # 2 concordant, 1 discordant
    assert kendall_tau("A>B>C", {"A": 1, "B": 1, "C": 1}) == 0.0


def simulate(
    kit: Path, folder: Path, *, accuracy: dict[str, float], difficulty: dict[str, float], seed: int = 0
) -> None:
    """A cohort answering with planted accuracy (share of answers equal to the key) and planted difficulty."""
    rng = np.random.default_rng(seed)
    key = load(kit, "answer_key.json")["questions"]
    labels = {q["id"]: q["labels"] for q in load(kit, "questionnaire.json")["questions"]}
    folder.mkdir(parents=True, exist_ok=True)
    for pid, steps in load(kit, "assignments.json")["participants"].items():
        rows = []
        for step in steps:
            q, c = step["question"], step["condition"]
            order = sorted(labels[q], key=lambda label: (key[q]["robustness_rank"][label], label))
            wrong = [x for x in labels[q] if x not in key[q]["most_robust"]]
            if rng.random() >= accuracy[c] and wrong:  # a wrong top choice, the rest shuffled
                top = str(rng.choice(wrong))
                order = [top, *[str(x) for x in rng.permutation(labels[q]) if x != top]]
            biased = key[q]["least_biased"][0] if rng.random() < accuracy[c] else "cannot tell"
            level = int(np.clip(round(rng.normal(difficulty[c], 0.6)), 1, 5))
            answers = {"ranking": ">".join(order), "least_biased": biased, "difficulty": level, "confidence": 3}
            rows += [
                {"participant": pid, "question": q, "condition": c, "item": i, "answer": a} for i, a in answers.items()
            ]
        if int(pid[1:]) % 2:
            pd.DataFrame(rows).to_csv(folder / f"causalrate-{pid}.csv", index=False)
        else:
            body = {
                "kit": "quickstart",
                "participant": pid,
                "responses": [{k: v for k, v in r.items() if k != "participant"} for r in rows],
            }
            (folder / f"causalrate-{pid}.json").write_text(json.dumps(body))


def expected_top_accuracy(kit: Path, planted: dict[str, float]) -> dict[str, float]:
    """Planted accuracy, except where every system ties for most robust: then any answer is right."""
    key = load(kit, "answer_key.json")["questions"]
    hits = {"plain": [], "ratings": []}
    for steps in load(kit, "assignments.json")["participants"].values():
        for s in steps:
            all_top = len(key[s["question"]]["most_robust"]) == len(key[s["question"]]["systems"])
            hits[s["condition"]].append(1.0 if all_top else planted[s["condition"]])
    return {c: float(np.mean(v)) for c, v in hits.items()}


def test_simulated_cohort_recovers_the_planted_effects(kit, tmp_path):
    planted = {"plain": 0.55, "ratings": 0.95}
    simulate(kit, tmp_path / "answers", accuracy=planted, difficulty={"plain": 4.0, "ratings": 2.0})
    assert main(["study", "analyze", str(kit), str(tmp_path / "answers"), "--out", str(tmp_path / "report")]) == 0
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["participants"] == 40 and summary["problems"] == 0
    acc = summary["accuracy"]
    expected = expected_top_accuracy(kit, planted)
    assert acc["ratings"]["most_robust"] == pytest.approx(expected["ratings"], abs=0.05)
    assert acc["plain"]["most_robust"] == pytest.approx(expected["plain"], abs=0.08)
    assert acc["ratings"]["least_biased"] == pytest.approx(0.95, abs=0.06)
    d = summary["difficulty"]
    assert d["p_value"] < 1e-6 and d["rank_biserial"] > 0.9
    assert d["median_plain"] - d["median_ratings"] == pytest.approx(2.0, abs=0.4)
    assert summary["kendall_tau"]["ratings"] > summary["kendall_tau"]["plain"]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Wilcoxon" in report and "None: every response row was valid" in report
    tidy = pd.read_csv(tmp_path / "report" / "responses.csv")
    assert len(tidy) == 40 * 8 * len(ITEMS)
    assert "<h1>User study" in (tmp_path / "report" / "report.html").read_text()


def test_no_effect_cohort_finds_none(kit, tmp_path):
    simulate(
        kit,
        tmp_path / "answers",
        accuracy={"plain": 0.7, "ratings": 0.7},
        difficulty={"plain": 3.0, "ratings": 3.0},
        seed=4,
    )
    assert main(["study", "analyze", str(kit), str(tmp_path / "answers"), "--out", str(tmp_path / "r")]) == 0
    d = json.loads((tmp_path / "r" / "summary.json").read_text())["difficulty"]
    assert d["p_value"] > 0.01 and abs(d["median_plain"] - d["median_ratings"]) <= 0.5


def test_malformed_answers_are_listed_by_file_and_line(kit, tmp_path):
    answers = tmp_path / "answers"
    simulate(kit, answers, accuracy={"plain": 0.7, "ratings": 0.9}, difficulty={"plain": 3.5, "ratings": 2.5})
    path = answers / "causalrate-P001.csv"
    lines = path.read_text().splitlines()
    lines[4] = lines[4].rsplit(",", 1)[0] + ",9" if lines[4].split(",")[3] in ("difficulty", "confidence") else lines[4]
    bad = lines[1].split(",")
    lines[1] = ",".join([bad[0], bad[1], bad[2], "ranking", "A>A>B"])
    del lines[6]
    lines.append("P999,Q01,plain,difficulty,3")
    path.write_text("\n".join(lines) + "\n")
    (answers / "notes.json").write_text("{not json")
    code = main(["study", "analyze", str(kit), str(answers), "--out", str(tmp_path / "report")])
    assert code == 0
    problems = pd.read_csv(tmp_path / "report" / "problems.csv", dtype=str, keep_default_na=False)
    listed = problems.agg(" ".join, axis=1).tolist()
    assert any("causalrate-P001.csv line 2" in p and "must order each of" in p for p in listed)
    assert any("causalrate-P001.csv" in p and "P999" in p and f"line {len(lines)}" in p for p in listed)
    assert any("notes.json file unreadable" in p for p in listed)
    assert any(p.startswith(" P001 missing answer") for p in listed)
    if lines[4].endswith(",9"):
        assert any("line 5" in p and "not an integer from 1 to 5" in p for p in listed)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["participants"] == 40  # P001's other answers still count


def test_analyze_bad_kit_or_empty_folder_exit_2(kit, tmp_path, cli):
    (tmp_path / "empty").mkdir()
    code, _, err = cli("study", "analyze", str(kit), str(tmp_path / "empty"))
    assert code == 2 and "no response files" in err
    code, _, err = cli("study", "analyze", str(tmp_path), str(kit))
    assert code == 2 and "not a causalrate study kit" in err


def browser() -> str | None:
    return os.environ.get("CAUSALRATE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def test_form_in_a_real_browser_produces_a_valid_response_file(kit, tmp_path):
    executable = browser()
    if executable is None:
        if os.environ.get("CAUSALRATE_REQUIRE_BROWSER"):
            pytest.fail("Chromium is required (CAUSALRATE_REQUIRE_BROWSER) but not found")
        pytest.skip("no Chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    answers = tmp_path / "answers"
    answers.mkdir()
    plan = load(kit, "assignments.json")["participants"]["P002"]
    questions = {q["id"]: q for q in load(kit, "questionnaire.json")["questions"]}
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
    with sync_api.sync_playwright() as p:
        chrome = p.chromium.launch(executable_path=executable, args=args)
        page = chrome.new_page(accept_downloads=True)
        page.goto((kit / "form.html").as_uri())
        page.fill("#participant", "P404")
        page.click("#begin")
        assert "Unknown participant id" in page.inner_text("#start-error")
        page.fill("#participant", "P002")
        page.click("#begin")
        shown = page.eval_on_selector_all(
            "section.question", "els => els.map(e => [e.dataset.question, e.dataset.condition])"
        )
        assert shown == [[s["question"], s["condition"]] for s in plan]
        page.click("#submit")
        assert "Please complete" in page.inner_text("#form-error")
        for step in plan:
            q = questions[step["question"]]
            for rank, label in enumerate(reversed(q["labels"]), start=1):
                page.select_option(f"[name='{q['id']}-rank-{label}']", str(rank))
            page.check(f"#{q['id']}-least_biased-{q['labels'][0]}")
            page.check(f"#{q['id']}-difficulty-2")
            page.check(f"#{q['id']}-confidence-4")
        page.click("#submit")
        assert page.inner_text("#form-error") == ""
        for link in ("#download-csv", "#download-json"):
            with page.expect_download() as download:
                page.click(link)
            download.value.save_as(answers / download.value.suggested_filename)
        chrome.close()
    assert sorted(p.name for p in answers.iterdir()) == ["causalrate-P002.csv", "causalrate-P002.json"]
    for name in ("causalrate-P002.csv", "causalrate-P002.json"):
        single = tmp_path / name.split(".")[1]
        single.mkdir()
        shutil.copy(answers / name, single / name)
        assert main(["study", "analyze", str(kit), str(single), "--out", str(single / "report")]) == 0
        summary = json.loads((single / "report" / "summary.json").read_text())
        assert summary["problems"] == 0 and summary["responses"] == 8
        tidy = pd.read_csv(single / "report" / "responses.csv")
        assert set(tidy[tidy["item"] == "difficulty"]["answer"].astype(int)) == {2}


def _keep(folder: Path, keep) -> None:
    """Rewrite every answer file of `folder` keeping only the rows for which keep(row) holds."""
    for path in folder.iterdir():
        if path.suffix == ".csv":
            frame = pd.read_csv(path, dtype=str)
            frame[[keep(r) for r in frame.to_dict("records")]].to_csv(path, index=False)
        else:
            doc = json.loads(path.read_text())
            doc["responses"] = [r for r in doc["responses"] if keep({**r, "participant": doc["participant"]})]
            path.write_text(json.dumps(doc))


def test_realistic_response_sets_are_analyzed_or_refused_clearly(kit, tmp_path, cli):
    """Only one half answered, only Likert items, a participant id given as a list, a folder named x.csv:
    each is a listed problem or a clear exit 2, never a traceback."""
    answers = tmp_path / "half"
    simulate(kit, answers, accuracy={"plain": 0.7, "ratings": 0.9}, difficulty={"plain": 3.5, "ratings": 2.5})
    _keep(answers, lambda r: r["condition"] == "plain")  # everyone stopped halfway
    (answers / "x.csv").mkdir()
    code, _, err = cli("study", "analyze", kit, answers, "--out", tmp_path / "r1")
    assert code == 0 and "Traceback" not in err, err
    summary = json.loads((tmp_path / "r1" / "summary.json").read_text())
    assert summary["difficulty"]["participants"] == 0 and summary["difficulty"]["median_plain"] is None
    assert set(summary["accuracy"]) == {"plain"} and summary["problems"] > 0

    likert = tmp_path / "likert"
    simulate(kit, likert, accuracy={"plain": 0.7, "ratings": 0.9}, difficulty={"plain": 3.5, "ratings": 2.5})
    _keep(likert, lambda r: r["item"] in ("difficulty", "confidence"))
    code, _, err = cli("study", "analyze", kit, likert, "--out", tmp_path / "r2")
    assert code == 2 and "no question has all its items answered" in err and "missing answer" in err, err

    listed = tmp_path / "listed"
    simulate(kit, listed, accuracy={"plain": 0.7, "ratings": 0.9}, difficulty={"plain": 3.5, "ratings": 2.5})
    path = listed / "causalrate-P002.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "participant": ["P002"]}))
    code, _, err = cli("study", "analyze", kit, listed, "--out", tmp_path / "r3")
    assert code == 0 and "Traceback" not in err, err
    problems = (tmp_path / "r3" / "problems.csv").read_text()
    assert "participant must be text, got ['P002']" in problems
