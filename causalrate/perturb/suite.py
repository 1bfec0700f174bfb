"""Perturbation suites: YAML catalogs (top-level ``perturbations/``) or inline lists."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from causalrate.config import PerturbationSpec, format_validation_error
from causalrate.errors import UserError
from causalrate.perturb.operators import OPERATORS, Operator
from causalrate.seeding import row_seeds


@dataclass(frozen=True)
class Perturbation:
    """A resolved perturbation: operator at series positions i with (i - phase) % period == 0.

    Perturbations expanded from one severity grid share a `family` (the grid's id) and carry
    their `severity` (1 / period for a grid over period, else the varied setting's value).
    """

    id: str
    operator_name: str
    operator: Operator
    period: int
    phase: int = 0
    params: dict[str, float] = field(default_factory=dict)
    description: str = ""
    family: str = ""
    severity: float | None = None
    severity_label: str = ""  # what the severity measures, for dose-response axes

    @property
    def is_control(self) -> bool:
        return self.operator.kind == "control"

    def mask(self, starts: np.ndarray, input_length: int) -> np.ndarray:
        """bool [w, n]: which input points of windows starting at `starts` are perturbed."""
        positions = starts[:, None] + np.arange(input_length)[None, :]
        return (positions - self.phase) % self.period == 0

    def apply(self, inputs: np.ndarray, starts: np.ndarray, *, seeds: np.ndarray) -> np.ndarray:
        """The perturbed copy of clean inputs [w, n] (seeds: one per window); the truth is never touched."""
        if self.is_control:
            return inputs.copy()
        mask = self.mask(starts, inputs.shape[1])
        return self.operator.apply(inputs.copy(), mask, seeds=seeds, **self.params)

    def apply_dates(self, dates: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """The input timestamps [w, n] after the perturbation (most operators leave them alone)."""
        return self.operator.apply_dates(dates.copy(), self.mask(starts, dates.shape[1]))


def perturbation_seeds(seed: int, perturbation: str, windows: list[tuple[str, int]]) -> np.ndarray:
    """Per-window seeds of a perturbation, from (run seed, perturbation id, series id, window start)."""
    return row_seeds(seed, "perturb", perturbation, keys=windows)


class SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    perturbations: list[PerturbationSpec]


def load_suite(spec: str | list[PerturbationSpec], *, base_dir: Path, input_length: int) -> list[Perturbation]:
    """Resolve a suite name (shipped catalog), a YAML path, or an inline list."""
    if isinstance(spec, str):
        path = _find_suite(spec, base_dir)
        try:
            specs = SuiteFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8"))).perturbations
        except ValidationError as exc:
            raise UserError(format_validation_error(path, exc)) from None
        except yaml.YAMLError as exc:
            raise UserError(f"{path}: not valid YAML: {exc}") from None
    else:
        specs = spec
    suite = [p for s in specs for p in _expand(s, input_length)]
    ids = [p.id for p in suite]
    if len(set(ids)) != len(ids):
        raise UserError(f"perturbations: ids must be unique, got {ids}")
    controls = [p.id for p in suite if p.is_control]
    if len(controls) != 1 or not suite[0].is_control:
        raise UserError(
            f"perturbations: the first perturbation must be the only control ('none'), got controls {controls}"
        )
    if len(suite) < 2:
        raise UserError("perturbations: a suite needs the control and at least one perturbation")
    return suite


def _expand(spec: PerturbationSpec, input_length: int) -> list[Perturbation]:
    """One Perturbation, or one per severity of the spec's grid."""
    cls = OPERATORS.get(spec.operator)
    unknown = sorted(set(spec.params) - set(cls.params))
    if unknown:
        raise UserError(
            f"perturbations: {spec.id}: operator {spec.operator} has no setting {unknown}; "
            f"its settings: {sorted(cls.params) or 'none'}"
        )
    if not spec.grid:
        return [_resolve(spec, cls, spec.period or input_length, {**cls.params, **spec.params}, spec.id, None)]
    ((name, values),) = spec.grid.items()
    if name != "period" and name not in cls.params:
        raise UserError(
            f"perturbations: {spec.id}: grid over {name!r}, which is neither 'period' nor a setting "
            f"of {spec.operator} ({sorted(cls.params) or 'none'})"
        )
    out = []
    for value in values:
        params = {**cls.params, **spec.params}
        if name == "period":
            period, severity, label = int(value), 1.0 / value, "share of input points perturbed (1 / period)"
        else:
            period, severity, label = spec.period or input_length, float(value), f"{spec.operator} {name}"
            params[name] = float(value)
        resolved = _resolve(spec, cls, period, params, f"{spec.id}@{value:g}", severity)
        out.append(replace(resolved, severity_label=label))
    return out


def _resolve(
    spec: PerturbationSpec, cls: type[Operator], period: int, params: dict[str, float], pid: str, severity: float | None
) -> Perturbation:
    description = spec.description or cls.description.format(**params)
    if period != 1 and cls.kind != "control" and spec.grid and "period" in spec.grid:
        description += f", every {period}th point"
    return Perturbation(
        id=pid,
        operator_name=spec.operator,
        operator=cls(),
        period=period,
        phase=spec.phase,
        params=params,
        description=description,
        family=spec.id,
        severity=severity,
    )


def _find_suite(spec: str, base_dir: Path) -> Path | Traversable:
    if spec.endswith((".yaml", ".yml")) or "/" in spec:
        path = (base_dir / spec).resolve()
        if not path.is_file():
            raise UserError(f"perturbations: no suite file {path}")
        return path
    catalog = catalog_dir()
    shipped = catalog / f"{spec}.yaml"
    if not shipped.is_file():
        names = sorted(p.name.removesuffix(".yaml") for p in catalog.iterdir() if p.name.endswith(".yaml"))
        raise UserError(f"perturbations: unknown suite {spec!r}; shipped suites: {names}, or give a YAML path")
    return shipped


def catalog_dir() -> Traversable:
    """The shipped suite catalogs: installed, the `causalrate.suites` package data; in a source checkout
    (or an editable install that maps only `causalrate`), the top-level perturbations/ folder.

    A Traversable, not a Path: an installed `causalrate.suites` has no `__init__.py`, so it is a namespace
    package whose `files()` is a MultiplexedPath (its `str()` is not a path).
    """
    try:
        return resources.files("causalrate.suites")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "perturbations"
