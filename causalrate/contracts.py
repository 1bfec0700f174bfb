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
import sys
from collections.abc import Callable
from typing import Any, ClassVar, Literal, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter, ValidationError

from causalrate.errors import UserError

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


Check = Callable[[str, Any], None]
