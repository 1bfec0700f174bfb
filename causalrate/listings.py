"""The listing commands: `causalrate perturbations | systems | scores | metrics [--config STUDY.yaml]`.

Each prints one aligned line per registry entry, from the entry's own facts: the built-ins, then, with
``--config``, the entries the study's plugins register (and, for `systems`, its `python` systems), each
marked ``[study: …]``. An entry belongs to whichever module defines it (a scheme's generated ape_/pie_
scores to the scheme's), so a listing without --config shows only the built-ins, whatever this process
has imported before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from causalrate import plugins

if TYPE_CHECKING:
    from causalrate.score.scores import Margin, Score

PLACEHOLDER = re.compile(r"\{(\w+)(:[^}]*)?\}")
E = TypeVar("E")  # a registry's entry type
INTERVAL = {"windows": "bootstrap over windows", "draws": "spread over draws", "none": "none"}


@dataclass(frozen=True)
class StudyPlugins:
    """What a study adds to the registries: its plugin modules (by import name, with the entry as written in
    its YAML) and its `python` systems (name → module:function)."""

    config: Path
    modules: dict[str, str]
    python_systems: dict[str, str]

    @classmethod
    def none(cls) -> StudyPlugins:
        return cls(Path(), {}, {})

    @classmethod
    def load(cls, path: str | Path) -> StudyPlugins:
        """Read the study as `assess` does (its plugins imported; a missing file, bad YAML or invalid study is
        a UserError naming the file, exit code 2) and note what it adds."""
        from causalrate.config import load_config
        from causalrate.systems.python_system import PythonSettings

        config, base_dir = load_config(path)
        resolved = plugins.resolve(config.plugins, base_dir=base_dir, where=Path(path))
        modules = {plugins.module_name(entry): written for entry, written in zip(resolved, config.plugins, strict=True)}
        python = {s.name: s.settings.function for s in config.systems if isinstance(s.settings, PythonSettings)}
        return cls(Path(path), modules, python)

    def owner(self, module: str) -> str | None:
        """The plugin entry (as written in the YAML) that defines `module`, or None."""
        for name, written in self.modules.items():
            if module == name or module.startswith(name + "."):
                return written
        return None


def built_in(module: str) -> bool:
    return module == "causalrate" or module.startswith("causalrate.")


def module_of(entry: object) -> str:
    target = getattr(entry, "fn", entry)  # a Metric: its function
    return getattr(target, "__module__", "") or ""


def entries(
    items: Iterable[tuple[str, E]], study: StudyPlugins, module: Callable[[Any], str] = module_of
) -> list[tuple[str, E, str]]:
    """(name, entry, mark): the built-ins in registration order, then the study's, marked."""
    ours: list[tuple[str, E, str]] = []
    theirs: list[tuple[str, E, str]] = []
    for name, entry in items:
        where = module(entry)
        if built_in(where):
            ours.append((name, entry, ""))
        elif (written := study.owner(where)) is not None:
            theirs.append((name, entry, f"  [study: {written}]"))
    return ours + theirs


def aligned(rows: list[tuple[str, str]]) -> list[str]:
    """Name, then the rest from one column on."""
    width = max(len(name) for name, _ in rows) + 2
    return [f"{name:{width}}{rest}" for name, rest in rows]


def perturbations(study: StudyPlugins) -> list[str]:
    from causalrate.perturb.operators import OPERATORS

    rows = []
    for name, op, mark in entries(OPERATORS.items(), study):
        description = PLACEHOLDER.sub(r"<\1>", op.description)  # filled per suite entry; here it reads <param>
        rows.append((name, f"{op.kind:11}{description}{severity_facts(name)}{mark}"))
    return aligned(rows)


def severity_facts(operator: str) -> str:
    """A duration fault's row of the severity table (ratings/severity.yaml): what `severity: 1-5` sets."""
    from causalrate.perturb.faults import severity_table

    table = severity_table()
    if operator not in table.magnitudes:
        return ""
    settings = [f"k = {', '.join(map(str, table.k))} (× season / {table.base})"]
    settings += [f"{n} = {', '.join(f'{v:g}' for v in vs)}" for n, vs in table.magnitudes[operator].items()]
    return f"  [severity 1-5: {'; '.join(settings)}]"


def systems(study: StudyPlugins) -> list[str]:
    from causalrate.systems import SYSTEMS
    from causalrate.systems.base import nan_handling

    rows = []
    for name, cls, mark in entries(SYSTEMS.items(), study):
        doc = (cls.__doc__ or "").strip().splitlines()[0].replace("``", "")  # reStructuredText literals, as text
        settings = ", ".join(cls.Settings.model_fields) or "-"
        own = [*cls.environment_requirements, *(f"{p} (--no-deps)" for p in cls.environment_no_deps)]
        where = f"; own environment: {', '.join(own)}" if own else ""
        where += f"; pins relaxed: {'; '.join(cls.pins_relaxed)}" if cls.pins_relaxed else ""
        where += f"; licence: {cls.licence}" if cls.licence else ""
        facts = f"[NaN: {nan_handling(cls)}; output: {cls.output}{where}; settings: {settings}]"
        rows.append((name, f"{doc}  {facts}{mark}"))
    for name, function in study.python_systems.items():
        rows.append((name, f"the study's function {function}  [type: python]  [study: {study.config}]"))
    return aligned(rows)


def _score_module(cls: type[Score]) -> str:
    """A scheme's generated ape_/pie_ scores belong to the module of the scheme that generated them."""
    from causalrate.causal.schemes import SCHEMES

    if built_in(cls.__module__) and cls.scheme is not None and cls.scheme in SCHEMES:
        return SCHEMES.get(cls.scheme).__module__
    return cls.__module__


MARGIN_BASES = {
    "naive_clean_error": "of the naive reference's clean error",
    "naive_ratio": "of the naive reference's value",
    "wrs_max": "of its maximum",
    "percent": "percentage point(s)",
    "none": "",
}


POINT_FORECASTS = {
    "not_in_headline": "in the accuracy headline only for forecast distributions (samples or quantiles)",
    "not_applicable": "not applicable to point forecasts (not rated for them)",
}


def margin_text(margin: Margin | None) -> str:
    """A score's practical-equivalence margin δ (METHOD §6.2) in words, as `causalrate scores` lists it."""
    if margin is None:
        return "margin δ: none (0: any significant difference counts)"
    if margin.basis in ("naive_clean_error", "naive_ratio"):
        return f"margin δ: {100 * margin.value:g} % {MARGIN_BASES[margin.basis]}"
    if margin.basis == "percent":
        return f"margin δ: {margin.value:g} {MARGIN_BASES['percent']}"
    if margin.basis == "wrs_max":
        return f"margin δ: {margin.value:g} {MARGIN_BASES['wrs_max']}"
    return f"margin δ: {margin.value:g}"


# which of a score's rows join its headline (Score.rows), in words
HEADLINE_ROWS = {"clean": "its clean-input rows", "perturbed": "its perturbed-input rows", "all": "all its rows"}


def scores(study: StudyPlugins) -> list[str]:
    from causalrate.score.scores import SCORES

    rows = []
    for name, cls, mark in entries(SCORES.items(), study, _score_module):
        joined = f"headline: {cls.headline}, {HEADLINE_ROWS[cls.rows]}" if cls.headline and cls.rows else ""
        headline = joined or "in no headline"
        better = "higher is better" if cls.higher_is_better else "lower is better"
        facts = [cls.label or name, headline, better, f"interval: {INTERVAL[cls.resampling]}"]
        facts += [f"window mean of the per-forecast {cls.metric}"] if cls.metric else []
        facts += [f"scheme: {cls.scheme}"] if cls.scheme else []
        facts += [margin_text(cls.margin)]
        facts += [POINT_FORECASTS[cls.point_forecasts]] if cls.point_forecasts != "rated" else []
        description = cls.description or (cls.__doc__ or "").strip().split("\n")[0]
        rows.append((name, f"{cls.headline or '—':12}{description}  [{'; '.join(facts)}]{mark}"))
    return aligned(rows)


def metrics(study: StudyPlugins) -> list[str]:
    from causalrate.forecast.metrics import METRICS

    rows = []
    for name, metric, mark in entries(METRICS.items(), study):
        better = "lower is better" if metric.lower_is_better else "higher is better"
        facts = [*(["reads the forecast samples or quantiles"] if metric.uses_samples else [])]
        facts += [f"also given: {', '.join(metric.context)}"] if metric.context else []
        extra = f"  [{'; '.join(facts)}]" if facts else ""
        rows.append((name, f"{better:18}{metric.description}{extra}{mark}"))
    return aligned(rows)


LISTINGS: dict[str, tuple[Callable[[StudyPlugins], list[str]], str]] = {
    "perturbations": (perturbations, "list the perturbation operators"),
    "systems": (systems, "list the system types and their settings"),
    "scores": (scores, "list the scores: the headline they join (— none), what they measure, their interval"),
    "metrics": (metrics, "list the per-forecast metrics: direction and what they measure"),
}
