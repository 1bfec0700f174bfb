"""The effect scores (METHOD §5–6): the harm of a perturbation on every window (ape), over a severity grid
(ape_auc), and where the effect falls (fragility_spread); every_system gives a system the effects lack a row."""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalrate.score.contract import APE_MARGIN, SCORES, Score
from causalrate.score.evidence import Evidence, Unavailable, wide_column


@SCORES.register("ape")
class Ape(Score):
    headline = "robustness"
    rows = "perturbed"
    radar = True
    resampling = "windows"
    margin = APE_MARGIN
    harm = True
    label = "APE"
    estimator = "max(APE_true, 0) (all windows, randomized): the harm"
    description = "how much the perturbation raises its error, measured on every window (randomized)"

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        first = evidence.effects.drop_duplicates(["system", "perturbation"])
        first = first[~first["perturbation"].isin(evidence.worst_perturbations)]
        rows = first[["system", "perturbation"]].assign(raw=first["ape_true"].clip(lower=0).to_numpy())
        return every_system(evidence, rows, exclude=evidence.worst_perturbations)

    def window_values(self, evidence: Evidence) -> dict[tuple[str, str], np.ndarray]:
        """The paired differences outcome − clean outcome of every window (APE_true is their mean)."""
        control, worst = evidence.control, set(evidence.worst_perturbations)
        return {
            (system, p): wide[p].to_numpy() - wide[control].to_numpy()
            for system, wide in wide_column(evidence, "outcome").items()
            for p in wide.columns
            if p != control and p not in worst
        }


@SCORES.register("ape_auc")
class ApeAuc(Score):
    headline = "robustness"
    rows = "perturbed"
    margin = APE_MARGIN
    label = "Dose-response AUC"
    estimator = "area under |APE_true| over severity"
    description = (
        "average |APE| over a severity grid (area under |APE| vs severity scaled to 0–1): error growth as data worsens"
    )

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        if not evidence.severity:
            return Unavailable("the suite has no severity grid (grid: in a perturbation)")
        first = evidence.effects.drop_duplicates(["system", "perturbation"])
        first = first[first["perturbation"].isin(evidence.severity)]
        first = first.assign(
            grid=first["perturbation"].map(lambda p: evidence.severity[p][0]),
            severity=first["perturbation"].map(lambda p: evidence.severity[p][1]),
        )
        rows = []
        for (system, grid), group in first.groupby(["system", "grid"], sort=True):
            rows.append({"system": system, "perturbation": grid, "raw": dose_auc(group["severity"], group["ape_true"])})
        return pd.DataFrame(rows, columns=["system", "perturbation", "raw"])


def dose_auc(severity: pd.Series, ape: pd.Series) -> float:
    """Trapezoidal area under |APE| over severity rescaled to [0, 1] (= mean |APE| across the grid's range)."""
    order = np.argsort(severity.to_numpy())
    x, y = severity.to_numpy()[order], np.abs(ape.to_numpy()[order])
    if not np.isfinite(y).all():
        return np.nan
    x = (x - x[0]) / (x[-1] - x[0])
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


@SCORES.register("fragility_spread")
class FragilitySpread(Score):
    """Where the effect falls, not how large it is: rated, but in no headline (METHOD §6.5 builds the
    robustness headline from APE, recency, worst case and failure rate). A system that fails equally
    everywhere has no spread, so averaging this in would pull a uniformly fragile system up."""

    label = "Fragility spread"
    estimator = "spread of conditional effects"
    description = (
        "how unevenly the perturbation hurts: spread of its effect across the sub-populations a causal tree "
        "finds (share of the average clean error; 0 = the same effect everywhere)"
    )

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        if evidence.heterogeneity is None:
            from causalrate.causal.heterogeneity import INSTALL

            return Unavailable(
                f"no fragility map: heterogeneity.enabled is false, or causalml cannot be used here ({INSTALL})"
            )
        rows = evidence.heterogeneity
        if rows.empty:
            from causalrate.causal.heterogeneity import MIN_LEAF_WINDOWS

            return Unavailable(
                f"no fragility map: no system and perturbation has {4 * MIN_LEAF_WINDOWS} windows forecast both "
                "clean and perturbed (more windows: a longer period, more series or a smaller stride)"
            )
        mapped = set(rows["perturbation"])
        return every_system(evidence, rows, exclude=tuple(p for p in evidence.perturbations if p not in mapped))


def every_system(evidence: Evidence, frame: pd.DataFrame, exclude: tuple[str, ...] = ()) -> pd.DataFrame:
    """An effect score's rows plus a row of raw NaN (not computed: rated insufficient, worst) for every system
    and perturbation of the run (the control and `exclude` aside) the effects have none for: a system whose
    every forecast failed has no effect estimate, and must not go unrated."""
    if evidence.forecasts.empty:
        return frame
    forecast = evidence.forecasts[["system", "perturbation"]].drop_duplicates()
    wanted = forecast[(forecast["perturbation"] != evidence.control) & ~forecast["perturbation"].isin(exclude)]
    have = pd.MultiIndex.from_frame(frame[["system", "perturbation"]])
    missing = wanted[~pd.MultiIndex.from_frame(wanted).isin(have)]
    if missing.empty:
        return frame
    out = pd.concat([frame, missing.assign(raw=np.nan)], ignore_index=True)
    # numbers even where every row is a filler (concat with an empty frame's column keeps its object dtype)
    out["raw"] = out["raw"].astype(float)
    return out.sort_values(["system", "perturbation"], kind="stable", ignore_index=True)
