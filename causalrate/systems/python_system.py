"""The `python` system: a user callable ``fn(inputs[batch, n], horizon) -> [batch, horizon]``.

With ``quantiles: [0.1, 0.5, 0.9]`` it returns [batch, level, horizon] (the 0.5 row is the point forecast),
scored by CRPS, WQL and interval coverage at those levels. With ``context: true`` it is called
``fn(inputs, horizon, context)``, context being a dict with the data's ``frequency`` and ``season``, each
row's ``input_dates`` and ``truth_dates`` (datetime64 [batch, n] and [batch, horizon]) and ``attributes``
(one dict per row); they then enter the forecast cache's key. ``files:`` lists what the forecasts depend on
(a trained model, weights): their content enters the cache key (retraining re-forecasts); as a mapping,
``files: {model: trained/}``, the function also gets ``files={"model": Path}``. ``depends_on:`` is its old
name (a list), still read, with a note.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import io
import logging
import sys
import sysconfig
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TextIO

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from causalrate.errors import UserError
from causalrate.plugins import import_file
from causalrate.redact import scrub
from causalrate.systems.base import SYSTEMS, Batch, Prediction, System, quantile_levels, real_numbers

log = logging.getLogger(__name__)
LOCAL_SOURCES_LIMIT = 500  # .py files fingerprinted by default; a larger local package keeps only the module's own


class PythonSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    function: str = Field(pattern=r"^[^:]+:[A-Za-z_][A-Za-z0-9_]*$", description="module:function or file.py:function")
    accepts_nan: bool = Field(False, description="false: missing values are imputed before the call")
    depends_on: list[str] = Field(
        default_factory=list, description="deprecated: the old name of files: as a list (read as such, with a note)"
    )
    version: str | None = Field(None, description="a version of the model (e.g. a training date): enters the cache key")
    context: bool = Field(False, description="true: called fn(inputs, horizon, context) with frequency and dates")
    files: dict[str, str] | list[str] = Field(
        default_factory=dict,
        description="files or folders (relative to the YAML) the forecasts depend on, e.g. a trained model: their "
        "content enters the cache key (and a worker builds the system again when one changes); given as "
        "name → path, the function also gets them as files={name: Path}",
    )
    quantiles: list[float] | None = Field(
        None, description="levels (with 0.5) of the quantiles fn returns as [batch, level, horizon]; null: points"
    )

    _levels = field_validator("quantiles")(classmethod(lambda cls, v: quantile_levels(v)))


class _Scrubbed(io.TextIOBase):
    """A text stream that writes what it is given to `target` at once, scrubbed of every secret: a function
    that prints and then dies (os._exit) still leaves its last words, and never a key."""

    def __init__(self, target: TextIO) -> None:
        self.target = target

    def write(self, text: str) -> int:
        self.target.write(scrub(text))
        self.target.flush()
        return len(text)


@SYSTEMS.register("python")
class PythonFunction(System):
    """Wraps a batched numpy function; NaN marks missing values if it accepts them."""

    Settings = PythonSettings
    settings: PythonSettings
    family = "user model"  # a function may hold any kind of model: the YAML's `family:` says which

    def __init__(self, settings: PythonSettings, *, base_dir: Path) -> None:
        super().__init__(settings, base_dir=base_dir)
        self.accepts_nan = settings.accepts_nan
        self.wants_context = settings.context
        if settings.quantiles:
            self.quantile_levels = tuple(settings.quantiles)
            self.output = "quantiles"
        self.function = load_callable(settings.function, base_dir=base_dir)
        self._files: dict | None = None
        self.files, self.unnamed = declared_files(settings, base_dir)

    def identity(self) -> dict:
        """What the forecasts depend on, so that a change of any of it invalidates cached forecasts: the
        function's module source (for a file, the hash of the bytes loaded, never a module looked up by name),
        the .py files of its local package (sibling modules), and the content of its `files:`.
        """
        module = inspect.getmodule(self.function)
        digest = getattr(module, "__causalrate_sha256__", None)
        if digest is None:
            try:
                source = inspect.getsource(module)  # type: ignore[arg-type]  # None: TypeError, handled
            except (OSError, TypeError):
                source = getattr(self.function, "__qualname__", repr(self.function))
            digest = hashlib.sha256(source.encode()).hexdigest()
        if self._files is None:  # read once per run, not per perturbation
            self._files = {  # "depends_on": the unnamed files' key, named as before so that cached forecasts hold
                "package": files_digest(local_sources(module)),
                "depends_on": files_digest(self.unnamed) if self.unnamed else None,
            }
        files = {name: files_digest([path]) for name, path in self.files.items()}  # afresh: a retrained model is new
        return {**super().identity(), "source": digest, **self._files} | ({"files": files} if files else {})

    def sources(self) -> tuple[Path, ...]:
        """Its function's file and its `files:` (from the settings alone: an environment's proxy asks too)."""
        settings: PythonSettings = self.settings  # type: ignore[assignment]  # the proxy holds these settings
        where = settings.function.rpartition(":")[0]
        named, unnamed = declared_files(settings, self.base_dir)
        return (*((self.base_dir / where,) if where.endswith(".py") else ()), *named.values(), *unnamed)

    def check(self, dataset) -> None:
        if self.settings.depends_on:
            note = (
                f"system type python: depends_on is the old name of files: (read as files: {self.settings.depends_on});"
                " write files: instead"
            )
            warnings.warn(note, DeprecationWarning, stacklevel=2)
            log.warning(note)
        absent = [f"{name}: {path}" for name, path in self.files.items() if not path.exists()]
        absent += [str(path) for path in self.unnamed if not path.exists()]
        if absent:
            raise UserError(f"system type python: files: no such file or folder: {'; '.join(absent)}")

    def forecast(self, batch: Batch) -> np.ndarray | Prediction:
        args = (batch.inputs.copy(), batch.horizon) + ((context_of(batch),) if self.settings.context else ())
        printed = _Scrubbed(sys.stderr)  # what the function prints reaches the console scrubbed of every secret
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            out = self.function(*args, **({"files": self.files} if self.files else {}))
        if self.quantile_levels:  # else checked as real numbers by Prediction.of
            values = real_numbers(out, "the function's quantiles")
            return Prediction.of_quantiles(values, self.quantile_levels, rows=len(batch.inputs), horizon=batch.horizon)
        return out


def declared_files(settings: PythonSettings, base_dir: Path) -> tuple[dict[str, Path], list[Path]]:
    """Its `files:` resolved: those named (handed to the function as files=) and those only keyed (a `files:`
    list, and `depends_on`, its old name)."""
    named = settings.files if isinstance(settings.files, dict) else {}
    unnamed = [*(settings.files if isinstance(settings.files, list) else []), *settings.depends_on]
    return {name: (base_dir / p).resolve() for name, p in named.items()}, [(base_dir / p).resolve() for p in unnamed]


def context_of(batch: Batch) -> dict:
    """What a context-reading user function gets besides the inputs."""
    return {
        "frequency": batch.frequency,
        "season": batch.season,
        "input_dates": batch.input_dates,
        "truth_dates": batch.truth_dates,
        "attributes": list(batch.attributes),
    }


def local_sources(module: ModuleType | None) -> list[Path]:
    """The .py files a module can import as its neighbours: those of its folder (or of its top-level package's
    folder) and of the packages below it. None for an installed library (its version is in the key) or a
    package too large to read on every run."""
    top = sys.modules.get(module.__name__.split(".")[0]) if module else None
    location = getattr(top if top and hasattr(top, "__path__") else module, "__file__", None)
    if location is None:
        return []
    root = Path(location).resolve().parent
    installed = {"site-packages", "dist-packages"} & set(root.parts)
    if installed or root.is_relative_to(Path(sysconfig.get_paths()["stdlib"]).resolve()):
        return []
    files, folders = list(root.glob("*.py")), [root]
    while folders and len(files) <= LOCAL_SOURCES_LIMIT:  # down through packages only: no .venv, no data
        below = [d for d in folders.pop().iterdir() if d.is_dir() and (d / "__init__.py").is_file()]
        files += [f for d in below for f in d.glob("*.py")]
        folders += below
    return sorted(files) if len(files) <= LOCAL_SOURCES_LIMIT else []


def files_digest(paths: list[Path]) -> str:
    """sha256 over each file's path and content (a folder: every file below it), in sorted order."""
    digest = hashlib.sha256()
    for path in paths:
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file():
                digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()


def load_callable(target: str, *, base_dir: Path) -> Callable:
    """Import ``module:function`` or ``path/to/file.py:function`` (relative to the YAML file)."""
    where, _, name = target.rpartition(":")
    try:
        module = (
            import_file((base_dir / where).resolve(), "causalrate_user_", per_content=True)
            if where.endswith(".py")
            else importlib.import_module(where)
        )
        function = getattr(module, name)
    except FileNotFoundError as exc:
        raise UserError(f"system type python: function: no file {exc}") from None
    except (Exception, SystemExit) as exc:  # sys.exit() at import too: exit 2 naming the file, not a silent exit
        raise UserError(f"system type python: function: cannot load {target!r}: {type(exc).__name__}: {exc}") from None
    if not callable(function):
        raise UserError(f"system type python: function: {target!r} is not callable")
    return function
