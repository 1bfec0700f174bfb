"""Perturbation suites: YAML catalogs (top-level ``perturbations/``) or inline lists."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from causalrate.contracts import guarded, is_plugin, raised
from causalrate.errors import UserError, format_validation_error
from causalrate.perturb.faults import Fault, severity_table
from causalrate.perturb.operators import OPERATORS, Operator, checked_output, reach
from causalrate.perturb.placement import Placement, PlacementName, offsets_mask
from causalrate.perturb.spec import PerturbationSpec
from causalrate.seeding import KeyTexts
from causalrate.yamlio import read_yaml

# "1 window standard deviations" → "1 window standard deviation": a count of one takes the singular
SINGULAR = re.compile(r"(?<![\d.])\b1 ((?:\w+ )?)(point|standard deviation|step|period)s\b")


def agreed(text: str) -> str:
    """An operator's description with its numbers and units agreeing (1 point, 2 points)."""
    return SINGULAR.sub(r"1 \1\2", text)


@dataclass(frozen=True)
class Part:
    """One operator of a perturbation, at every `period`-th offset from the window's first placed offset."""

    operator: Operator
    period: int
    params: dict[str, float]


@dataclass(frozen=True)
class Perturbation:
    """A resolved perturbation: operator(s) at one point per `period` input points, placed by `placement`.

    Perturbations expanded from one severity grid share a `family` (the grid's id) and carry
    their `severity` (1 / period for a grid over period, else the varied setting's value).
    `impute` set: the perturbed input is imputed for every system, also those that accept NaN.
    `for_systems` "nan-accepting": only systems that accept NaN are forecast (and rated) on it.
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
    level: int | None = None  # a duration fault's level in the severity table (a grid member's or `severity:`)
    placement: Placement = field(default_factory=Placement)
    parts: tuple[Part, ...] = ()  # combined corruptions; else the one operator
    impute: str | None = None
    newest_of: str = ""  # set: this is `newest_of` placed at the newest input point (ape_last), not rated itself
    for_systems: str = "all"

    def applies_to(self, system) -> bool:
        """Whether `system` (anything with `accepts_nan`) is forecast and rated on this perturbation."""
        return self.for_systems == "all" or bool(system.accepts_nan)

    @property
    def is_control(self) -> bool:
        return self.operator.kind == "control"

    @property
    def positional(self) -> bool:
        """Whether the placed offset matters (recency): not for whole-window operators."""
        return any(part.operator.positional for part in self.components)

    @property
    def components(self) -> tuple[Part, ...]:
        return self.parts or (Part(self.operator, self.period, self.params),)

    def firsts(self, starts: np.ndarray, series: np.ndarray, *, seed: int, input_length: int) -> np.ndarray:
        """int [w]: each window's first perturbed offset under this perturbation's placement."""
        return self.placement.firsts(
            starts, np.asarray(series), period=self.period, phase=self.phase, input_length=input_length, seed=seed
        )

    def mask(self, firsts: np.ndarray, input_length: int) -> np.ndarray:
        """bool [w, n]: the placed offsets of windows whose first perturbed offsets are `firsts`."""
        return offsets_mask(firsts, period=self.period, input_length=input_length)

    def apply(
        self,
        inputs: np.ndarray,
        firsts: np.ndarray,
        *,
        seeds: np.ndarray,
        history: Sequence[np.ndarray] | None = None,
        calibration: np.ndarray | None = None,
    ) -> np.ndarray:
        """The perturbed copy of clean inputs [w, n]; the truth is never touched. The operator's output is
        checked (shape, floats, the points it may not touch unchanged): a violation is a ContractError.

        seeds: one per window; history: each row's whole series, for operators calibrated on it
        (or `calibration`: their per-row values, as recorded in ratings.json).
        """
        if self.is_control:
            return inputs.copy()
        n = inputs.shape[1]
        parts = [
            (
                part.operator,
                offsets_mask(np.mod(firsts, part.period), period=part.period, input_length=n),
                {**part.params, **self._calibration(part, history, calibration)},
            )
            for part in self.components
        ]
        # where each part may act, decided before any operator runs (one that widens its mask in place must not
        # widen what it is allowed to change); the masks and the clean inputs reach it read-only
        allowed = np.logical_or.reduce([reach(o, m, p) for o, m, p in parts])
        for _, mask, _ in parts:
            mask.setflags(write=False)
        clean = inputs.view()
        clean.setflags(write=False)
        if len(parts) == 1:
            operator, mask, params = parts[0]
            with guarded("perturbation operator", _named(operator), type(operator), "apply()"):
                out = operator.apply(inputs.copy(), mask, seeds=seeds, **params)
            return checked_output(operator, clean, out, allowed)
        combined = self.mask(firsts, n)
        combined.setflags(write=False)
        with guarded("perturbation operator", _named(self.operator), type(self.operator), "apply()"):
            out = self.operator.apply(inputs.copy(), combined, seeds=seeds, parts=parts)
        return checked_output(self.operator, clean, out, allowed)

    def apply_dates(self, dates: np.ndarray, firsts: np.ndarray) -> np.ndarray:
        """The input timestamps [w, n] after the perturbation (most operators leave them alone)."""
        for part in self.components:
            mask = offsets_mask(np.mod(firsts, part.period), period=part.period, input_length=dates.shape[1])
            dates = part.operator.apply_dates(dates.copy(), mask)
        return dates

    def calibrations(self, history: Sequence[np.ndarray]) -> list[float]:
        """Per row, the value calibrated operators fit on the row's series (e.g. tail_spike's return level)."""
        return [
            float(v)
            for part in self.components
            if part.operator.calibrated
            for v in self._calibration(part, history, None)["calibration"]
        ]

    def _calibration(
        self, part: Part, history: Sequence[np.ndarray] | None, given: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        if not part.operator.calibrated:
            return {}
        if given is not None:
            return {"calibration": np.asarray(given, dtype=float)}
        if history is None:
            raise ValueError(f"perturbation {self.id}: its operator is calibrated on the series; pass history")
        values: dict[int, float] = {}
        for h in history:
            if id(h) not in values:
                view = h.view()  # read-only: calibrate() must not change the dataset
                view.setflags(write=False)
                operator = type(part.operator)
                try:
                    values[id(h)] = part.operator.calibrate(view, **part.params)
                except UserError:
                    raise
                except Exception as exc:
                    if isinstance(exc, ValueError) and not is_plugin(operator):  # the series cannot be calibrated on
                        raise UserError(f"perturbations: {self.id}: {exc}") from None
                    raise raised("perturbation operator", _named(part.operator), operator, "calibrate()", exc) from None
        return {"calibration": np.array([values[id(h)] for h in history])}


def _named(operator: Operator) -> str:
    """The name an operator is registered under (its class's name if it is not registered)."""
    return next((n for n, entry in OPERATORS.items() if entry is type(operator)), type(operator).__qualname__)


def perturbation_seeds(seed: int, perturbation: str, origins: list[tuple[str, int]] | KeyTexts) -> np.ndarray:
    """Per-window seeds of a perturbation, from (run seed, perturbation id) and each window's (series id, start)
    (or those keys written once: KeyTexts)."""
    keys = origins if isinstance(origins, KeyTexts) else KeyTexts(origins)
    return keys.seeds(seed, "perturb", perturbation)


class SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    # every corrupting positional perturbation is also forecast at the newest input point (score ape_last)
    newest_point: bool = False
    perturbations: list[PerturbationSpec]


NEWEST = "@last"  # the id suffix of a perturbation's newest-point companion


def newest_point(p: Perturbation) -> Perturbation | None:
    """p with its point placed at the newest input offset (placement `last`), for `ape_last`; None where the
    placement cannot differ (the control, whole-window or every-point operators, a severity grid's member,
    a placement already fixed at one offset or chosen adversarially)."""
    fixed = p.placement.name in ("last", "offset", "worst")
    if p.is_control or not p.positional or p.period <= 1 or p.severity is not None or fixed:
        return None
    return replace(
        p,
        id=f"{p.id}{NEWEST}",
        placement=Placement("last"),
        description=f"{p.description}, at the newest input point",
        newest_of=p.id,
    )


def load_suite(
    spec: str | list[PerturbationSpec],
    *,
    base_dir: Path,
    input_length: int,
    placement: PlacementName = "cyclic",
    season: int = 1,
) -> list[Perturbation]:
    """Resolve a suite name (shipped catalog), a YAML path, or an inline list.

    `placement` is the study's default for entries that set none; `season` scales the duration faults'
    severity levels (ratings/severity.yaml). A suite file with `newest_point: true`
    also lists each corrupting perturbation's newest-point companion (newest_point), after the others.
    """
    newest = False
    if isinstance(spec, str):
        path = _find_suite(spec, base_dir)
        try:
            suite_file = SuiteFile.model_validate(read_yaml(path))
        except ValidationError as exc:
            raise UserError(format_validation_error(path, exc)) from None
        specs, newest = suite_file.perturbations, suite_file.newest_point
    else:
        specs = spec
    suite = [p for s in specs for p in _expand(s, input_length, placement, season)]
    if newest:
        suite += [c for c in map(newest_point, suite) if c is not None]
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


def _settings(spec: PerturbationSpec) -> dict[str, float]:
    """The entry's settings with defaults: its operator's, or `operator.setting` for each part of a combined one."""
    if spec.combine:
        return {
            f"{part.operator}.{name}": value
            for part in spec.combine
            for name, value in {**_checked(spec.id, part.operator, part.params)}.items()
        }
    return _checked(spec.id, spec.operator, spec.params)


def _checked(pid: str, operator: str, params: dict[str, float]) -> dict[str, float]:
    cls = OPERATORS.get(operator)
    unknown = sorted(set(params) - set(cls.params))
    if unknown:
        raise UserError(
            f"perturbations: {pid}: operator {operator} has no setting {unknown}; "
            f"its settings: {sorted(cls.params) or 'none'}"
        )
    return {**cls.params, **params}


def _expand(spec: PerturbationSpec, input_length: int, placement: PlacementName, season: int) -> list[Perturbation]:
    """One Perturbation, or one per severity of the spec's grid (a duration fault's levels: the severity table's
    settings for the data's season)."""
    settings = _settings(spec)
    if spec.offset is not None and spec.offset >= input_length:
        raise UserError(f"perturbations: {spec.id}: offset {spec.offset} is outside the input (0..{input_length - 1})")

    def graded(level: int) -> dict[str, float]:
        return {**settings, **severity_table().params(spec.operator, level, season=season, input_length=input_length)}

    if not spec.grid:
        if spec.severity is not None:
            resolved = _resolve(
                spec, spec.period or input_length, graded(spec.severity), spec.id, None, placement, input_length
            )
            return [replace(resolved, level=spec.severity)]
        return [_resolve(spec, spec.period or input_length, settings, spec.id, None, placement, input_length)]
    ((name, values),) = spec.grid.items()
    if name == "severity":
        return [
            replace(
                _resolve(
                    spec,
                    spec.period or input_length,
                    graded(int(v)),
                    f"{spec.id}@{v:g}",
                    float(v),
                    placement,
                    input_length,
                ),
                severity_label="severity level (ratings/severity.yaml)",
                level=int(v),
            )
            for v in values
        ]
    if name != "period" and name not in settings:
        raise UserError(
            f"perturbations: {spec.id}: grid over {name!r}, which is neither 'period' nor a setting "
            f"of {spec.operator} ({sorted(settings) or 'none'})"
        )
    out = []
    for value in values:
        params = dict(settings)
        if name == "period":
            period, severity, label = int(value), 1.0 / value, "share of input points perturbed (1 / period)"
        else:
            period, severity, label = spec.period or input_length, float(value), f"{spec.operator} {name}"
            params[name] = float(value)
        resolved = _resolve(spec, period, params, f"{spec.id}@{value:g}", severity, placement, input_length)
        out.append(replace(resolved, severity_label=label))
    return out


def _check_settings(pid: str, cls: type[Operator], params: dict[str, float], input_length: int) -> None:
    """Each setting finite and in its operator's range, a duration fault's k inside the input: else the built-in
    operator failed on it and was named as a broken plugin (k ≥ n: "changed points it may not touch"; clip's q
    1.5: numpy's quantile error), or NaN/inf settings rated a system on NaN inputs."""
    odd = {name: value for name, value in params.items() if not np.isfinite(value)}
    if odd:
        raise UserError(f"perturbations: {pid}: settings must be finite numbers, got {odd}")
    if not issubclass(cls, Fault):
        return
    if params.get("k", 1) >= input_length:
        raise UserError(
            f"perturbations: {pid}: k {params['k']:g} points is not below windows.input_length {input_length}; "
            f"a duration fault lasts at most {input_length - 1} points"
        )
    for name, (low, high) in cls.ranges.items():
        if not low < params[name] <= high:
            raise UserError(f"perturbations: {pid}: {name} {params[name]:g} is outside ({low:g}, {high:g}]")


def _resolve(
    spec: PerturbationSpec,
    period: int,
    params: dict[str, float],
    pid: str,
    severity: float | None,
    placement: PlacementName,
    input_length: int,
) -> Perturbation:
    cls = OPERATORS.get(spec.operator)
    periods = [period, *(part.period for part in spec.combine or () if part.period)]
    if cls.kind != "control" and spec.offset is None and max(periods) > input_length:
        raise UserError(  # one point per k input points would miss most windows' n points: not what it says
            f"perturbations: {pid}: period {max(periods)} exceeds windows.input_length {input_length}, so only "
            f"about {input_length}/{max(periods)} of the windows would be perturbed; give a period of at most "
            f"{input_length}"
        )
    _check_settings(pid, cls, params, input_length)
    parts: tuple[Part, ...] = ()
    if spec.combine:
        parts = tuple(
            Part(
                OPERATORS.get(part.operator)(),
                part.period or period,
                {k.split(".", 1)[1]: v for k, v in params.items() if k.split(".", 1)[0] == part.operator},
            )
            for part in spec.combine
        )
        described = " and ".join(agreed(p.operator.description.format(**p.params)) for p in parts)
    else:
        described = agreed(cls.description.format(**params))
    description = spec.description or described
    if period != 1 and cls.kind != "control" and spec.grid and "period" in spec.grid:
        description += f", every {period}th point"
    if spec.impute:
        whom = "every system" if spec.for_systems == "all" else "the systems that accept NaN"
        description += f", then imputed ({spec.impute}) for {whom}"
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
        placement=Placement(spec.placement or placement, offset=spec.offset, candidates=spec.candidates),
        parts=parts,
        impute=spec.impute,
        for_systems=spec.for_systems,
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


def series_history(dataset, windows) -> list[np.ndarray]:
    """Per window, its whole series' values (what calibrated operators such as tail_spike fit on)."""
    return [dataset.series[i].values for i in windows.series_index]


def placed_firsts(p: Perturbation, dataset, windows, *, seed: int) -> np.ndarray:
    """int [w, c]: the first perturbed offset of every window, one column (c = m candidates for 'worst')."""
    series = np.array([dataset.series[i].id for i in windows.series_index])
    if p.placement.name == "worst":
        return p.placement.candidate_firsts(windows.start, series, period=p.period, seed=seed)
    return p.firsts(windows.start, series, seed=seed, input_length=windows.input_length)[:, None]


def stored_first(p: Perturbation, offsets: str | None, start: int) -> int:
    """A stored row's first perturbed offset, from its `offsets` (runs before v3 stored none: the series rule)."""
    placed = json.loads(offsets) if offsets else []
    return placed[0] % p.period if placed else (p.phase - start) % p.period
