"""Propensity scores and tie-safe nearest-neighbour matching (METHOD §5.4).

With categorical confounders propensities take a few values only; deterministic
1-NN then sends every treated unit to the same control. Here every unit is matched
to a control drawn uniformly at random among all controls at the nearest distance
(with replacement, within a caliper on the logit propensity), so ties spread
over the whole stratum and the estimate is unbiased.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causalrate.memo import OFF, Memo

TIE_TOLERANCE = 1e-9


def propensity(
    features: np.ndarray, treated: np.ndarray, *, strata: np.ndarray | None = None, memo: Memo = OFF
) -> np.ndarray:
    """P(treated | features) from a logistic regression (constant when there are no features).

    `strata` (integer codes, one per row; for all-categorical designs) lets a saturated design —
    one-hot confounders whose distinct rows are the strata — skip the optimiser: its logistic MLE
    is exactly the treated share of each stratum. Every other design is fitted, and `memo` (the run's)
    keeps the fit's propensities, so a re-rate neither refits nor imports scikit-learn.
    """
    if features.shape[1] == 0 or treated.all() or not treated.any():
        return np.full(treated.size, treated.mean())
    if strata is not None:
        codes, first, inverse = np.unique(strata, return_index=True, return_inverse=True)
        cells = features[first]
        if len(codes) <= features.shape[1] + 1 and np.linalg.matrix_rank(np.c_[np.ones(len(cells)), cells]) == len(
            cells
        ):
            return (np.bincount(inverse, weights=treated) / np.bincount(inverse))[inverse]
    return memo("propensity", (features, treated), lambda: _logistic(features, treated), decode=np.asarray)


def _logistic(features: np.ndarray, treated: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression  # only designs that are not saturated need it

    model = LogisticRegression(C=1e6, max_iter=1000, solver="newton-cholesky")  # exact Newton: many rows, few columns
    model.fit(features, treated)
    return model.predict_proba(features)[:, 1]


def nearest_with_ties(query: np.ndarray, pool: np.ndarray, *, caliper: float, rng: np.random.Generator) -> np.ndarray:
    """For each query value, the index of a pool value at the smallest distance, ties broken at random.

    Returns -1 where the nearest pool value is farther than `caliper`.
    """
    if pool.size == 0:  # nobody to match (a draw that leaves an arm empty on few windows)
        return np.full(query.size, -1)
    order = np.argsort(pool, kind="stable")
    ordered = pool[order]
    pos = np.searchsorted(ordered, query)
    left = np.where(pos > 0, query - ordered[np.maximum(pos - 1, 0)], np.inf)
    right = np.where(pos < ordered.size, ordered[np.minimum(pos, ordered.size - 1)] - query, np.inf)
    dist = np.minimum(left, right)
    lo = np.searchsorted(ordered, query - dist - TIE_TOLERANCE, side="left")
    hi = np.searchsorted(ordered, query + dist + TIE_TOLERANCE, side="right")
    pick = lo + np.floor(rng.random(query.size) * (hi - lo)).astype(int)
    return np.where(dist <= caliper, order[np.minimum(pick, ordered.size - 1)], -1)


@dataclass(frozen=True)
class MatchResult:
    ate: float
    att: float
    atc: float
    unmatched: int  # units with no partner inside the caliper (dropped)
    smd_before: np.ndarray  # per feature column
    smd_after: np.ndarray


@dataclass(frozen=True)
class MatchPlan:
    """Who is matched to whom, and the balance that gives: a function of the design, the assignment and
    the seed only, never of the outcome, so every system observed on the same sample shares one plan."""

    treated: np.ndarray  # matched treated units (ATT side) ...
    treated_partners: np.ndarray  # ... and the control each one is compared with
    controls: np.ndarray  # matched control units (ATC side) ...
    control_partners: np.ndarray  # ... and the treated unit each one is compared with
    unmatched: int  # units with no partner inside the caliper (dropped)
    smd_before: np.ndarray  # per feature column
    smd_after: np.ndarray

    def apply(self, outcome: np.ndarray) -> MatchResult:
        """ATT, ATC and their size-weighted mean (the ATE) of `outcome` over the matched pairs."""
        n_t, n_c = self.treated.size, self.controls.size
        att = float(np.mean(outcome[self.treated] - outcome[self.treated_partners])) if n_t else np.nan
        atc = float(np.mean(outcome[self.control_partners] - outcome[self.controls])) if n_c else np.nan
        ate = float(np.nansum([att * n_t, atc * n_c]) / (n_t + n_c)) if n_t + n_c else np.nan
        return MatchResult(ate, att, atc, self.unmatched, self.smd_before, self.smd_after)


def smd(features: np.ndarray, treated: np.ndarray) -> np.ndarray:
    """Standardised mean difference per column: (mean_t - mean_c) / sqrt((var_t + var_c) / 2)."""
    return weighted_smd(features, treated.astype(float)[None], (~treated).astype(float)[None])[0]


def weighted_smd(features: np.ndarray, w_t: np.ndarray, w_c: np.ndarray) -> np.ndarray:
    """SMD [k, columns] of k pairs of samples given as counts per row [k, rows] (a matched sample with
    replacement needs no copies; several pairs share one pass over the features)."""
    n_t, n_c = w_t.sum(axis=1)[:, None], w_c.sum(axis=1)[:, None]
    out = np.zeros((len(w_t), features.shape[1]))
    if features.shape[1] == 0:
        return out
    sums, squares = np.vstack([w_t, w_c]) @ features, np.vstack([w_t, w_c]) @ features**2
    k = len(w_t)
    with np.errstate(divide="ignore", invalid="ignore"):  # empty or single-unit sides are zeroed below
        m_t, m_c = sums[:k] / n_t, sums[k:] / n_c
        v_t = (squares[:k] - n_t * m_t**2) / (n_t - 1)
        v_c = (squares[k:] - n_c * m_c**2) / (n_c - 1)
        pooled = np.sqrt(np.maximum((v_t + v_c) / 2, 0))
        out = np.where(pooled > 1e-12, (m_t - m_c) / pooled, 0.0)
    return np.where((n_t >= 2) & (n_c >= 2), out, 0.0)  # fewer than two units a side: no spread to scale by


def match_plan(
    features: np.ndarray,
    treated: np.ndarray,
    *,
    caliper_sd: float,
    rng: np.random.Generator,
    scores: np.ndarray | None = None,
) -> MatchPlan:
    """Matching both ways on the logit propensity: treated→controls (ATT) and controls→treated (ATC).

    `scores`: propensities already fitted on (features, treated), when the caller has them.
    """
    ps = np.clip(propensity(features, treated) if scores is None else scores, 1e-12, 1 - 1e-12)
    logit = np.log(ps / (1 - ps))
    sd = logit.std()
    caliper = caliper_sd * sd if sd > 0 else np.inf
    t_idx, c_idx = np.flatnonzero(treated), np.flatnonzero(~treated)
    to_control = nearest_with_ties(logit[t_idx], logit[c_idx], caliper=caliper, rng=rng)
    to_treated = nearest_with_ties(logit[c_idx], logit[t_idx], caliper=caliper, rng=rng)
    ok_t, ok_c = to_control >= 0, to_treated >= 0
    matched_t, partner_c = t_idx[ok_t], c_idx[to_control[ok_t]]
    matched_c, partner_t = c_idx[ok_c], t_idx[to_treated[ok_c]]
    # balance of the matched sample: treated side = treated ∪ partners of controls, and vice versa
    n = treated.size
    side_t = np.bincount(matched_t, minlength=n) + np.bincount(partner_t, minlength=n)
    side_c = np.bincount(partner_c, minlength=n) + np.bincount(matched_c, minlength=n)
    before, after = weighted_smd(  # the sample's and the matched sample's balance, in one pass
        features, np.stack([treated, side_t]).astype(float), np.stack([~treated, side_c]).astype(float)
    )
    return MatchPlan(
        treated=matched_t,
        treated_partners=partner_c,
        controls=matched_c,
        control_partners=partner_t,
        unmatched=int((~ok_t).sum() + (~ok_c).sum()),
        smd_before=before,
        smd_after=after,
    )
