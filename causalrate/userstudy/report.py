"""The user-study report: Markdown and a self-contained HTML page with two figures."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pandas as pd

from causalrate.report import mpl
from causalrate.report.figures import PALETTE
from causalrate.report.mpl import plt
from causalrate.report.templating import fmt

CONDITION_NAMES = {"plain": "without ratings", "ratings": "with ratings"}


def _figures(scored: pd.DataFrame) -> dict[str, bytes]:
    conditions = [c for c in CONDITION_NAMES if c in set(scored["condition"])]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    width = 0.38
    for i, (column, name) in enumerate(
        (("top_correct", "most robust picked"), ("bias_correct", "least biased picked"))
    ):
        values = [scored[scored["condition"] == c][column].mean() for c in conditions]
        ax.bar(np.arange(len(conditions)) + i * width, values, width, label=name, color=PALETTE[i])
    ax.set_xticks(np.arange(len(conditions)) + width / 2, [CONDITION_NAMES[c] for c in conditions])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share agreeing with causalrate")
    ax.legend(frameon=False, fontsize=8)
    accuracy = mpl.png(fig)
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.boxplot(
        [scored[scored["condition"] == c]["difficulty"] for c in conditions],
        tick_labels=[CONDITION_NAMES[c] for c in conditions],
    )
    ax.set_ylabel("difficulty (1 = very easy, 5 = very difficult)")
    ax.set_ylim(0.5, 5.5)
    return {"accuracy": accuracy, "difficulty": mpl.png(fig)}


def markdown(summary: dict, problems: list[tuple[str, str, str]], kit: str) -> str:
    d = summary["difficulty"]
    lines = [
        f"# User study — {kit}",
        "",
        f"{summary['participants']} participants, {summary['responses']} answered questions.",
        "",
        "## Do participants' robustness judgments agree with causalrate?",
        "",
        "| condition | most robust picked right | least biased picked right | Kendall's tau (ranking) | answers |",
        "|---|---|---|---|---|",
    ]
    for condition, acc in summary["accuracy"].items():
        tau = summary["kendall_tau"][condition]
        cells = [CONDITION_NAMES[condition], f"{acc['most_robust']:.2f}", f"{acc['least_biased']:.2f}", f"{tau:.2f}"]
        lines.append(f"| {' | '.join(cells)} | {acc['n']} |")
    lines += [
        "",
        "Kendall's tau between participants' rankings and causalrate's, over all answers: "
        f"{summary['kendall_tau']['overall']:.2f}.",
        "",
        "| question | tau without ratings | tau with ratings |",
        "|---|---|---|",
        *[
            f"| {q} | {fmt(t.get('plain'), 2)} | {fmt(t.get('ratings'), 2)} |"
            for q, t in summary["kendall_tau_per_question"].items()
        ],
        "",
        "## Is it easier to judge with ratings?",
        "",
        f"Median difficulty without ratings {fmt(d['median_plain'], 3)}, with ratings {fmt(d['median_ratings'], 3)} "
        f"(1 = very easy, 5 = very difficult; per participant, mean over their questions).",
        f"Paired Wilcoxon signed-rank test over {d['participants']} participants: W = {fmt(d.get('statistic'), 3)}, "
        f"p = {fmt(d.get('p_value'), 3)}; matched-pairs rank-biserial correlation {fmt(d.get('rank_biserial'), 3)} "
        "(positive: harder without ratings).",
        "",
        "Median confidence: "
        + ", ".join(f"{CONDITION_NAMES[c]} {v:g}" for c, v in summary["confidence_median"].items())
        + ".",
        "",
        "## Problems in the response files",
        "",
    ]
    if problems:
        lines += ["| file | where | problem |", "|---|---|---|", *[f"| {f} | {w} | {p} |" for f, w, p in problems]]
    else:
        lines.append("None: every response row was valid and complete.")
    return "\n".join(lines) + "\n"


def write_report(out: Path, *, summary: dict, scored: pd.DataFrame, problems: list, kit: str) -> None:
    text = markdown(summary, problems, kit)
    pngs = _figures(scored)
    for name, png in pngs.items():
        (out / f"{name}.png").write_bytes(png)
    md = text.replace("## Is it easier", "![Agreement per condition](accuracy.png)\n\n## Is it easier", 1)
    md = md.replace("## Problems", "![Difficulty per condition](difficulty.png)\n\n## Problems", 1)
    (out / "report.md").write_text(md, encoding="utf-8")
    from causalrate.userstudy.form import TEMPLATES

    images = {name: "data:image/png;base64," + base64.b64encode(png).decode() for name, png in pngs.items()}
    page = TEMPLATES.get_template("report.html.j2").render(
        kit=kit, summary=summary, problems=problems, images=images, names=CONDITION_NAMES, fmt=fmt
    )
    (out / "report.html").write_text(page, encoding="utf-8")
