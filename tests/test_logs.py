"""Library code logs and leaves other libraries' logging alone; the CLI shows the records as `causalrate: ...`."""

import logging
import re
from pathlib import Path

from causalrate.logs import configure_logging, quieter

PACKAGE = Path(__file__).resolve().parents[1] / "causalrate"


def test_the_cli_handler_writes_to_the_stderr_of_the_moment(capsys):
    """Installed once however often it is called; capsys (which swaps sys.stderr per test) sees every record."""
    logger = configure_logging()
    handlers = len(logger.handlers)
    assert configure_logging() is logger and len(logger.handlers) == handlers
    logging.getLogger("causalrate.study").warning("windows: only %d windows", 12)
    logging.getLogger("causalrate.pipeline").info("naive: 10 forecasts")
    logging.getLogger("causalrate.pipeline").debug("not shown")
    assert capsys.readouterr().err == "causalrate: warning: windows: only 12 windows\ncausalrate: naive: 10 forecasts\n"


def test_quieter_restores_the_level_it_found():
    dowhy = logging.getLogger("dowhy")
    before = dowhy.level
    try:
        dowhy.setLevel(logging.DEBUG)
        with quieter("dowhy", logging.ERROR):
            assert dowhy.level == logging.ERROR
        assert dowhy.level == logging.DEBUG
        dowhy.setLevel(logging.CRITICAL)
        with quieter("dowhy", logging.ERROR):  # already quieter than asked: left as it is
            assert dowhy.level == logging.CRITICAL
        assert dowhy.level == logging.CRITICAL
    finally:
        dowhy.setLevel(before)


def test_library_code_neither_prints_to_stderr_nor_sets_global_logging_state():
    """Only the CLI writes to stderr directly; no module sets a logger's level, configures the root logger or
    changes the process's warning filters (logs.quieter and warnings.catch_warnings restore what they change).
    The forecast stage's workers (forecast/) report through their own channel and are not checked here."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in {"cli.py", "logs.py"} or relative.startswith(("forecast/", "systems/")):
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in (r"file=sys\.stderr", r"sys\.stderr\.write", r"\.setLevel\(", r"basicConfig\("):
            offenders += [f"{relative}: {pattern}" for _ in re.finditer(pattern, text)]
        # a filter outside a catch_warnings block is process-wide
        for match in re.finditer(r"^( *)warnings\.(filterwarnings|simplefilter)\(", text, re.M):
            before = text[: match.start()].splitlines()[-8:]
            if not any("catch_warnings()" in line for line in before):
                offenders.append(f"{relative}: warnings.{match.group(2)} outside catch_warnings")
    assert offenders == []
