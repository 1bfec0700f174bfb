"""User plugins: modules or files that register their own systems, operators, scores and schemes.

A study's `plugins:` entries are module names (``my_registrations``) or Python files relative to
the YAML file (``my_plugin.py``). `resolve` turns them into what travels with a run: module names
as given, files as absolute paths. `load` imports them — in the main process, in every forecast
worker (local and Ray) and in `card`, `rate` and `export` — once per process.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterable
from contextlib import redirect_stdout
from pathlib import Path
from types import ModuleType

from causalrate.errors import UserError

MODULE_PREFIX = "causalrate_plugin_"  # the module name of an imported plugin file starts with this


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles a module from its source on every import: no __pycache__ file read or written. Python checks those
    by the source's mtime in whole seconds and its size only, so a model's neighbour module edited to the same
    size within a second of its last import ran its old code (while the forecast cache, keyed by the files'
    content, said new)."""

    def path_stats(self, path: str) -> dict:
        raise OSError("no byte-code cache for a model's or plugin's own folder")  # SourceLoader: compile the source


_SOURCE_ONLY: set[Path] = set()  # the folders of model and plugin files (import_file): their modules, by source


def _source_only_finder(entry: str) -> importlib.machinery.FileFinder:
    """The finder of a sys.path entry (or a package's folder) within a model's or plugin's own folder."""
    if not entry or not any(Path(entry).is_relative_to(folder) for folder in _SOURCE_ONLY):
        raise ImportError(entry)  # not ours: the next hook's (Python's own)
    return importlib.machinery.FileFinder(
        entry,
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES),
        (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
    )


sys.path_hooks.insert(0, _source_only_finder)


def is_file(entry: str) -> bool:
    return entry.endswith(".py") or "/" in entry or "\\" in entry


def resolve(entries: object, *, base_dir: Path, where: Path) -> list[str]:
    """Module names as given, plugin files as absolute paths (relative to base_dir); checks the list's shape."""
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise UserError(f"{where}: plugins: expected a list of module names or .py files")
    return [str((base_dir / e).expanduser().resolve()) if is_file(e) else e for e in entries]


def load(entries: Iterable[str], *, where: object = "plugins") -> None:
    """Import resolved plugin entries; each at most once per process (what it registers is registered once)."""
    for entry in entries:
        if is_file(entry) and module_name(entry) not in sys.modules and not Path(entry).is_file():
            raise UserError(f"{where}: plugins: no file {entry}")
        try:
            with redirect_stdout(sys.stderr):  # what it prints at import: stdout is the command's answer
                import_file(Path(entry), MODULE_PREFIX) if is_file(entry) else importlib.import_module(entry)
        except UserError:
            raise
        except (Exception, SystemExit) as exc:  # sys.exit() at import is no finished run: exit 2 naming the file
            raise UserError(f"{where}: plugins: cannot import {entry!r}: {type(exc).__name__}: {exc}") from None


def module_name(entry: str) -> str:
    """The name a resolved entry is imported under: a module's own, or a plugin file's derived from its path."""
    return _file_module_name(Path(entry), MODULE_PREFIX) if is_file(entry) else entry


def _file_module_name(path: Path, prefix: str) -> str:
    """prefix, stem and a hash of the full path: two `plugin.py` (or `model.py`) files in two folders stay apart."""
    return f"{prefix}{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"


def import_file(path: Path, prefix: str, *, per_content: bool = False) -> ModuleType:
    """The module of a .py file (a plugin's, a python system's), run from the very bytes read and hashed here
    (their sha256 kept as its `__causalrate_sha256__`, which the forecast cache and the memo key on), compiled
    here: never a __pycache__ file, which Python checks by the source's mtime in whole seconds and size only (an
    edit of the same size within a second ran the old code). Imported once per path, or with `per_content` once
    per (path, content): an edited file is then a new module. Its folder joins sys.path (a helper module beside
    it imports without PYTHONPATH), and what is imported from it is compiled from its source, never a __pycache__
    file (`_SourceOnlyLoader`). FileNotFoundError if there is no such file."""
    name = _file_module_name(path, prefix)
    if not per_content and name in sys.modules:
        return sys.modules[name]
    if not path.is_file():
        raise FileNotFoundError(path)
    source = path.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    name += f"_{digest[:12]}" if per_content else ""
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None:
            raise FileNotFoundError(path)
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__causalrate_sha256__"] = digest
        sys.modules[name] = module  # registered before running it: dataclasses and pickling look it up
        _SOURCE_ONLY.add(path.parent)
        sys.path_importer_cache.pop(str(path.parent), None)  # a finder made before it was ours
        if str(path.parent) not in sys.path:
            sys.path.append(str(path.parent))
        try:
            exec(compile(source, str(path), "exec"), module.__dict__)
        except BaseException:
            del sys.modules[name]
            raise
    return module


def source_digest(module: ModuleType | None) -> str | None:
    """sha256 of a module's source: of the bytes it ran for a file `import_file` loaded (an edit after the import
    changes nothing that runs), of its file now for another; None for a module without a file."""
    digest = getattr(module, "__causalrate_sha256__", None)
    file = getattr(module, "__file__", None)
    if digest is None and file and Path(file).is_file():
        digest = hashlib.sha256(Path(file).read_bytes()).hexdigest()
    return digest
