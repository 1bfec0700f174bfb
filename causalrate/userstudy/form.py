"""The kit's participant form (one static HTML file that works offline) and the study runner's README."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

TEMPLATES = Environment(loader=PackageLoader("causalrate.userstudy", "templates"), autoescape=select_autoescape())


def render_form(
    questionnaire: dict, assignments: dict[str, list[dict]], images: dict[str, dict[str, str]], *, groups: str
) -> str:
    """Everything inline (figures as data URIs): the participant opens the file, answers, downloads CSV or JSON.
    `groups`: the run's bias dimensions in words ("the industry or company")."""
    return TEMPLATES.get_template("form.html.j2").render(
        kit=questionnaire["kit"], questionnaire=questionnaire, assignments=assignments, images=images, groups=groups
    )


def write_runner_readme(out: Path, *, questions: int, participants: int, groups: str) -> None:
    (out / "README.md").write_text(
        TEMPLATES.get_template("README.md.j2").render(questions=questions, participants=participants, groups=groups),
        encoding="utf-8",
    )
    (out / "consent.md").write_text(TEMPLATES.get_template("consent.md.j2").render(), encoding="utf-8")
