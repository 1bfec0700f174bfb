"""User-facing errors: anything the user can fix is a UserError (exit code 2)."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's config, data or command line.

    The CLI prints the message (no traceback) and exits with code 2. Messages
    name the file, the field and what was expected.
    """

    exit_code = 2
