"""Where the corruption falls: the recency profile and the scores `recency` and `ape_worst` (METHOD §2).

The distance of a perturbed point from the forecast origin is n − offset (1 = the last input
point). With several perturbed points in a window the nearest to the origin counts. Only
positional perturbations with a fixed placement enter the recency views (whole-window operators
have no position; under `worst` the offset is chosen per system, so its distances are not a design).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from causalrate.causal.resampling import Resamples
from causalrate.perturb.suite import NEWEST
from causalrate.score.scores import APE_MARGIN, SCORES, Evidence, Score, Unavailable  # the core scores first
from causalrate.score.wide import positions, window_cube


def recency_bins(input_length: int) -> list[tuple[str, int, int]]:
    """(label, nearest, farthest) distance bins: 1, 2–5, 6–20, 21–n, cut to the input length."""
    edges = [(1, 1), (2, 5), (6, 20), (21, input_length)]
    out = []
    for lo, hi in edges:
        hi = min(hi, input_length)
        if lo <= hi:
            out.append((str(lo) if lo == hi else f"{lo}-{hi}", lo, hi))
    return out


def distances(offsets: pd.Series, input_length: int) -> np.ndarray:
    """Per row, n − (last perturbed offset): 1 = the last input point; NaN when no offset is stored."""
    out = np.full(len(offsets), np.nan)
    stored = offsets.notna().to_numpy()  # runs without placements store none: nothing to parse
    texts = [o or "null" for o in offsets[stored].tolist()]
    parsed = json.loads("[" + ",".join(texts) + "]")  # one parse for every row (each row is a JSON list)
    out[stored] = [input_length - max(p) if p else np.nan for p in parsed]
    return out


def paired_effects(evidence: Evidence, perturbations: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Per (system, perturbation, window) of the recency perturbations (or those given): outcome − control
    outcome, distance. Built once per evidence and set of perturbations (three scores and the profile read it)."""
    chosen = evidence.recency_perturbations if perturbations is None else perturbations
    f = evidence.forecasts
    return evidence.derived(
        ("paired_effects", chosen), lambda: _paired_effects(evidence, f[f["perturbation"].isin(chosen)])
    )


def newest_effects(evidence: Evidence) -> pd.DataFrame:
    """paired_effects() of the newest-point forecasts (Evidence.newest), under their perturbation's id."""
    return evidence.derived(("newest_effects",), lambda: _paired_effects(evidence, evidence.newest))


def _paired_effects(evidence: Evidence, rows: pd.DataFrame) -> pd.DataFrame:
    f = evidence.forecasts
    systems = sorted(f["system"].unique())
    n_windows = int(f["window"].max()) + 1 if len(f) else 0
    clean = window_cube(f, "outcome", systems=systems, perturbations=[evidence.control], n_windows=n_windows)[:, :, 0]
    base = clean[positions(rows["system"], systems), rows["window"].to_numpy()]
    return pd.DataFrame(
        {
            "system": rows["system"].to_numpy(),
            "perturbation": rows["perturbation"].to_numpy(),
            "window": rows["window"].to_numpy(),
            "series": rows["series"].to_numpy(),
            "diff": rows["outcome"].to_numpy() - base,
            "distance": distances(rows["offsets"], evidence.input_length),
        }
    )


def recency_profile(evidence: Evidence, *, resamples: Resamples) -> list[dict]:
    """APE per distance bin (a signed mean), with its 95 % interval (Resamples.intervals: over series, or studentized
    from the run's block-bootstrap replicates, the rigor layer's: the same resamples for every system, so their
    profiles are paired)."""
    pairs = paired_effects(evidence)
    if pairs.empty or evidence.input_length < 1 or evidence.table is None:
        return []
    n_windows = len(evidence.table)
    out = []
    for (system, perturbation), group in pairs.groupby(["system", "perturbation"], sort=True):
        diff = np.full(n_windows, np.nan)
        dist = np.full(n_windows, np.nan)
        diff[group["window"].to_numpy()] = group["diff"].to_numpy(dtype=float)
        dist[group["window"].to_numpy()] = group["distance"].to_numpy(dtype=float)
        for label, lo, hi in recency_bins(evidence.input_length):
            inside = (dist >= lo) & (dist <= hi) & np.isfinite(diff)
            if not inside.any():
                continue
            binned = np.where(inside, diff, np.nan)
            with np.errstate(invalid="ignore", divide="ignore"):
                reps = resamples.means(binned) if resamples.counts.size else np.array([])
            lo_ci, hi_ci = resamples.intervals(binned, reps)[0] if reps.size else (np.nan, np.nan)
            out.append(
                {
                    "system": system,
                    "perturbation": perturbation,
                    "bin": label,
                    "ape": float(diff[inside].mean()),
                    "interval": [lo_ci, hi_ci],
                    "n": int(inside.sum()),
                }
            )
    return out


def window_differences(pairs: pd.DataFrame, n_windows: int) -> dict[tuple[str, str], np.ndarray]:
    """Per (system, perturbation) of paired_effects() rows: outcome − control outcome per window id (NaN: none)."""
    out = {}
    for (system, perturbation), group in pairs.groupby(["system", "perturbation"], sort=True):
        values = np.full(n_windows, np.nan)
        values[group["window"].to_numpy()] = group["diff"].to_numpy(dtype=float)
        out[(system, perturbation)] = values
    return out


@SCORES.register("recency")
class Recency(Score):
    headline = "robustness"
    rows = "perturbed"
    margin = APE_MARGIN
    harm = True  # max(mean, 0): an improvement is no harm
    label = "APE (recent corruption)"
    estimator = "harm, max(APE, 0), with the change among the last inputs"
    description = "how much its error changes when the corrupted point is among the last input points"
    resampling = "windows"  # max(mean, 0) of the recent windows' paired differences, bootstrapped over windows

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        pairs = paired_effects(evidence)
        if pairs.empty:
            return Unavailable("no positional perturbation with a fixed placement (or a run stored before v3)")
        recent = pairs[pairs["distance"] <= evidence.recency_k]
        raw = recent.groupby(["system", "perturbation"], sort=True)["diff"].mean().clip(lower=0)
        index = pd.MultiIndex.from_frame(pairs[["system", "perturbation"]].drop_duplicates())
        frame = raw.reindex(index.sort_values()).rename("raw").reset_index().astype({"raw": np.float64})
        # no window placed the corruption among the last k inputs (a small study, an offset placement): undefined,
        # not a failure; recent windows whose forecasts all failed stay NaN without a note (insufficient, worst)
        placed = pd.MultiIndex.from_frame(recent[["system", "perturbation"]]).unique()
        unplaced = ~pd.MultiIndex.from_frame(frame[["system", "perturbation"]]).isin(placed)
        none = f"undefined: no window has the corrupted point among its last {evidence.recency_k} input values"
        return frame.assign(note=pd.Series(none, index=frame.index).where(unplaced))

    def window_values(self, evidence: Evidence) -> dict[tuple[str, str], np.ndarray]:
        pairs = paired_effects(evidence)
        recent = pairs.assign(diff=pairs["diff"].where(pairs["distance"] <= evidence.recency_k))
        return window_differences(recent, len(evidence.table)) if evidence.table is not None else {}


@SCORES.register("ape_worst")
class ApeWorst(Score):
    headline = "robustness"
    rows = "perturbed"
    margin = APE_MARGIN
    harm = True  # max(mean, 0): an improvement is no harm
    label = "APE (worst placement)"
    estimator = "worst-placement harm, max(APE, 0) (all windows)"
    description = "how much its error changes when one corrupted point is placed where it hurts it most"
    resampling = "windows"  # max(APE_true, 0) of the worst placement: its paired differences, bootstrapped over windows

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        if not evidence.worst_perturbations:
            return Unavailable("the suite has no perturbation with placement: worst")
        first = evidence.effects.drop_duplicates(["system", "perturbation"])
        first = first[first["perturbation"].isin(evidence.worst_perturbations)]
        return first[["system", "perturbation"]].assign(raw=first["ape_true"].clip(lower=0).to_numpy())

    def window_values(self, evidence: Evidence) -> dict[tuple[str, str], np.ndarray]:
        if not evidence.worst_perturbations or evidence.table is None:
            return {}
        return window_differences(paired_effects(evidence, evidence.worst_perturbations), len(evidence.table))


@SCORES.register("ape_last")
class ApeLast(Score):
    headline = "robustness"
    rows = "perturbed"
    margin = APE_MARGIN
    harm = True  # max(mean, 0): an improvement is no harm
    label = "APE (newest point)"
    estimator = "harm, max(APE, 0), with the newest input point changed"
    description = (
        "how much its error changes when the newest input value (the last before the forecast) is the corrupted one"
    )
    resampling = "windows"  # max(mean, 0) of the newest-point paired differences, bootstrapped over windows
    coverage_suffix = NEWEST  # its coverage: that of the newest-point forecasts

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        pairs = newest_effects(evidence)
        if pairs.empty:
            return Unavailable("the suite forecasts no perturbation at the newest point (newest_point: true)")
        raw = pairs.groupby(["system", "perturbation"], sort=True)["diff"].mean().clip(lower=0)
        return raw.rename("raw").reset_index().astype({"raw": np.float64})

    def window_values(self, evidence: Evidence) -> dict[tuple[str, str], np.ndarray]:
        pairs = newest_effects(evidence)
        return window_differences(pairs, len(evidence.table)) if evidence.table is not None and len(pairs) else {}
