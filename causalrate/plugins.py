"""User plugins: modules or files that register their own systems, operators, scores and schemes.

A study's `plugins:` entries are module names (``my_registrations``) or Python files relative to
the YAML file (``my_plugin.py``). `resolve` turns them into what travels with a run: module names
as given, files as absolute paths. `load` imports them — in the main process, in every forecast
worker (local and Ray) and in `card`, `rate` and `export` — once per process.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterable
from contextlib import redirect_stdout
from pathlib import Path

from causalrate.errors import UserError

MODULE_PREFIX = "causalrate_plugin_"  # the module name of an imported plugin file starts with this


def is_file(entry: str) -> bool:
    return entry.endswith(".py") or "/" in entry or "\\" in entry


def resolve(entries: object, *, base_dir: Path, where: Path) -> list[str]:
    """Module names as given, plugin files as absolute paths (relative to base_dir); checks the list's shape."""
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise UserError(f"{where}: plugins: expected a list of module names or .py files")
    return [str((base_dir / e).expanduser().resolve()) if is_file(e) else e for e in entries]


def load(entries: Iterable[str], *, where: object = "plugins") -> None:
    """Import resolved plugin entries; each at most once per process."""
    for entry in entries:
        if is_file(entry) and module_name(entry) not in sys.modules and not Path(entry).is_file():
            raise UserError(f"{where}: plugins: no file {entry}")
        try:
            with redirect_stdout(sys.stderr):  # what it prints at import: stdout is the command's answer
                _import_file(Path(entry)) if is_file(entry) else importlib.import_module(entry)
        except UserError:
            raise
        except (Exception, SystemExit) as exc:  # sys.exit() at import is no finished run: exit 2 naming the file
            raise UserError(f"{where}: plugins: cannot import {entry!r}: {type(exc).__name__}: {exc}") from None


def module_name(entry: str) -> str:
    """The name a resolved entry is imported under: a module's own, or a plugin file's derived from its path."""
    if not is_file(entry):
        return entry
    path = Path(entry)
    return f"{MODULE_PREFIX}{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"


def _import_file(path: Path) -> None:
    """Import a plugin file under a name derived from its full path (two `plugin.py` files stay apart)."""
    name = module_name(str(path))
    if name in sys.modules:
        return
    if not path.is_file():
        raise UserError(f"plugins: no file {path}")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # registered before running it: dataclasses and pickling look it up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
