"""`causalrate study analyze`: read the returned answers, check them against the kit, report the effects.

Every problem in a response file (unknown participant or question, wrong condition, a bad
ranking, a Likert value out of range, a missing or repeated answer) is listed with its file and
line (CSV) or entry (JSON) and the row is left out; nothing is guessed, nothing crashes.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from causalrate.errors import UserError
from causalrate.userstudy.export import CANNOT_TELL, ITEMS, KIT_SCHEMA, LIKERT

COLUMNS = ["participant", "question", "condition", "item", "answer"]


@dataclass
class Responses:
    rows: pd.DataFrame  # tidy: file, line, participant, question, condition, item, answer
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (file, where, what)


def load_kit(kit_dir: Path) -> tuple[dict, dict, dict]:
    try:
        questionnaire = json.loads((kit_dir / "questionnaire.json").read_text(encoding="utf-8"))
        key = json.loads((kit_dir / "answer_key.json").read_text(encoding="utf-8"))["questions"]
        plan = json.loads((kit_dir / "assignments.json").read_text(encoding="utf-8"))["participants"]
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"{kit_dir}: not a causalrate study kit ({type(exc).__name__}: {exc})") from None
    if questionnaire.get("schema") != KIT_SCHEMA:
        raise UserError(f"{kit_dir}: kit schema {questionnaire.get('schema')!r}; this causalrate reads {KIT_SCHEMA!r}")
    return questionnaire, key, plan


def read_responses(folder: Path, *, questionnaire: dict, plan: dict) -> Responses:
    """All *.csv and *.json answer files of `folder`, validated row by row."""
    found = folder.iterdir() if folder.is_dir() else []
    files = sorted(p for p in found if p.suffix in (".csv", ".json") and p.is_file())  # not a folder named x.csv
    if not files:
        raise UserError(f"{folder}: no response files (*.csv, *.json) here")
    labels = {q["id"]: q["labels"] for q in questionnaire["questions"]}
    out = Responses(pd.DataFrame(columns=["file", "line", *COLUMNS]))
    kept: list[dict] = []
    seen: dict[tuple, str] = {}
    for path in files:
        for where, row in _rows(path, out.problems):
            problem = _check(row, labels=labels, plan=plan)
            ident = (row.get("participant"), row.get("question"), row.get("item"))
            if problem is None and ident in seen:
                problem = f"repeats the answer already given at {seen[ident]}"
            if problem:
                out.problems.append((path.name, where, problem))
                continue
            seen[ident] = f"{path.name} {where}"
            kept.append({"file": path.name, "line": where, **row})
    if kept:
        out.rows = pd.DataFrame(kept)
    for pid in sorted(set(out.rows["participant"])):
        given = set(zip(*out.rows[out.rows["participant"] == pid][["question", "item"]].to_numpy().T, strict=True))
        for step in plan[pid]:
            for item in ITEMS:
                if (step["question"], item) not in given:
                    out.problems.append(("", pid, f"missing answer: {step['question']} {item}"))
    return out


def _rows(path: Path, problems: list) -> list[tuple[str, dict]]:
    try:
        if path.suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                if reader.fieldnames != COLUMNS:
                    problems.append((path.name, "line 1", f"header {reader.fieldnames}, expected {COLUMNS}"))
                    return []
                return [(f"line {reader.line_num}", dict(r)) for r in reader]
        doc = json.loads(path.read_text(encoding="utf-8"))
        entries = doc["responses"]
        return [(f"response {i + 1}", {"participant": doc["participant"], **e}) for i, e in enumerate(entries)]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        problems.append((path.name, "file", f"unreadable: {type(exc).__name__}: {exc}"))
        return []


def _check(row: dict, *, labels: dict, plan: dict) -> str | None:
    """Why a response row is invalid, or None."""
    if set(COLUMNS) - set(row) or any(row.get(c) is None for c in COLUMNS):
        return f"needs the fields {COLUMNS}"
    wrong = [c for c in COLUMNS if not isinstance(row[c], str) and not (c == "answer" and isinstance(row[c], int))]
    if wrong:
        return "; ".join(f"{c} must be text, got {row[c]!r}" for c in wrong)
    pid, q, item, answer = row["participant"], row["question"], row["item"], str(row["answer"]).strip()
    if pid not in plan:
        return f"unknown participant id {pid!r}"
    expected = {s["question"]: s["condition"] for s in plan[pid]}
    if q not in expected:
        return f"unknown question {q!r}"
    if row["condition"] != expected[q]:
        return f"{q} was assigned to {pid} as {expected[q]!r}, not {row['condition']!r}"
    if item not in ITEMS:
        return f"unknown item {item!r}; items: {list(ITEMS)}"
    if item == "ranking" and sorted(answer.split(">")) != sorted(labels[q]):
        return f"ranking {answer!r} must order each of {labels[q]} once, e.g. {'>'.join(labels[q])}"
    if item == "least_biased" and answer not in [*labels[q], CANNOT_TELL]:
        return f"least_biased {answer!r} must be one of {[*labels[q], CANNOT_TELL]}"
    if item in ("difficulty", "confidence") and answer not in [str(v) for v in range(LIKERT[0], LIKERT[1] + 1)]:
        return f"{item} {answer!r} is not an integer from {LIKERT[0]} to {LIKERT[1]}"
    row["answer"] = answer
    return None


def kendall_tau(ranking: str, ranks: dict[str, int]) -> float:
    """Kendall's tau-b between a participant's order ('B>A>C') and causalrate's ranks (ties allowed)."""
    labels = sorted(ranks)
    mine = {label: i + 1 for i, label in enumerate(ranking.split(">"))}
    tau = stats.kendalltau([mine[label] for label in labels], [ranks[label] for label in labels]).statistic
    return 0.0 if np.isnan(tau) else float(tau)  # all tied in causalrate's ranking: no agreement to measure


def score_responses(rows: pd.DataFrame, key: dict) -> pd.DataFrame:
    """Per (participant, question): condition, correctness, tau, difficulty, confidence."""
    wide = rows.pivot_table(
        index=["participant", "question", "condition"], columns="item", values="answer", aggfunc="first"
    )
    wide = wide.reindex(columns=list(ITEMS)).dropna().reset_index()  # a question counts when every item is answered
    wide["top_correct"] = [
        r.split(">")[0] in key[q]["most_robust"] for r, q in zip(wide["ranking"], wide["question"], strict=True)
    ]
    wide["bias_correct"] = [
        a in key[q]["least_biased"] for a, q in zip(wide["least_biased"], wide["question"], strict=True)
    ]
    wide["tau"] = [
        kendall_tau(r, key[q]["robustness_rank"]) for r, q in zip(wide["ranking"], wide["question"], strict=True)
    ]
    wide["difficulty"] = wide["difficulty"].astype(int)
    wide["confidence"] = wide["confidence"].astype(int)
    return wide


def difficulty_test(scored: pd.DataFrame) -> dict:
    """Paired Wilcoxon signed-rank test of each participant's mean difficulty without vs with ratings.

    Effect size: the matched-pairs rank-biserial correlation (positive = harder without ratings).
    """
    per = scored.pivot_table(index="participant", columns="condition", values="difficulty", aggfunc="mean")
    per = per.reindex(columns=["plain", "ratings"]).dropna()  # participants who answered in both conditions
    result: dict[str, float | int | None] = {"participants": len(per), "median_plain": None, "median_ratings": None}
    if len(per) == 0:
        return result
    diff = (per["plain"] - per["ratings"]).to_numpy()
    result["median_plain"] = float(per["plain"].median())
    result["median_ratings"] = float(per["ratings"].median())
    result["median_difference"] = float(np.median(diff))
    nonzero = diff[diff != 0]
    if nonzero.size == 0:
        return {**result, "statistic": None, "p_value": 1.0, "rank_biserial": 0.0}
    test = stats.wilcoxon(per["plain"], per["ratings"], zero_method="wilcox", alternative="two-sided")
    ranks = stats.rankdata(np.abs(nonzero))
    plus, minus = ranks[nonzero > 0].sum(), ranks[nonzero < 0].sum()
    return {
        **result,
        "statistic": float(test.statistic),
        "p_value": float(test.pvalue),
        "rank_biserial": float((plus - minus) / (plus + minus)),
    }


def summarise(scored: pd.DataFrame) -> dict:
    by_condition = scored.groupby("condition")
    per_question = scored.groupby(["question", "condition"])["tau"].mean().unstack()
    return {
        "responses": len(scored),
        "participants": int(scored["participant"].nunique()),
        "accuracy": {
            c: {
                "most_robust": float(g["top_correct"].mean()),
                "least_biased": float(g["bias_correct"].mean()),
                "n": len(g),
            }
            for c, g in by_condition
        },
        "kendall_tau": {"overall": float(scored["tau"].mean()), **{c: float(g["tau"].mean()) for c, g in by_condition}},
        "kendall_tau_per_question": {q: {c: _num(v) for c, v in row.items()} for q, row in per_question.iterrows()},
        "confidence_median": {c: float(g["confidence"].median()) for c, g in by_condition},
        "difficulty": difficulty_test(scored),
    }


def _num(value: float) -> float | None:
    return None if pd.isna(value) else float(value)


def analyze_responses(kit_dir: Path, responses_dir: Path, *, out: Path) -> dict:
    """Write report.md, report.html, summary.json, responses.csv (tidy) and problems.csv to `out`."""
    from causalrate.userstudy.report import write_report

    questionnaire, key, plan = load_kit(kit_dir)
    responses = read_responses(responses_dir, questionnaire=questionnaire, plan=plan)
    if responses.rows.empty:
        raise UserError(
            f"{responses_dir}: no valid response row; problems:\n"
            + "\n".join(f"  {f} {w}: {p}" for f, w, p in responses.problems)
        )
    scored = score_responses(responses.rows, key)
    if scored.empty:
        raise UserError(
            f"{responses_dir}: no question has all its items answered ({', '.join(ITEMS)}); "
            f"{len(responses.problems)} problem(s), the first: "
            + "; ".join(f"{f} {w}: {p}".strip() for f, w, p in responses.problems[:5])
        )
    summary = {**summarise(scored), "problems": len(responses.problems)}
    out.mkdir(parents=True, exist_ok=True)
    responses.rows.to_csv(out / "responses.csv", index=False)
    pd.DataFrame(responses.problems, columns=["file", "where", "problem"]).to_csv(out / "problems.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_report(out, summary=summary, scored=scored, problems=responses.problems, kit=questionnaire["kit"])
    return summary
