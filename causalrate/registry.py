"""A tiny name → class registry, shared by perturbations, systems, metrics, scores and schemes.

Users add their own entries without editing causalrate::

    from causalrate.systems import SYSTEMS, System

    @SYSTEMS.register("my-model")
    class MyModel(System): ...

and list the module under ``plugins:`` in the study YAML so it is imported first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from causalrate.contracts import Facts, check_facts, describe, violation
from causalrate.errors import UserError

T = TypeVar("T")


class UnknownName(UserError, KeyError):
    """A name no registry entry has (exit code 2): a typo, or a plugin that was not imported."""

    __str__ = BaseException.__str__  # KeyError would quote the message


class Registry(Generic[T]):
    """Named entries of one kind, in registration order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._hooks: list[Callable[[str, T], None]] = []
        self.facts: Facts = {}  # the facts every entry declares, with their types (contracts.facts_of)
        self._checks: list[Callable[[str, T], None]] = []

    def contract(self, facts: Facts, check: Callable[[str, T], None] | None = None) -> None:
        """The facts each entry declares (checked by type) and an optional check(name, entry) of how they fit
        together; both run, on the entries already registered and on every later one, before it is stored.
        A violation raises contracts.ContractError (a UserError: exit code 2) naming the entry."""
        self.facts = facts
        self._checks = [] if check is None else [check]
        for name, entry in self._entries.items():
            self.validate(name, entry)

    def validate(self, name: str, entry: T) -> None:
        """Raise ContractError if `entry` breaks this registry's contract."""
        check_facts(self.kind, name, entry, self.facts)
        for check in self._checks:
            check(name, entry)

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(entry: T) -> T:
            if name in self._entries:
                first = self._entries[name]
                raise violation(
                    self.kind, name, entry, f"the name is already registered by {describe(first)}; choose another name"
                )
            self.validate(name, entry)
            self._entries[name] = entry
            for hook in self._hooks:
                hook(name, entry)
            return entry

        return decorator

    def on_register(self, hook: Callable[[str, T], None]) -> None:
        """Call hook(name, entry) for every entry registered from now on (e.g. a scheme's scores)."""
        self._hooks.append(hook)

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(
                f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)} "
                "(is the plugin that registers it listed under plugins:?)"
            ) from None

    def known(self, names: list[str]) -> list[str]:
        """The names, if every one is registered; else ValueError (for pydantic validators)."""
        for name in names:
            if name not in self._entries:
                raise ValueError(f"unknown {self.kind} {name!r}; expected one of {self.names()}")
        return names

    def name_of(self, entry: T) -> str:
        """The name an entry was registered under."""
        return next(name for name, e in self._entries.items() if e is entry)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries.items())

    def names(self) -> list[str]:
        return list(self._entries)
