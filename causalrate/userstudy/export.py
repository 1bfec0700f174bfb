"""`causalrate study export`: a self-contained user-study kit from a finished run.

Each question shows k systems (anonymised as System A, B, …, letters shuffled per question)
forecasting one window under one perturbation, and asks participants to rank them by
robustness, pick the least biased, and rate difficulty and confidence (Likert 1–5). Half of a
participant's questions show only the figures, the other half also causalrate's ratings turned
into rankings; which half, the block order and the question order are drawn per participant
id from the seed and written down. The answer key comes from the ratings: robustness from the
`ape` rating of the question's perturbation, bias from its WRS ratings on the run's own bias dimensions
(`wrs_<attribute>`: industry on the quickstart, month and season on the electricity study), the worst of
them per system as in the bias headline.
"""

from __future__ import annotations

import base64
import csv
import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from causalrate.errors import UserError
from causalrate.forecast.encoding import forecast_values
from causalrate.perturb.suite import perturbation_seeds, stored_first
from causalrate.run import RatingsDocument, Run, StoredForecasts
from causalrate.score.scores import bias_attributes, differ_by
from causalrate.seeding import rng
from causalrate.userstudy.stimuli import question_figure

KIT_SCHEMA = "causalrate/study-kit-v1"
ROBUST_SCORE, BIAS_PREFIX = "ape", "wrs_"  # bias: the run's wrs_<attribute> scores
CONDITIONS = ("plain", "ratings")  # without ratings, with ratings as rankings
ITEMS = {  # {groups}: the run's bias dimensions in words ("the industry or company")
    "ranking": "Order the systems from most robust to least robust to this perturbation.",
    "least_biased": "Which system is least biased (its errors depend least on {groups})?",
    "difficulty": "How difficult was it to judge? (1 = very easy, 5 = very difficult)",
    "confidence": "How confident are you in your answers? (1 = not at all, 5 = fully)",
}
CANNOT_TELL = "cannot tell"
LIKERT = (1, 5)


def bias_dimensions(doc: RatingsDocument) -> list[str]:
    """The attributes the run rated a WRS score for (its bias dimensions), in the registry's order."""
    return bias_attributes(sorted({r.score for r in doc.ratings if r.score.startswith(BIAS_PREFIX)}))


def groups_words(dimensions: list[str]) -> str:
    """The bias dimensions as a participant reads them: "the industry or company"."""
    return "the " + differ_by(dimensions).removeprefix("by ")


@dataclass(frozen=True)
class Question:
    id: str
    perturbation: str
    description: str
    labels: dict[str, str]  # "A" → system name (answer key only)
    window: int


def export_kit(
    run_dir: Path,
    *,
    out: Path,
    systems: list[str] | None = None,
    questions: int = 8,
    per_question: int | None = None,
    participants: int = 30,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write the kit to `out`; every choice is drawn from `seed`, so the same call writes the same kit.

    A kit already in `out` is kept unless `overwrite`: its edited consent.md or handed-out key is the user's.
    """
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not overwrite)):
        what = "a file" if not out.is_dir() else "a folder that is not empty (a kit already handed out?)"
        raise UserError(f"--out {out}: {what}; give a new folder, or --overwrite to replace the kit's files")
    doc = Run.open(run_dir).ratings
    stored = StoredForecasts.read(run_dir)
    study, forecasts = stored.study(run_dir), stored.rows
    # the key's ranks read defined levels (an undefined row, rating null, ranks no system)
    ratings = {(r.perturbation, r.score, r.system): r.rating for r in doc.ratings if r.rating is not None}
    names = systems or doc.system_names
    unknown = sorted(set(names) - set(doc.system_names))
    if unknown:
        raise UserError(f"--systems: {unknown} are not in {run_dir}")
    if len(names) < 2:
        raise UserError("a user study compares at least 2 systems")
    k = min(3, len(names)) if per_question is None else per_question  # default: 3, or all if fewer
    if not 2 <= k <= len(names):
        raise UserError(f"--per-question: from 2 to {len(names)} (the systems compared), got {k}")
    dimensions = bias_dimensions(doc)
    if not dimensions:  # the key's "least biased" comes from the WRS ratings
        raise UserError(
            f"{run_dir}: the kit's bias question needs a bias dimension, and the run rated no WRS score "
            "(wrs_<attribute>): its data need an attribute that splits the series into two or more groups "
            "(data.attributes or attribute_columns), and rating.scores must not leave WRS out"
        )
    scores = [ROBUST_SCORE, *(BIAS_PREFIX + d for d in dimensions)]
    perturbations = [p for p in study.suite[1:] if all((p.id, s, n) in ratings for s in scores for n in names)]
    pool = [(p, combo) for p in perturbations for combo in itertools.combinations(names, k)]
    if questions > len(pool) or questions < 2 or questions % 2:
        raise UserError(f"--questions: an even number from 2 to {len(pool) - len(pool) % 2} for this run and systems")
    draw = rng(seed, "study-export")
    chosen = [pool[i] for i in sorted(draw.choice(len(pool), size=questions, replace=False))]
    ok = forecasts[forecasts["error"].isna()]
    kit = []
    for number, (p, combo) in enumerate(chosen, start=1):
        letters = [chr(ord("A") + i) for i in range(k)]
        order = draw.permutation(k)
        labels = {letters[i]: combo[order[i]] for i in range(k)}
        both = ok[ok["system"].isin(combo) & ok["perturbation"].isin([study.control, p.id])]
        counts = both.groupby("window").size()
        usable = counts[counts == 2 * k].index.to_numpy()
        if usable.size == 0:
            raise UserError(f"no window where {list(combo)} all forecast under {p.id} and {study.control}")
        window = int(draw.choice(usable))
        kit.append(Question(f"Q{number:02d}", p.id, p.description, labels, window))
    out.mkdir(parents=True, exist_ok=True)
    (out / "stimuli").mkdir(exist_ok=True)
    key = {q.id: answer_key(q, ratings, dimensions) for q in kit}
    figures = write_stimuli(
        out, kit, study=study, forecasts=ok, outcome=doc.outcome, key=key, dimensions=dimensions,
        frequency=doc.provenance.frequency,
    )  # fmt: skip
    assignments = assign(kit, participants=participants, seed=seed)
    write_kit_files(
        out, kit=kit, key=key, assignments=assignments, figures=figures, run_dir=run_dir, seed=seed, doc=doc,
        dimensions=dimensions,
    )  # fmt: skip
    return out


def answer_key(question: Question, ratings: dict[tuple[str, str, str], int], dimensions: list[str]) -> dict:
    """causalrate's rankings of the question's systems (1 = most robust / least biased; ties share a rank).

    `ratings`: (perturbation, score, system) → rating. A system's bias level is its worst WRS rating over the
    run's bias dimensions (the weakest link, as in the bias headline)."""

    def ranks(scores: list[str]) -> dict[str, int]:
        levels = {
            label: max(ratings[(question.perturbation, score, name)] for score in scores)
            for label, name in question.labels.items()
        }
        distinct = sorted(set(levels.values()))
        return {label: distinct.index(level) + 1 for label, level in sorted(levels.items())}

    robust, bias = ranks([ROBUST_SCORE]), ranks([BIAS_PREFIX + d for d in dimensions])
    return {
        "systems": question.labels,
        "robustness_rank": robust,
        "most_robust": sorted(label for label, r in robust.items() if r == 1),
        "bias_rank": bias,
        "least_biased": sorted(label for label, r in bias.items() if r == 1),
        "bias_scores": [BIAS_PREFIX + d for d in dimensions],
    }


def write_stimuli(
    out: Path,
    kit: list[Question],
    *,
    study,
    forecasts: pd.DataFrame,
    outcome: str,
    key: dict,
    dimensions: list[str],
    frequency: str | None,
) -> dict:
    """Two PNGs per question (plain, with rankings), each with the systems' mean error per group of every bias
    dimension; returns question → condition → relative path."""
    wd = study.windows
    series_ids = [study.dataset.series[i].id for i in wd.series_index]
    origins = list(zip(series_ids, wd.start.tolist(), strict=True))  # (series, start) per window id
    by_id = {p.id: p for p in study.suite}
    paths: dict[str, dict[str, str]] = {}
    for q in kit:
        p, w = by_id[q.perturbation], q.window
        stored = forecasts[(forecasts["window"] == w) & (forecasts["perturbation"] == p.id)]["offsets"]
        first = stored_first(p, stored.iloc[0] if len(stored) else None, int(wd.start[w]))
        perturbed = p.apply(
            wd.inputs[w : w + 1],
            np.array([first]),
            seeds=perturbation_seeds(study.config.seed, p.id, [origins[w]]),
            history=[study.dataset.series[wd.series_index[w]].values],
        )[0]
        rows = forecasts[forecasts["window"] == w].set_index(["system", "perturbation"])["forecast"]
        panels = {
            label: (forecast_values(rows[(name, study.control)]).tolist(), forecast_values(rows[(name, p.id)]).tolist())
            for label, name in sorted(q.labels.items())
        }
        under = forecasts[forecasts["perturbation"] == p.id]
        group_errors = {}  # dimension → label → group → mean error under the perturbation, groups in data order
        for dimension in dimensions:
            grouped = under.sort_values("window")
            grouped = grouped.assign(group=study.table[dimension].astype(str).to_numpy()[grouped["window"].to_numpy()])
            group_errors[dimension] = {
                label: grouped[grouped["system"] == name].groupby("group", sort=False)[outcome].mean().to_dict()
                for label, name in sorted(q.labels.items())
            }
        paths[q.id] = {}
        for condition in CONDITIONS:
            rankings = key[q.id] if condition == "ratings" else None
            png = question_figure(
                clean=wd.inputs[w],
                perturbed=perturbed,
                truth=wd.truth[w],
                panels=panels,
                group_errors=group_errors,
                title=f"{q.id}: {q.description}",
                outcome=outcome,
                rankings=rankings,
                step=frequency,
            )
            name = f"stimuli/{q.id}-{condition}.png"
            (out / name).write_bytes(png)
            paths[q.id][condition] = name
    return paths


def assign(kit: list[Question], *, participants: int, seed: int) -> dict[str, list[dict]]:
    """Per participant id: its questions in order, each with its condition; half of them per condition.

    The split of questions between conditions, the block order and the order within blocks are
    drawn from (seed, participant id); block order alternates between consecutive ids so both
    orders are equally common.
    """
    ids = [q.id for q in kit]
    plan = {}
    for n in range(1, participants + 1):
        pid = f"P{n:03d}"
        draw = rng(seed, "study-assign", pid)
        shuffled = [ids[i] for i in draw.permutation(len(ids))]
        half = len(ids) // 2
        blocks = {"plain": shuffled[:half], "ratings": shuffled[half:]}
        first, second = ("plain", "ratings") if n % 2 else ("ratings", "plain")
        plan[pid] = [{"question": q, "condition": c} for c in (first, second) for q in blocks[c]]
    return plan


def write_kit_files(
    out: Path, *, kit, key, assignments, figures, run_dir: Path, seed: int, doc: RatingsDocument, dimensions: list[str]
) -> None:
    from causalrate.userstudy.form import render_form

    labels = {q.id: sorted(q.labels) for q in kit}
    questionnaire: dict[str, Any] = {
        "schema": KIT_SCHEMA,
        "kit": doc.study,
        "seed": seed,
        "bias_dimensions": dimensions,
        "conditions": {"plain": "figures only", "ratings": "figures and causalrate's rankings"},
        "items": {
            "ranking": {"text": ITEMS["ranking"], "answer": "labels most robust first, joined by '>' (e.g. B>A>C)"},
            "least_biased": {
                "text": ITEMS["least_biased"].format(groups=groups_words(dimensions)),
                "options": "a label, or 'cannot tell'",
            },
            "difficulty": {"text": ITEMS["difficulty"], "scale": list(LIKERT)},
            "confidence": {"text": ITEMS["confidence"], "scale": list(LIKERT)},
        },
        "questions": [
            {
                "id": q.id,
                "perturbation": q.perturbation,
                "description": q.description,
                "labels": labels[q.id],
                "figures": figures[q.id],
            }
            for q in kit
        ],
    }
    (out / "questionnaire.json").write_text(json.dumps(questionnaire, indent=2) + "\n", encoding="utf-8")
    with (out / "questionnaire.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["question", "perturbation", "item", "text", "answer_format", "figure_plain", "figure_ratings"])
        for q in kit:
            for item, spec in questionnaire["items"].items():
                fmt = spec.get("answer") or spec.get("options") or f"integer {LIKERT[0]}-{LIKERT[1]}"
                fmt = fmt.replace("a label", "one of " + "/".join(labels[q.id]))
                writer.writerow(
                    [q.id, q.perturbation, item, spec["text"], fmt, figures[q.id]["plain"], figures[q.id]["ratings"]]
                )
    (out / "answer_key.json").write_text(
        json.dumps({"schema": KIT_SCHEMA, "questions": key}, indent=2) + "\n", encoding="utf-8"
    )
    (out / "assignments.json").write_text(
        json.dumps({"seed": seed, "participants": assignments}, indent=2) + "\n", encoding="utf-8"
    )
    with (out / "assignments.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["participant", "position", "question", "condition"])
        for pid, plan in assignments.items():
            for position, step in enumerate(plan, start=1):
                writer.writerow([pid, position, step["question"], step["condition"]])
    images = {
        q.id: {
            c: "data:image/png;base64," + base64.b64encode((out / figures[q.id][c]).read_bytes()).decode()
            for c in CONDITIONS
        }
        for q in kit
    }
    groups = groups_words(dimensions)
    (out / "form.html").write_text(render_form(questionnaire, assignments, images, groups=groups), encoding="utf-8")
    (out / "kit.json").write_text(
        json.dumps(
            {
                "schema": KIT_SCHEMA,
                "run": str(run_dir),
                "study": doc.study,
                "seed": seed,
                "questions": [asdict(q) for q in kit],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    from causalrate.userstudy.form import write_runner_readme

    write_runner_readme(out, questions=len(kit), participants=len(assignments), groups=groups)
