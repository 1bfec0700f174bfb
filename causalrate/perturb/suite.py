"""Perturbation suites: YAML catalogs (top-level ``perturbations/``) or inline lists."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from causalrate.config import PerturbationSpec, format_validation_error
from causalrate.errors import UserError
from causalrate.perturb.operators import OPERATORS, Operator


@dataclass(frozen=True)
class Perturbation:
    """A resolved perturbation: operator at series positions i with (i - phase) % period == 0."""

    id: str
    operator_name: str
    operator: Operator
    period: int
    phase: int = 0
    params: dict[str, float] = field(default_factory=dict)
    description: str = ""

    @property
    def is_control(self) -> bool:
        return self.operator.kind == "control"

    def mask(self, starts: np.ndarray, input_length: int) -> np.ndarray:
        """bool [w, n]: which input points of windows starting at `starts` are perturbed."""
        positions = starts[:, None] + np.arange(input_length)[None, :]
        return (positions - self.phase) % self.period == 0

    def apply(self, inputs: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """The perturbed copy of clean inputs [w, n]; the truth is never touched."""
        if self.is_control:
            return inputs.copy()
        return self.operator.apply(inputs.copy(), self.mask(starts, inputs.shape[1]), **self.params)


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
    suite = [
        Perturbation(
            id=s.id,
            operator_name=s.operator,
            operator=OPERATORS.get(s.operator)(),
            period=s.period or input_length,
            phase=s.phase,
            params=dict(s.params),
            description=s.description or OPERATORS.get(s.operator).description,
        )
        for s in specs
    ]
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


def _find_suite(spec: str, base_dir: Path) -> Path:
    if spec.endswith((".yaml", ".yml")) or "/" in spec:
        path = (base_dir / spec).resolve()
        if not path.is_file():
            raise UserError(f"perturbations: no suite file {path}")
        return path
    catalog = catalog_dir()
    shipped = catalog / f"{spec}.yaml"
    if not shipped.is_file():
        names = sorted(p.stem for p in catalog.glob("*.yaml"))
        raise UserError(f"perturbations: unknown suite {spec!r}; shipped suites: {names}, or give a YAML path")
    return shipped


def catalog_dir() -> Path:
    """The shipped suite catalogs: the checkout's top-level perturbations/ or, installed, causalrate.suites."""
    checkout = Path(__file__).resolve().parents[2] / "perturbations"
    if checkout.is_dir():
        return checkout
    return Path(str(resources.files("causalrate.suites")))
