"""User-facing errors: anything the user can fix is a UserError (exit code 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable
    from pathlib import Path

    from pydantic import ValidationError


class UserError(Exception):
    """A mistake in the user's config, data or command line.

    The CLI prints the message (no traceback) and exits with code 2. Messages
    name the file, the field and what was expected.
    """

    exit_code = 2


class SystemsFailed(Exception):
    """Every forecast of at least one system failed (exit code 3): its ratings would only rate failures.

    Raised after the run's outputs are written, so nothing is lost; `--allow-failed-systems` accepts it.
    """

    exit_code = 3

    def __init__(self, failed: dict[str, str]) -> None:
        lines = "\n".join(f"  - {name}: {error[:500]}" for name, error in failed.items())
        super().__init__(
            f"every forecast of {len(failed)} system(s) failed:\n{lines}\n"
            "The run's files are written; fix the system(s), or pass --allow-failed-systems to accept this."
        )


def format_validation_error(path: Path | Traversable, exc: ValidationError) -> str:
    """One line per problem: file, dotted field, what was expected, what was given."""
    lines = [f"{path}: invalid config"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; docs/reference.md lists the allowed keys)"
        given = err.get("input")
        shown = "" if err["type"] in ("missing", "extra_forbidden") or isinstance(given, dict) else f" (got {given!r})"
        lines.append(cut(f"  {field}: {msg}{shown}", 300))
        if len(lines) > 40:  # a page: the first problems are enough to start fixing
            lines.append(f"  ... and {len(exc.errors()) - 40} more")
            break
    return "\n".join(lines)


def cut(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note of how many more there were (a message stays a page)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"
