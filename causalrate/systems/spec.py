"""A study's system entry (`systems:` items, a model YAML's `model:`) and the system it builds.

The systems layer owns this shape: the entry's type-specific keys are validated by the type's
own Settings model here, so the config layer composes SystemSpec without knowing any system
type, and `build_system` receives typed settings, never a raw dict.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from causalrate.systems.base import SYSTEMS, System
from causalrate.systems.envsystem import EnvironmentSystem

if TYPE_CHECKING:
    from causalrate.data.dataset import Dataset


class SystemSpec(BaseModel):
    """A system under test: a registered type, metadata, and that type's own settings (extra keys)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    type: str
    family: str | None = None
    modality: Literal["numeric", "plot"] | None = None  # set by the type; stated here only as a check
    architecture: str | None = None
    parameters: int | None = None
    trained_on: list[str] | None = Field(
        None,
        description="datasets it was trained on (GIFT-Eval's leakage, fev's trained_on_this_dataset); null: unknown",
    )
    _settings: BaseModel = PrivateAttr()

    @model_validator(mode="after")
    def _check_type_and_settings(self) -> SystemSpec:
        if self.type not in SYSTEMS:
            raise ValueError(f"unknown system type {self.type!r}; expected one of {SYSTEMS.names()}")
        cls = SYSTEMS.get(self.type)
        own = {k: v for k, v in (self.model_extra or {}).items() if k != "environment"}
        try:
            self._settings = cls.Settings.model_validate(own)
        except ValidationError as exc:
            raise ValueError(f"settings of system {self.name!r} (type {self.type}): {_one_line(exc)}") from None
        if not isinstance(self.environment, str | None) or self.environment == "":
            raise ValueError(
                f"system {self.name!r}: environment: expected a managed environment's name, a virtual-environment "
                f"folder or a Python interpreter, got {self.environment!r}"
            )
        if self.modality not in (None, cls.modality):
            raise ValueError(
                f"system {self.name!r}: type {self.type} has modality {cls.modality!r}, not {self.modality!r}"
            )
        return self

    @property
    def settings(self) -> BaseModel:
        """The type-specific keys (everything but name, type, environment and metadata), as its Settings model."""
        return self._settings

    @property
    def environment(self) -> Any:
        """Where it runs: a managed environment's name, a venv folder or an interpreter (None: the type's default).

        Kept among the extra keys so that configs without it dump exactly as before.
        """
        return (self.model_extra or {}).get("environment")


def settle(spec: SystemSpec, dataset: Dataset) -> SystemSpec:
    """The entry with the settings its type leaves to the data filled in (what the run then records)."""
    updates = SYSTEMS.get(spec.type).from_data(spec.settings, dataset)
    return SystemSpec.model_validate(spec.model_dump(exclude_unset=True) | updates) if updates else spec


def build_system(spec: SystemSpec, *, base_dir: Path) -> System:
    """Instantiate a validated system entry; one with an environment runs in that environment's worker."""
    cls = SYSTEMS.get(spec.type)
    environment = spec.environment or ((cls.environment_name or spec.type) if cls.environment_requirements else None)
    if environment is None:
        return cls(spec.settings, base_dir=base_dir)
    return EnvironmentSystem(cls, spec.settings, base_dir=base_dir, environment=environment, type_name=spec.type)


def _one_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"{field}: {msg}")
    return "; ".join(parts)
