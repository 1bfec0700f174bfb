"""APE_true / APE_obs / APE_adj and PIE% (METHOD §5.2–5.4) over B seeded observational draws."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalrate.causal.graph import Identification, identify
from causalrate.causal.matching import match_ate, propensity, smd
from causalrate.causal.schemes import SCHEMES
from causalrate.seeding import rng

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


def identify_schemes(settings: DrawSettings, attributes: list[str]) -> dict[str, Identification]:
    """dowhy identification per scheme; the graph's confounders are Z, the covariates and the scheme's own driver."""
    out = {}
    for name in settings.schemes:
        confounders = sorted({*attributes, *settings.covariates, *SCHEMES.get(name).confounders})
        out[name] = identify(confounders)
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
            code, levels = pd.factorize(values, sort=True)  # sorted levels, -1 for missing: as pd.get_dummies
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


def scheme_probabilities(windows: pd.DataFrame, settings: DrawSettings) -> dict[str, np.ndarray]:
    """P(perturbed | window) per scheme: the observational assignment every draw samples from."""
    return {
        name: SCHEMES.get(name)().probabilities(windows, high=settings.high, low=settings.low)
        for name in settings.schemes
    }


def treatment_draw(
    settings: DrawSettings, scheme: str, perturbation: str, b: int, probability: np.ndarray
) -> np.ndarray:
    """Draw b of the scheme's assignment: depends only on (seed, scheme, perturbation, b), never on the system."""
    return rng(settings.seed, scheme, perturbation, b).random(probability.size) < probability


def ape_true(outcomes: np.ndarray, control: np.ndarray) -> tuple[float, int]:
    """Mean paired difference (same window, perturbed vs clean) over windows where both exist."""
    valid = np.isfinite(outcomes) & np.isfinite(control)
    diff = outcomes[valid] - control[valid]
    return (float(diff.mean()) if diff.size else np.nan), int(valid.sum())


def estimate_effects(
    *,
    windows: pd.DataFrame,
    outcomes: dict[str, pd.DataFrame],
    control: str,
    settings: DrawSettings,
    identification: dict[str, Identification],
) -> pd.DataFrame:
    """One row per (system, perturbation, scheme, draw) with the three APEs, PIE% and balance.

    `windows`: per-window attributes and covariates, one row per window (same order as the outcomes).
    `outcomes[system]`: windows × perturbations, NaN where the forecast failed.
    Treatment draws depend only on (seed, scheme, perturbation, draw), so every system sees the same
    observational assignment: a fair comparison.
    """
    rows = []
    fitted: dict[tuple, np.ndarray] = {}  # propensities depend on the draw and the valid windows, not the system
    probabilities = scheme_probabilities(windows, settings)
    for system, table in outcomes.items():
        base = table[control].to_numpy()
        for perturbation in [c for c in table.columns if c != control]:
            treated_outcome = table[perturbation].to_numpy()
            truth, n_valid = ape_true(treated_outcome, base)
            valid = np.isfinite(treated_outcome) & np.isfinite(base)
            for scheme in settings.schemes:
                adjust = identification[scheme].adjustment_set
                features, names, strata = design_matrix(windows.loc[valid], adjust)
                for b in range(settings.draws):
                    draw = treatment_draw(settings, scheme, perturbation, b, probabilities[scheme])
                    t = draw[valid]
                    if t.all() or not t.any():
                        continue
                    y = np.where(t, treated_outcome[valid], base[valid])
                    obs = float(y[t].mean() - y[~t].mean())
                    key = (scheme, perturbation, b, valid.tobytes())
                    if key not in fitted:
                        fitted[key] = (propensity(features, t, strata=strata), smd(features, t))
                    match = match_ate(
                        features,
                        t,
                        y,
                        caliper_sd=settings.caliper,
                        rng=rng(settings.seed, "match", scheme, perturbation, b),
                        scores=fitted[key][0],
                        before=fitted[key][1],
                    )
                    rows.append(
                        {
                            "system": system,
                            "perturbation": perturbation,
                            "scheme": scheme,
                            "draw": b,
                            "windows": n_valid,
                            "treated": int(t.sum()),
                            "ape_true": truth,
                            "ape_obs": obs,
                            "ape_adj": match.ate,
                            "pie": 100 * abs(obs - match.ate) / max(abs(obs), PIE_EPSILON),
                            "unmatched": match.unmatched,
                            "smd_before": float(np.max(np.abs(match.smd_before), initial=0.0)),
                            "smd_after": float(np.max(np.abs(match.smd_after), initial=0.0)),
                            **{f"smd_before:{n}": abs(v) for n, v in zip(names, match.smd_before, strict=True)},
                            **{f"smd_after:{n}": abs(v) for n, v in zip(names, match.smd_after, strict=True)},
                        }
                    )
    return pd.DataFrame(rows)


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
