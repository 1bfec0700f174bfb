"""One estimate per (system, perturbation, scheme, draw): the causal stage's single source (METHOD §5.2–5.4).

Follows dowhy's shape: identify (effects.identify_schemes) → estimate (an `Estimate` that carries
its estimator and its observational sample) → refute (refute.refute takes the Estimate). The
effect summary, the rigor layer, the refuters and the heterogeneity self-check all read these
objects; none of them draws treatments again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from causalrate.causal.effects import PIE_EPSILON, DrawSettings, ape_true, design_matrix
from causalrate.causal.graph import OUTCOME, TREATMENT, Identification
from causalrate.causal.matching import MatchPlan, MatchResult, match_plan, propensity
from causalrate.causal.schemes import SCHEMES, drawer
from causalrate.memo import OFF, Memo
from causalrate.seeding import rng


@dataclass(frozen=True)
class Matching:
    """APE_adj's estimator: tie-safe propensity matching both ways on the adjustment set, within a caliper."""

    adjustment_set: tuple[str, ...]
    caliper_sd: float

    def plan(
        self,
        features: np.ndarray,
        treated: np.ndarray,
        *,
        rng: np.random.Generator,
        strata: np.ndarray | None = None,
        memo: Memo = OFF,
    ) -> MatchPlan:
        """The matched pairs of one sample; `strata` (design_matrix's) lets a saturated design skip the optimiser,
        and `memo` (the run's) keeps the propensities of every design that needs a logistic fit."""
        scores = propensity(features, treated, strata=strata, memo=memo)
        return match_plan(features, treated, caliper_sd=self.caliper_sd, rng=rng, scores=scores)


@dataclass(frozen=True, eq=False)
class Estimate:
    """One observational sample of the full factorial and its three APEs.

    Arrays are shared, not copied: `assignment` by every system's estimate of the same
    (scheme, perturbation, draw); `valid`, `perturbed` and `clean` by the system's draws of one perturbation.
    """

    system: str
    perturbation: str
    scheme: str
    draw: int
    assignment: np.ndarray  # bool per window: perturbed in this draw (Scheme.draw)
    valid: np.ndarray  # bool per window: both the perturbed and the clean forecast exist
    perturbed: np.ndarray  # outcome of the perturbed forecast, valid windows
    clean: np.ndarray  # outcome of the clean forecast, valid windows
    ape_true: float  # mean paired difference over the valid windows (the same for every draw)
    ape_obs: float  # naive difference in mean observed outcome, treated minus control
    match: MatchResult  # the estimator's result: ATE, ATT, ATC, balance
    estimator: Matching
    balance_names: tuple[str, ...]  # the design's columns, for the per-confounder SMDs

    @property
    def treated(self) -> np.ndarray:
        """The assignment over the valid windows (the sample's treatment P)."""
        return self.assignment[self.valid]

    @property
    def outcome(self) -> np.ndarray:
        """The observed outcome R: the perturbed forecast's where treated, the clean one's elsewhere."""
        return np.where(self.treated, self.perturbed, self.clean)

    @property
    def ape_adj(self) -> float:
        return self.match.ate

    @property
    def abs_adj(self) -> float:
        return abs(self.match.ate)

    @property
    def pie(self) -> float:
        obs = self.ape_obs
        return 100 * abs(obs - self.ape_adj) / max(abs(obs), PIE_EPSILON)

    def sample(self, windows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
        """The observational sample as a dowhy frame: the valid windows' `columns`, treatment P and outcome R."""
        frame = windows.loc[self.valid, columns].reset_index(drop=True)
        frame[TREATMENT] = self.treated
        frame[OUTCOME] = self.outcome
        return frame

    def row(self) -> dict:
        """The draws table's row (effects.draws_table)."""
        m = self.match
        return {
            "system": self.system,
            "perturbation": self.perturbation,
            "scheme": self.scheme,
            "draw": self.draw,
            "windows": int(self.valid.sum()),
            "treated": int(self.treated.sum()),
            "ape_true": self.ape_true,
            "ape_obs": self.ape_obs,
            "ape_adj": self.ape_adj,
            "pie": self.pie,
            "unmatched": m.unmatched,
            "smd_before": float(np.max(np.abs(m.smd_before), initial=0.0)),
            "smd_after": float(np.max(np.abs(m.smd_after), initial=0.0)),
            **{f"smd_before:{n}": abs(v) for n, v in zip(self.balance_names, m.smd_before, strict=True)},
            **{f"smd_after:{n}": abs(v) for n, v in zip(self.balance_names, m.smd_after, strict=True)},
        }


def estimate_all(
    *,
    windows: pd.DataFrame,
    outcomes: dict[str, pd.DataFrame],
    control: str,
    settings: DrawSettings,
    identification: dict[str, Identification],
    memo: Memo = OFF,
) -> list[Estimate]:
    """Every (system, perturbation, scheme, draw)'s Estimate, in that order.

    `windows`: per-window attributes and covariates, one row per window (same order as the outcomes).
    `outcomes[system]`: windows × perturbations, NaN where the forecast failed.
    Each assignment comes from its scheme's `draw` with a stream seeded by (seed, scheme, perturbation,
    draw) only, so every system sees the same observational assignment: a fair comparison. A draw
    that perturbs all or none of a system's valid windows has no estimate. `memo`: the run's, for the
    logistic propensities (matching.propensity).
    """
    high, low = settings.high, settings.low
    draws = {name: drawer(SCHEMES.get(name)(), windows, high=high, low=low) for name in settings.schemes}
    estimators = {name: Matching(identification[name].adjustment_set, settings.caliper) for name in settings.schemes}
    assignments: dict[tuple[str, str, int], np.ndarray] = {}
    # the design, and the matched pairs of a draw, depend on the sample (the valid windows), never on the
    # outcome: systems whose forecasts cover the same windows share them (10 systems, one matching)
    designs: dict[tuple[str, bytes], tuple] = {}
    plans: dict[tuple[str, str, int, bytes], MatchPlan] = {}
    out = []
    for system, table in outcomes.items():
        base = table[control].to_numpy()
        for perturbation in [c for c in table.columns if c != control]:
            treated_outcome = table[perturbation].to_numpy()
            truth, _ = ape_true(treated_outcome, base)
            valid = np.isfinite(treated_outcome) & np.isfinite(base)
            sample = valid.tobytes()
            perturbed, clean = treated_outcome[valid], base[valid]
            for scheme, estimator in estimators.items():
                if (scheme, sample) not in designs:
                    designs[scheme, sample] = design_matrix(windows.loc[valid], estimator.adjustment_set)
                features, names, strata = designs[scheme, sample]
                for b in range(settings.draws):
                    key = (scheme, perturbation, b)
                    if key not in assignments:
                        assignments[key] = draws[scheme](rng(settings.seed, *key))
                    t = assignments[key][valid]
                    if t.all() or not t.any():
                        continue
                    shared = (*key, sample)
                    if shared not in plans:
                        stream = rng(settings.seed, "match", *key)
                        plans[shared] = estimator.plan(features, t, rng=stream, strata=strata, memo=memo)
                    y = np.where(t, perturbed, clean)
                    match = plans[shared].apply(y)
                    cell = (system, perturbation, scheme, b, assignments[key], valid, perturbed, clean, truth)
                    obs = float(y[t].mean() - y[~t].mean())
                    out.append(Estimate(*cell, obs, match, estimator, tuple(names)))
    return out
