"""The `python` system: a user callable ``fn(inputs[batch, n], horizon) -> [batch, horizon]``.

With ``quantiles: [0.1, 0.5, 0.9]`` it returns [batch, level, horizon] (the 0.5 row is the point forecast),
scored by CRPS, WQL and interval coverage at those levels. With ``context: true`` it is called
``fn(inputs, horizon, context)``, context being a dict with the data's ``frequency`` and ``season``, each
row's ``input_dates`` and ``truth_dates`` (datetime64 [batch, n] and [batch, horizon]) and ``attributes``
(one dict per row); they then enter the forecast cache's key. With ``files: {model: trained/}`` it also gets
``files={"model": Path}``: a trained model it loads, whose content enters the cache key (retraining re-forecasts).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, Batch, Prediction, System, quantile_levels
from causalrate.systems.checkpoints import folder_digest


class PythonSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    function: str = Field(pattern=r"^[^:]+:[A-Za-z_][A-Za-z0-9_]*$", description="module:function or file.py:function")
    accepts_nan: bool = Field(False, description="false: missing values are imputed before the call")
    context: bool = Field(False, description="true: called fn(inputs, horizon, context) with frequency and dates")
    files: dict[str, str] = Field(
        default_factory=dict,
        description="name → file or folder (relative to the YAML) it loads, e.g. a trained model: their content "
        "enters the cache key, and the function gets them as files={name: Path}",
    )
    quantiles: list[float] | None = Field(
        None, description="levels (with 0.5) of the quantiles fn returns as [batch, level, horizon]; null: points"
    )

    _levels = field_validator("quantiles")(classmethod(lambda cls, v: quantile_levels(v)))


@SYSTEMS.register("python")
class PythonFunction(System):
    """Wraps a batched numpy function; NaN marks missing values if it accepts them."""

    Settings = PythonSettings

    def __init__(self, settings: PythonSettings, *, base_dir: Path) -> None:
        super().__init__(settings, base_dir=base_dir)
        self.accepts_nan = settings.accepts_nan
        self.wants_context = settings.context
        if settings.quantiles:
            self.quantile_levels = tuple(settings.quantiles)
            self.output = "quantiles"
        self.function = load_callable(settings.function, base_dir=base_dir)
        self.files = {name: (base_dir / path).resolve() for name, path in settings.files.items()}

    def identity(self) -> dict:
        """The function's module source is part of the identity: editing it invalidates cached forecasts.

        For a file it is the hash of the bytes loaded (the module's own record), never a module looked up by name.
        """
        module = inspect.getmodule(self.function)
        digest = getattr(module, "__causalrate_sha256__", None)
        if digest is None:
            try:
                source = inspect.getsource(module)
            except (OSError, TypeError):
                source = getattr(self.function, "__qualname__", repr(self.function))
            digest = hashlib.sha256(source.encode()).hexdigest()
        files = {name: _content_digest(path) for name, path in self.files.items()}
        return {**super().identity(), "source": digest} | ({"files": files} if files else {})

    def check(self, dataset) -> None:
        absent = [f"{name}: {path}" for name, path in self.files.items() if not path.exists()]
        if absent:
            raise UserError(f"system type python: files: no such file or folder: {'; '.join(absent)}")

    def forecast(self, batch: Batch) -> np.ndarray | Prediction:
        args = (batch.inputs.copy(), batch.horizon) + ((context_of(batch),) if self.settings.context else ())
        out = np.asarray(self.function(*args, **({"files": self.files} if self.files else {})), dtype=np.float64)
        if self.quantile_levels:
            return Prediction.of_quantiles(out, self.quantile_levels, rows=len(batch.inputs), horizon=batch.horizon)
        return out


def context_of(batch: Batch) -> dict:
    """What a context-reading user function gets besides the inputs."""
    return {
        "frequency": batch.frequency,
        "season": batch.season,
        "input_dates": batch.input_dates,
        "truth_dates": batch.truth_dates,
        "attributes": list(batch.attributes),
    }


def _content_digest(path: Path) -> str:
    """A file's sha256, or a folder's content fingerprint (what a retrained model changes)."""
    if path.is_dir():
        return folder_digest(path)  # read afresh: a model retrained in this process is a new key
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        raise UserError(f"system type python: files: cannot read {path}") from None


def load_callable(target: str, *, base_dir: Path) -> Callable:
    """Import ``module:function`` or ``path/to/file.py:function`` (relative to the YAML file)."""
    where, _, name = target.rpartition(":")
    try:
        module = _load_file((base_dir / where).resolve()) if where.endswith(".py") else importlib.import_module(where)
        function = getattr(module, name)
    except FileNotFoundError as exc:
        raise UserError(f"system type python: function: no file {exc}") from None
    except Exception as exc:
        raise UserError(f"system type python: function: cannot load {target!r}: {type(exc).__name__}: {exc}") from None
    if not callable(function):
        raise UserError(f"system type python: function: {target!r} is not callable")
    return function


def _load_file(path: Path) -> ModuleType:
    """The module of a .py file, once per (resolved path, content): two files named model.py in different
    folders, or one file edited between two loads, are different modules (and different cache keys)."""
    if not path.is_file():
        raise FileNotFoundError(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    where = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"causalrate_user_{path.stem}_{where}_{digest[:12]}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None:
            raise FileNotFoundError(path)
        module = importlib.util.module_from_spec(spec)
        module.__causalrate_sha256__ = digest
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return module
