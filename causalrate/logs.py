"""Messages for the user: library code logs (`logging.getLogger(__name__)`), the command line shows them.

Library code never prints and never changes another library's logging state for good: it logs to its
own module's logger, and quietens a chatty dependency only for the length of a call (`quieter`). The
CLI's `main` calls `configure_logging()` first, which writes the `causalrate` loggers' records to stderr
as ``causalrate: <message>`` (warnings as ``causalrate: warning: <message>``). Used as a library without
it, warnings reach Python's last-resort handler (stderr) and information is dropped.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

LOGGER = "causalrate"


class _Stderr(logging.StreamHandler):
    """A handler on the `sys.stderr` of the moment a record is emitted (pytest's capsys, a redirected stderr)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # StreamHandler.__init__ assigns one: the property always resolves anew
        pass


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        kind = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}
        text = f"causalrate: {kind.get(record.levelno, '')}{record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure_logging() -> logging.Logger:
    """Show the `causalrate` loggers' records (INFO and above) on stderr, prefixed ``causalrate:``; idempotent."""
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        handler = _Stderr()
        handler.setFormatter(_Format())
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger


@contextmanager
def quieter(name: str, level: int) -> Iterator[None]:
    """Raise logger `name`'s level to at least `level` for the block, then restore it as it was."""
    logger = logging.getLogger(name)
    before = logger.level
    if logger.getEffectiveLevel() < level:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)
