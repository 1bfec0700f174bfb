"""Plugin contracts: the facts a registered entry declares, checked when it registers.

Each registry is given the facts its entries declare, as types (`Literal` for a closed set of
words, `bool`, `str | None`, ...), read from the base class's annotations. `Registry.register`
validates every fact of a new entry (pydantic, strict: a bool is a bool) and the registry's own
consistency check, before the entry is stored; a violation is a ContractError (a UserError, exit
code 2) naming the entry, its class and file, the fact, its value and what is allowed. A plugin
listed under `plugins:` therefore fails when it is imported, not by a silently changed rating.

Outputs are checked where they cross into causalrate: score frames in score.scores.score_all,
operator outputs in perturb.suite.Perturbation.apply (as systems.Prediction.of does for forecasts).
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, redirect_stdout
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter, ValidationError

from causalrate.errors import UserError

log = logging.getLogger(__name__)
Facts = dict[str, Any]  # fact name -> its type


class ContractError(UserError):
    """A registered entry (a plugin's or a built-in) breaks its registry's contract (exit code 2)."""


def facts_of(base: type, *names: str) -> Facts:
    """The types `base` annotates `names` with (ClassVar unwrapped): the facts every entry declares."""
    hints = get_type_hints(base)
    facts = {}
    for name in names:
        hint = hints[name]
        facts[name] = get_args(hint)[0] if get_origin(hint) is ClassVar else hint
    return facts


def describe(entry: object) -> str:
    """Where an entry comes from: its class or function, and its file."""
    target = getattr(entry, "fn", entry)  # a Metric names its function
    if not hasattr(target, "__qualname__"):
        target = type(target)
    module = sys.modules.get(getattr(target, "__module__", ""), None)
    where = getattr(module, "__file__", None) or getattr(target, "__module__", "?")
    return f"{target.__qualname__} in {where}"


def allowed(annotation: Any) -> str:
    """The values a fact may take, in words."""
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(v) for v in get_args(annotation))
    words = [a for a in get_args(annotation) if a is not type(None)]
    if len(words) < len(get_args(annotation)) and all(get_origin(a) is Literal for a in words):  # Literal | None
        return "one of " + ", ".join(repr(v) for a in words for v in get_args(a)) + " or None"
    if annotation is bool:
        return "True or False (a bool)"
    return "a value of type " + repr(annotation).replace("typing.", "")


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation)


def check_facts(kind: str, name: str, entry: object, facts: Facts) -> None:
    """Every declared fact of `entry` has its type; else ContractError naming the entry, fact and allowed values.
    A fact that is a property (decided per instance, e.g. by the system's settings) is not checked here."""
    for fact, annotation in facts.items():
        value = getattr(entry, fact, None)
        if isinstance(value, property):
            continue
        try:
            _adapter(annotation).validate_python(value, strict=True)
        except ValidationError:
            problem = f"{fact} = {value!r} is not allowed; expected {allowed(annotation)}"
            raise ContractError(f"{kind} {name!r} ({describe(entry)}): {problem}") from None


def violation(kind: str, name: str, entry: object, problem: str) -> ContractError:
    return ContractError(f"{kind} {name!r} ({describe(entry)}): {problem}")


MESSAGE_LIMIT = 2000  # an exception's own text is cut to this many characters (a page), never a screenful of data


@contextmanager
def guarded(kind: str, name: str, entry: object, call: str) -> Iterator[None]:
    """Run a registered entry's code (a score's compute, an operator's apply, a metric, a scheme's draw): any
    exception it raises is a ContractError naming the entry, its class and file, the call, the exception and the
    line it was raised at, never a bare traceback. A UserError (already a clear answer) passes unchanged; a
    plugin's time limit (see `watched`) is blamed on the plugin, not on a built-in the plugin called; what a
    plugin prints goes to stderr."""
    _running.calls.append(_Call(kind, name, entry, call, time.monotonic()))
    # what a plugin prints goes to stderr: stdout is the command's answer (a path, a listing) that scripts read
    said = redirect_stdout(sys.stderr) if is_plugin(entry) else nullcontext()
    try:
        with said:
            yield
    except UserError:
        raise
    except TimeLimit:
        if not is_plugin(entry):
            raise
        why = f"{call} ran past {_running.limit:g} s in the {_running.where} (as long as it would after forecasting)"
        raise violation(kind, name, entry, why) from None
    except (Exception, SystemExit) as exc:  # sys.exit() in a plugin's code ended the run with exit 0, unwritten
        raise raised(kind, name, entry, call, exc) from None
    finally:
        _running.calls.pop()


class TimeLimit(Exception):
    """Raised inside a plugin's code that runs past `watched`'s limit (turned into a ContractError naming it)."""


@dataclass(frozen=True)
class _Call:
    kind: str
    name: str
    entry: object
    call: str
    started: float


class _Running(threading.local):
    """The registered entries' calls now running in this thread (innermost last), and `watched`'s settings."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.limit = 0.0
        self.where = ""


_running = _Running()


@contextmanager
def watched(where: str, *, limit: float, every: float) -> Iterator[None]:
    """While inside: every `every` seconds, if a plugin's call has run that long, a note on stderr naming it and
    how long it has run; past `limit` seconds, TimeLimit raised inside it (the ContractError names the plugin).
    Built-ins are never stopped. Needs the main thread (SIGALRM); elsewhere it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def look(signum: int, frame: object) -> None:
        call = next((c for c in _running.calls if is_plugin(c.entry)), None)  # the outermost plugin call
        if call is None:
            return
        elapsed = time.monotonic() - call.started
        if elapsed >= limit:
            raise TimeLimit
        if elapsed >= every:
            log.warning(
                "%s: %s %r (%s): %s has run for %.0f s (stopped at %g s)",
                where, call.kind, call.name, describe(call.entry), call.call, elapsed, limit,
            )  # fmt: skip

    _running.limit, _running.where = limit, where
    previous = signal.signal(signal.SIGALRM, look)
    signal.setitimer(signal.ITIMER_REAL, every, every)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def raised(kind: str, name: str, entry: object, call: str, exc: BaseException) -> ContractError:
    """The ContractError for an exception `call` of a registered entry raised (see guarded)."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > MESSAGE_LIMIT:
        text = text[:MESSAGE_LIMIT] + f"… ({len(text) - MESSAGE_LIMIT} more characters)"
    return violation(kind, name, entry, f"{call} raised {text}{at}")


def is_plugin(entry: object) -> bool:
    """Whether an entry was defined outside causalrate (a user's plugin)."""
    target = getattr(entry, "fn", entry)
    if not hasattr(target, "__module__"):
        target = type(target)
    module = getattr(target, "__module__", "") or ""
    return module != "causalrate" and not module.startswith("causalrate.")


Check = Callable[[str, Any], None]
