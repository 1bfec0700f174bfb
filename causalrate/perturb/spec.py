"""One entry of a perturbation suite (a study's `perturbations:` list or a suite file), validated.

The perturb stage owns this shape: operator names are checked against its own registry, so the
config layer composes PerturbationSpec without reaching into the operators.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from causalrate.perturb.faults import Fault, severity_table
from causalrate.perturb.operators import OPERATORS
from causalrate.perturb.placement import PlacementName

Imputation = Literal["ffill", "linear", "zero"]
ForSystems = Literal["all", "nan-accepting"]


class CombinedPart(BaseModel):
    """One operator of a combined corruption: applied at the entry's placement, with its own period."""

    model_config = ConfigDict(extra="forbid")

    operator: str
    period: PositiveInt | None = Field(None, description="k of this part; null = the entry's period")
    params: dict[str, float] = Field(default_factory=dict)

    @field_validator("operator")
    @classmethod
    def _known_operator(cls, name: str) -> str:
        if name == "combined":
            raise ValueError("a combined corruption cannot contain another combined one")
        return OPERATORS.known([name])[0]


class PerturbationSpec(BaseModel):
    """One perturbation of a suite: an operator at one point per `period` input points, placed by `placement`."""

    model_config = ConfigDict(extra="forbid")

    id: str
    operator: str
    period: PositiveInt | None = Field(None, description="k; null = input_length")
    phase: int = Field(0, ge=0, description="series placement only: positions (i - phase) % k == 0")
    placement: PlacementName | None = Field(None, description="where the point falls; null = the study's placement")
    offset: int | None = Field(None, ge=0, description="placement offset: the offset j (0 = oldest input point)")
    candidates: PositiveInt | None = Field(None, description="placement worst: m offsets tried per window; null = all")
    combine: list[CombinedPart] | None = Field(None, description="operator combined: the operators applied together")
    impute: Imputation | None = Field(
        None, description="impute after perturbing, for every system (e.g. missing+ffill)"
    )
    for_systems: ForSystems = Field(
        "all",
        description="nan-accepting: only systems that take NaN themselves are forecast on it (with impute: "
        "their own handling against imputation; the others are imputed on the plain entry already)",
    )
    params: dict[str, float] = Field(default_factory=dict)
    grid: dict[str, list[float]] | None = Field(
        None,
        description="severity grid: one setting (or period, or a duration fault's severity) and its values, "
        "e.g. {period: [80, 40, 20, 10]} or {severity: [1, 2, 3, 4, 5]}",
    )
    severity: int | None = Field(
        None, ge=1, le=5, description="a duration fault's level in the severity table (ratings/severity.yaml)"
    )
    description: str | None = None

    @field_validator("grid")
    @classmethod
    def _one_axis(cls, grid: dict[str, list[float]] | None) -> dict[str, list[float]] | None:
        if grid is not None:
            if len(grid) != 1:
                raise ValueError(f"a grid varies exactly one setting, got {sorted(grid)}")
            ((name, values),) = grid.items()
            if len(values) < 2 or len(set(values)) != len(values):
                raise ValueError(f"grid {name}: give at least two distinct values, got {values}")
            if name == "period" and any(v < 1 or v != int(v) for v in values):
                raise ValueError(f"grid period: values must be whole numbers >= 1, got {values}")
            if name == "severity" and any(v not in (1, 2, 3, 4, 5) for v in values):
                raise ValueError(f"grid severity: values must be levels 1 to 5, got {values}")
        return grid

    @field_validator("operator")
    @classmethod
    def _known_operator(cls, name: str) -> str:
        return OPERATORS.known([name])[0]

    @model_validator(mode="after")
    def _placement_settings(self) -> PerturbationSpec:
        if (self.placement == "offset") != (self.offset is not None):
            raise ValueError("give offset: j exactly when placement is 'offset'")
        if self.candidates is not None and self.placement != "worst":
            raise ValueError("candidates: m only applies to placement 'worst'")
        if (self.operator == "combined") != bool(self.combine):
            raise ValueError("operator 'combined' needs combine: [two or more operators], and only it takes combine")
        if self.combine is not None and len(self.combine) < 2:
            raise ValueError("combine: give at least two operators")
        durations = [self.params.get("k", 1), *((self.grid or {}).get("k") or [])]
        if issubclass(OPERATORS.get(self.operator), Fault) and any(k < 1 or k != int(k) for k in durations):
            raise ValueError(f"k: a duration fault lasts a whole number of points >= 1, got {durations}")
        graded = self.severity is not None or (self.grid is not None and "severity" in self.grid)
        if graded:
            if self.severity is not None and self.grid is not None and "severity" in self.grid:
                raise ValueError("give severity: L or grid: {severity: [...]}, not both")
            if self.operator not in severity_table().magnitudes:
                raise ValueError(
                    f"severity applies to the duration faults {sorted(severity_table().magnitudes)}, "
                    f"not {self.operator!r}"
                )
            graded_params = {"k", *severity_table().magnitudes[self.operator]}
            if set(self.params) & graded_params:
                raise ValueError(
                    f"severity sets {sorted(graded_params)}; give either severity or params {sorted(graded_params)}"
                )
        return self
