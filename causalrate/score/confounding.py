"""The deconfounded scores (METHOD §5.3): ape_<scheme> (|mean APE_adj| over a scheme's draws) and pie_<scheme>
(PIE%), generated for every rated assignment scheme, a plugin's included."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np
import pandas as pd

from causalrate.causal.estimate import Estimate
from causalrate.causal.resampling import folded, mean_interval
from causalrate.causal.schemes import SCHEMES, Scheme
from causalrate.score.contract import APE_MARGIN, SCORES, Margin, Score
from causalrate.score.effects import every_system
from causalrate.score.evidence import Evidence, Resampler, RowReplicates, Unavailable


def no_effect_note(estimate: str, lo: float, hi: float) -> str:
    """Why PIE% is undefined where the effect's interval covers 0 (the one wording, for every estimate)."""
    return f"undefined: the {estimate} interval [{lo:.3g}, {hi:.3g}] covers 0, no effect to explain"


class SchemeScore(Score):
    """|mean APE_adj over the B draws| under one scheme: the effect estimate (METHOD §5.3)."""

    radar = True
    resampling = "draws"
    margin: ClassVar[Margin | None] = APE_MARGIN
    estimator = "|mean over draws of APE_adj|"
    draw_column: ClassVar[str] = "abs_adj"  # its per-draw replicate in the draws table
    interval_column: ClassVar[str] = "ape_adj"  # the signed per-draw value whose mean's interval is shown
    rates_magnitude: ClassVar[bool] = True  # rated as |mean|: the interval of the mean, folded at 0

    def scheme_rows(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = evidence.effects[evidence.effects["scheme"] == self.scheme]
        if rows.empty:
            return Unavailable(f"the run has no {self.scheme!r} assignment scheme (causal.schemes)")
        return rows

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = self.scheme_rows(evidence)
        if isinstance(rows, Unavailable):
            return rows
        return every_system(evidence, rows[["system", "perturbation"]].assign(raw=rows["ape_adj"].abs().to_numpy()))

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """The score in each of its scheme's draws (none where the systems' draw counts differ: not paired),
        and the t interval of the mean over draws of the signed per-draw value, folded when rated as |mean|."""
        out = {}
        draws = _per_draw(resampler.estimates, self.scheme, self.draw_column)
        signed = _per_draw(resampler.estimates, self.scheme, self.interval_column)
        for p in sorted(draws):
            per_system = {s: np.array([v for _, v in sorted(draws[p][s])]) for s in sorted(draws[p])}
            paired = len({v.size for v in per_system.values()}) == 1
            for s, values in per_system.items():
                lo, hi = mean_interval(np.array([v for _, v in signed[p][s]]))
                bounds = folded(lo, hi) if self.rates_magnitude else (lo, hi)
                out[(s, p)] = RowReplicates(values if paired else None, bounds)
        return out


def _per_draw(
    estimates: tuple[Estimate, ...], scheme: str | None, column: str
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """perturbation → system → (draw, value of `column`) of one scheme's Estimates."""
    per_p: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for e in estimates:
        if e.scheme == scheme:
            per_p.setdefault(e.perturbation, {}).setdefault(e.system, []).append((e.draw, getattr(e, column)))
    return per_p


class PieScore(SchemeScore):
    """Mean PIE% over the draws; undefined (NaN with a note) when APE_obs's interval covers 0."""

    estimator = "mean over draws of PIE%"
    margin = None
    draw_column = "pie"
    interval_column = "pie"
    rates_magnitude = False

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = self.scheme_rows(evidence)
        if isinstance(rows, Unavailable):
            return rows
        nothing = (rows["ape_obs_lo"] <= 0) & (rows["ape_obs_hi"] >= 0)
        note = [
            no_effect_note("APE_obs", lo, hi) if n else None
            for lo, hi, n in zip(rows["ape_obs_lo"], rows["ape_obs_hi"], nothing, strict=True)
        ]
        frame = rows[["system", "perturbation"]].assign(raw=rows["pie"].where(~nothing).to_numpy(), note=note)
        return every_system(evidence, frame)

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """As SchemeScore's, with no interval where PIE% is undefined (the effects table's pie is NaN)."""
        effects = evidence.effects
        undefined = set(
            effects.loc[
                effects["pie"].isna() & (effects["scheme"] == self.scheme), ["system", "perturbation"]
            ].itertuples(index=False, name=None)
        )
        return {
            key: replace(row, interval=None) if key in undefined else row
            for key, row in super().replicates(evidence, resampler).items()
        }


def register_ape(name: str, generated_for: str | None = None) -> None:
    """ape_<scheme>: the effect estimated after matching under the scheme."""
    SCORES.register(f"ape_{name}")(
        type(
            f"Ape_{name}",
            (SchemeScore,),
            {
                "generated_for": generated_for,
                "scheme": name,
                "label": f"APE, {name}-confounded",
                "description": f"the same effect, estimated after matching when {name} decides which windows are "
                "perturbed",
            },
        )
    )


def register_pie(name: str, generated_for: str | None = None) -> None:
    """pie_<scheme>: the share of the apparent effect that the scheme's confounder explains."""
    SCORES.register(f"pie_{name}")(
        type(
            f"Pie_{name}",
            (PieScore,),
            {
                "generated_for": generated_for,
                "scheme": name,
                "label": f"PIE% {name}",
                "description": f"how much of the apparent effect is really due to {name} (%; lower = less misleading)",
            },
        )
    )


def register_scheme_scores(name: str, scheme: type[Scheme]) -> None:
    """Every rated scheme, a plugin's included, gets its ape_ and pie_ scores."""
    if scheme.rated:
        register_ape(name, getattr(scheme, "generated_for", None))
        register_pie(name, getattr(scheme, "generated_for", None))


# the built-in schemes' scores (all APEs, then all PIEs: their order in tables), then any registered later
_BUILT_IN = [name for name, scheme in SCHEMES.items() if scheme.rated]
for _name in _BUILT_IN:
    register_ape(_name)
for _name in _BUILT_IN:
    register_pie(_name)
SCHEMES.on_register(register_scheme_scores)
