"""APE_true / APE_obs / APE_adj and PIE% (METHOD §5.2–5.4): the settings, the identification and the
summary over the B seeded observational draws (the draws themselves: causal.estimate)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from causalrate.causal.graph import Identification, identify
from causalrate.causal.schemes import SCHEMES
from causalrate.memo import OFF, Memo

if TYPE_CHECKING:
    from causalrate.causal.estimate import Estimate

PIE_EPSILON = 1e-9


@dataclass(frozen=True)
class DrawSettings:
    schemes: tuple[str, ...]
    draws: int
    high: float
    low: float
    caliper: float
    covariates: tuple[str, ...]
    seed: int


def identify_schemes(settings: DrawSettings, attributes: list[str], memo: Memo = OFF) -> dict[str, Identification]:
    """dowhy identification per scheme; the graph's confounders are Z, the covariates and the scheme's own driver."""
    out = {}
    for name in settings.schemes:
        confounders = sorted({*attributes, *settings.covariates, *SCHEMES.get(name).confounders})
        out[name] = memo(
            "identify",
            (confounders,),
            partial(identify, confounders),
            encode=lambda i: [list(i.adjustment_set), i.estimand],
            decode=lambda v: Identification(tuple(v[0]), v[1]),
        )
    return out


def design_matrix(table: pd.DataFrame, columns: tuple[str, ...]) -> tuple[np.ndarray, list[str], np.ndarray | None]:
    """One-hot for categorical columns (first level dropped), z-scores for numeric ones; column names;
    and, when every column is categorical, the stratum code of each row (-1 where a value is missing)."""
    parts, names, codes, sizes = [], [], [], []
    for col in columns:
        values = table[col]
        if values.dtype.kind in "fiu":
            sd = values.std(ddof=0)
            parts.append(((values - values.mean()) / (sd if sd > 0 else 1.0)).to_numpy()[:, None])
            names.append(col)
        else:
            code, levels = _factorize(values)
            parts.append((code[:, None] == np.arange(1, len(levels))).astype(float))
            names += [f"{col}={v}" for v in levels[1:]]
            codes.append(code)
            sizes.append(len(levels))
    strata = None
    if columns and len(codes) == len(columns):  # all categorical: strata numbered in sorted order of their values
        combined = np.zeros(len(table), dtype=np.int64)
        for code, size in zip(codes, sizes, strict=True):
            combined = combined * size + code
        missing = np.any(np.stack(codes) < 0, axis=0)
        strata = np.full(len(table), -1)
        strata[~missing] = np.unique(combined[~missing], return_inverse=True)[1]
    return (np.hstack(parts) if parts else np.zeros((len(table), 0))), names, strata


def _factorize(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes into the sorted distinct values present, -1 for missing (as pd.get_dummies orders its columns);
    a categorical's observed categories in their own order, read from its codes without a factorize."""
    if not isinstance(values.dtype, pd.CategoricalDtype):
        codes, uniques = pd.factorize(values, sort=True)
        return codes, uniques.to_numpy(dtype=object)
    categories = values.dtype.categories.to_numpy(dtype=object)
    codes = values.array.codes
    observed = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=categories.size))
    remap = np.full(categories.size, -1)
    remap[observed] = np.arange(observed.size)
    return np.where(codes >= 0, remap[codes], -1), categories[observed]


def ape_true(outcomes: np.ndarray, control: np.ndarray) -> tuple[float, int]:
    """Mean paired difference (same window, perturbed vs clean) over windows where both exist."""
    valid = np.isfinite(outcomes) & np.isfinite(control)
    diff = outcomes[valid] - control[valid]
    return (float(diff.mean()) if diff.size else np.nan), int(valid.sum())


def draws_table(estimates: list[Estimate]) -> pd.DataFrame:
    """One row per Estimate: its three APEs, PIE% and balance (the run's effect draws)."""
    return pd.DataFrame([e.row() for e in estimates])


def summarise_effects(draws: pd.DataFrame) -> pd.DataFrame:
    """Means over the B draws plus their 2.5 / 97.5 percentiles (METHOD §5.1), one row per distribution."""
    keys = ["system", "perturbation", "scheme"]
    grouped = draws.groupby(keys, sort=True)
    out = grouped.agg(
        ape_true=("ape_true", "first"),
        windows=("windows", "first"),
        draws=("draw", "size"),
        ape_obs=("ape_obs", "mean"),
        ape_adj=("ape_adj", "mean"),
        pie=("pie", "mean"),
        unmatched=("unmatched", "mean"),
        smd_before=("smd_before", "mean"),
        smd_after=("smd_after", "mean"),
    )
    for col in ("ape_obs", "ape_adj", "pie"):
        out[f"{col}_lo"] = grouped[col].quantile(0.025)
        out[f"{col}_hi"] = grouped[col].quantile(0.975)
    # no apparent effect (APE_obs's interval covers 0): nothing to explain, PIE% undefined (METHOD §5.3)
    nothing = (out["ape_obs_lo"] <= 0) & (out["ape_obs_hi"] >= 0)
    out.loc[nothing, ["pie", "pie_lo", "pie_hi"]] = np.nan
    per_confounder = [c for c in draws.columns if c.startswith("smd_before:")]
    out["balance"] = [
        {
            c.split(":", 1)[1]: [float(means[c]), float(means[c.replace("before", "after", 1)])]
            for c in per_confounder
            if np.isfinite(means[c])
        }
        for _, means in grouped[[*per_confounder, *(c.replace("before", "after", 1) for c in per_confounder)]]
        .mean()
        .iterrows()
    ]
    return out.reset_index()
