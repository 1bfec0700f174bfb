"""Own NaN handling against imputation: which one a system does better with, from the paired `ape` ratings.

A suite entry with `impute` (P3+ffill) has a plain twin (P3: the same perturbation, no imputation).
A system that accepts NaN is rated on both: the twin through its own handling, the entry after
imputation. The two `ape` scores share their window resamples, so the verdict reads the 95 %
interval of their paired difference; without resamples (rigor off) it says so rather than guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from causalrate.causal.resampling import interval
from causalrate.perturb.suite import Perturbation

SCORE = "ape"  # the harm of the perturbation, lower is better: what "does better with" compares


def imputed_twins(suite: Sequence[Perturbation]) -> list[tuple[str, str]]:
    """(plain id, imputed id) of every imputed entry whose un-imputed twin is in the suite, e.g. (P3, P3+ffill)."""

    def shape(p: Perturbation) -> str:  # repr: parts hold dicts, which do not hash
        return repr((p.operator_name, p.period, p.phase, sorted(p.params.items()), p.placement, p.parts))

    rated = [p for p in suite if not p.newest_of]  # newest-point companions are forecast, not rated
    plain = {shape(p): p.id for p in rated if p.impute is None}
    return [(plain[shape(p)], p.id) for p in rated if p.impute and shape(p) in plain]


def compare(
    system: str,
    pair: tuple[str, str],
    imputation: str,
    raw: Mapping[tuple[str, str], float],
    replicates: Mapping[tuple[str, str], Mapping[str, np.ndarray]],
) -> dict | None:
    """The two `ape` values of `system` on (own handling, imputed) and the verdict; None if either is missing."""
    own, imputed = pair
    own_value, imputed_value = raw.get((system, own)), raw.get((system, imputed))
    if own_value is None or imputed_value is None or not np.isfinite([own_value, imputed_value]).all():
        return None
    a, b = (replicates.get((SCORE, p), {}).get(system) for p in pair)
    low, high = interval(np.asarray(a) - np.asarray(b)) if a is not None and b is not None else (np.nan, np.nan)
    if not np.isfinite(low):
        better = "undetermined (no resamples: rigor off)"
    elif low == high == 0:
        better = "neither (the same harm in every resample)"
    elif high < 0:
        better = "its own handling"
    elif low > 0:
        better = imputation
    else:
        better = "neither (the paired 95 % interval covers 0)"
    return {
        "own": own,
        "imputed": imputed,
        "imputation": imputation,
        "score": SCORE,
        "own_value": float(own_value),
        "imputed_value": float(imputed_value),
        "difference_interval": [float(low), float(high)],
        "better": better,
    }


def missing_values(
    suite: Sequence[Perturbation],
    systems: Mapping[str, bool],
    ratings: pd.DataFrame,
    replicates: Mapping[tuple[str, str], Mapping[str, np.ndarray]],
) -> dict[str, dict | None]:
    """Per system that accepts NaN (`systems`: name → accepts_nan), its comparison on the suite's first
    imputed pair; None for the others (their plain entry is already system + imputation) or without a pair."""
    pairs = imputed_twins(suite)
    by_id = {p.id: p for p in suite}
    rows = ratings[ratings["score"] == SCORE]
    raw = dict(zip(zip(rows["system"], rows["perturbation"], strict=True), rows["raw"].astype(float), strict=True))
    return {
        name: compare(name, pairs[0], str(by_id[pairs[0][1]].impute), raw, replicates) if accepts and pairs else None
        for name, accepts in systems.items()
    }
