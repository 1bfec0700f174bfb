"""causalml's learners: whether causalml can be used here (a core dependency, imported on first use: its
import is slow), and the self-check of METHOD §5.5, which scores its meta-learners on the confounded
observational draws against the true individual effects the full factorial gives.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from causalrate.causal.effects import design_matrix
from causalrate.causal.estimate import Estimate
from causalrate.causal.matching import propensity
from causalrate.causal.schemes import SCHEMES
from causalrate.errors import UserError
from causalrate.logs import quieter
from causalrate.seeding import stable_seed

if TYPE_CHECKING:
    from causalrate.causal.fragility import Covariates

PROPENSITY_CLIP = 0.01  # the X- and DR-learners divide by p and 1 − p


INSTALL = "pip install causalml==0.15.5 'scikit-learn>=1.6,<1.8'"  # what the core declares (pyproject.toml)


def missing() -> str | None:
    """Why causalml cannot be used here (None when it can): a core dependency, absent only from a partial install.

    Only looked up, not imported (its import is slow): a re-rate whose fragility maps are in the memo needs none.
    """
    return "causalml is not installed" if importlib.util.find_spec("causalml") is None else None


def estimators():
    """causalml's estimators, imported on first use (its import is slow)."""
    try:
        with quieter("duecredit", logging.CRITICAL):  # forestci logs an error when duecredit is absent
            from causalml.inference.meta import BaseDRRegressor, BaseXRegressor
            from causalml.inference.tree import CausalTreeRegressor
    except ImportError as exc:  # e.g. its compiled tree against another scikit-learn
        raise UserError(
            f"heterogeneity: causalml does not import ({exc}); reinstall it with {INSTALL}, "
            "or switch the fragility map off with heterogeneity: {enabled: false}"
        ) from None
    return CausalTreeRegressor, BaseXRegressor, BaseDRRegressor


def meta_learners(seed: int) -> dict:
    """causalml's X-learner and doubly robust learner on small scikit-learn gradient-boosted trees.

    10 boosting rounds at learning rate 0.35 fit these few hundred windows about as well as 40 at 0.1 did
    (tests/test_heterogeneity.py's confounded draw: PEHE 0.083 vs 0.080 for the X-learner, 0.173 vs 0.169 for
    the DR learner), at a quarter of the cost: the 13 fits per draw were most of the analysis stage's time.
    """
    from sklearn.ensemble import HistGradientBoostingRegressor

    _, x_learner, dr_learner = estimators()

    def base():
        return HistGradientBoostingRegressor(
            max_iter=10, learning_rate=0.35, max_depth=3, min_samples_leaf=10, random_state=seed % 2**32
        )

    return {"x_learner": x_learner(learner=base()), "dr_learner": dr_learner(learner=base())}


def selfcheck_draw(
    features: np.ndarray, treated: np.ndarray, y: np.ndarray, ite: np.ndarray, propensity: np.ndarray, *, seed: int
) -> list[dict]:
    """PEHE and Spearman rank correlation of each meta-learner's CATE vs the true ITEs on one draw,
    beside the PEHE of the naive difference in means taken as a constant CATE."""
    from scipy.stats import spearmanr  # fitting only: a re-rate reads the map from its memo

    naive = float(y[treated].mean() - y[~treated].mean())
    p = np.clip(propensity, PROPENSITY_CLIP, 1 - PROPENSITY_CLIP)
    rows = []
    for name, learner in meta_learners(seed).items():
        t = treated.astype(int)
        try:
            if name == "dr_learner":
                learner.fit(X=features, treatment=t, y=y, p=p, seed=seed % 2**32)
            else:
                learner.fit(X=features, treatment=t, y=y, p=p)
        except ValueError:  # a cross-fitting fold with no window of an arm (few windows): no check of this draw
            return []
        cate = np.asarray(learner.predict(X=features, p=p, verbose=False), dtype=float).ravel()
        corr = spearmanr(cate, ite).statistic if np.ptp(cate) > 0 and np.ptp(ite) > 0 else np.nan
        rows.append(
            {
                "learner": name,
                "pehe": float(np.sqrt(np.mean((cate - ite) ** 2))),
                "rank_corr": float(corr),
                "pehe_naive": float(np.sqrt(np.mean((naive - ite) ** 2))),
            }
        )
    return rows


SELFCHECK_MIN_ARM = 10  # windows per arm (perturbed, clean) a meta-learner self-check draw needs


def selfcheck_skipped(checks: list[dict], estimates: list[Estimate]) -> str | None:
    """Why the self-check has no row for a confounded scheme of the cell: too few windows in an arm."""
    confounded = {e.scheme for e in estimates if SCHEMES.get(e.scheme).confounders}
    missing = sorted(confounded - {c["scheme"] for c in checks})
    if not missing:
        return None
    return (
        f"no meta-learner self-check for {', '.join(missing)}: its draws have fewer than {SELFCHECK_MIN_ARM} "
        "windows perturbed or clean (more windows: a longer period, more series or a smaller stride)"
    )


def selfcheck(
    windows: pd.DataFrame, cov: Covariates, ite: np.ndarray, estimates: list[Estimate], *, seed: int, limit: int
) -> list[dict]:
    """Meta-learners on the first `limit` draws of every confounded scheme (the Estimates APE_adj comes from),
    averaged. `windows`, `cov` and `ite` cover the estimates' valid windows; `estimates`: one system × perturbation."""
    out = []
    for scheme in dict.fromkeys(e.scheme for e in estimates):
        if not SCHEMES.get(scheme).confounders:
            continue  # randomized: nothing to deconfound
        chosen = [e for e in estimates if e.scheme == scheme and e.draw < limit]
        if not chosen:
            continue
        features, _, strata = design_matrix(windows, chosen[0].estimator.adjustment_set)
        x = np.hstack([features, cov.x])
        rows = []
        for e in chosen:
            t = e.treated
            if min(int(t.sum()), int((~t).sum())) < SELFCHECK_MIN_ARM:
                continue  # the learners' cross-fitting needs windows in both arms (skipped(): the reason)
            score = propensity(features, t, strata=strata)
            rows += selfcheck_draw(
                x, t, e.outcome, ite, score, seed=stable_seed(seed, "selfcheck", scheme, e.perturbation, e.draw)
            )
        if not rows:
            continue
        means = pd.DataFrame(rows).groupby("learner", sort=True).mean()
        out += [{"scheme": scheme, "learner": name, **row} for name, row in means.to_dict("index").items()]
    return out
