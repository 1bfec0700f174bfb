"""Where a system is fragile (METHOD §5.5): heterogeneous perturbation effects with causalml.

The full factorial gives every window's individual effect exactly, ITE = R(p) − R(P0) on the same
window. causalml's causal tree, fit on both potential outcomes of every window (the clean and the
perturbed row stacked with a treatment indicator), splits the windows where the effect differs most:
its split gains are the drivers, its leaves readable rules. A cross-fitted copy says how much of the
ITE spread the covariates explain on windows it did not see (the dose of heterogeneity). The
self-check scores causalml meta-learners on the confounded observational draws against the true ITEs.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import logging
import warnings
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import special
from threadpoolctl import threadpool_limits

from causalrate.causal.effects import design_matrix
from causalrate.causal.estimate import Estimate
from causalrate.causal.matching import propensity
from causalrate.causal.schemes import SCHEMES
from causalrate.causal.welch import moments, two_sided_p, welch
from causalrate.data.characteristics import compute_characteristics
from causalrate.errors import UserError
from causalrate.logs import quieter
from causalrate.memo import OFF, Memo
from causalrate.seeding import stable_seed

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from causalrate.config import HeterogeneityConfig
    from causalrate.perturb import Perturbation
    from causalrate.study import Study

DISTANCE = "distance"  # input points between the latest perturbed point and the forecast origin (0 = the last)
MIN_LEAF_WINDOWS = 5
PROPENSITY_CLIP = 0.01  # the X- and DR-learners divide by p and 1 − p
MERGE_ALPHA = 0.05  # sibling leaves whose effects do not differ at this level are reported as one rule


INSTALL = "pip install causalml==0.15.5 'scikit-learn>=1.6,<1.8'"  # what the core declares (pyproject.toml)


def missing() -> str | None:
    """Why causalml cannot be used here (None when it can): a core dependency, absent only from a partial install.

    Only looked up, not imported (its import is slow): a re-rate whose fragility maps are in the memo needs none.
    """
    return "causalml is not installed" if importlib.util.find_spec("causalml") is None else None


def _causalml():
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


@dataclass(frozen=True)
class Covariates:
    """The tree's feature matrix: numeric covariates as they are, categorical attributes one-hot (every level)."""

    x: np.ndarray  # [windows, columns]
    columns: list[str]  # "level", "industry=Technology", ...
    sources: list[str]  # the covariate each column comes from ("industry"), for the drivers

    @classmethod
    def build(cls, table: pd.DataFrame, names: list[str]) -> Covariates:
        parts, columns, sources = [], [], []
        for name in names:
            values = table[name]
            if values.dtype.kind in "fiu":
                parts.append(values.to_numpy(dtype=float)[:, None])
                columns.append(name)
                sources.append(name)
                continue
            levels = sorted(values.dropna().unique())
            parts.append(np.stack([(values == v).to_numpy(dtype=float) for v in levels], axis=1))
            columns += [f"{name}={v}" for v in levels]
            sources += [name] * len(levels)
        x = np.hstack(parts) if parts else np.zeros((len(table), 0))
        return cls(np.nan_to_num(x, nan=0.0), columns, sources)


@dataclass(frozen=True)
class Rule:
    text: str
    cate: float  # mean ITE of the leaf's windows
    interval: tuple[float, float]  # normal 95 % interval of that mean
    share: float  # share of the windows in the leaf
    ratio: float  # cate / mean ITE over all windows


@dataclass(frozen=True)
class FragilityMap:
    drivers: list[tuple[str, float]]  # (covariate, share of the ITE variance it explains), most important first
    rules: list[Rule]
    spread: float  # fragility_spread: SD of the explained part of the ITE / mean clean outcome
    explained: float  # held-out share of the ITE variance the tree's CATE explains, in [0, 1]


def perturbed_distance(mask: np.ndarray) -> np.ndarray:
    """Per window [w, n]: points between the latest perturbed input point and the forecast origin; n if none."""
    n = mask.shape[1]
    last = n - 1 - np.argmax(mask[:, ::-1], axis=1)
    return np.where(mask.any(axis=1), n - 1 - last, n).astype(float)


def offsets_mask(offsets: pd.Series, windows: int, n: int) -> np.ndarray:
    """The perturbed-point mask from forecast rows' recorded `offsets` (JSON lists, 0 = oldest), indexed by window."""
    mask = np.zeros((windows, n), dtype=bool)
    for window, value in offsets.items():
        points = json.loads(value) if isinstance(value, str) else (value or [])
        mask[int(window), [int(p) for p in points]] = True
    return mask


def fit_tree(x: np.ndarray, control: np.ndarray, treated: np.ndarray, *, depth: int, leaf: int, seed: int):
    """causalml's causal tree on both potential outcomes of every window (control rows T=0, perturbed rows T=1).

    Both rows of a window share their covariates, so they share a leaf and each leaf's value is the
    exact paired mean ITE of its windows. causalml's honest split would separate a window's two rows
    and lose that pairing; overfitting is measured by cross-fitting instead (heldout_explained).
    """
    tree_cls, _, _ = _causalml()
    n = len(x)
    # every leaf holds both rows of each of its windows, so min_samples_leaf = 2·leaf is also `leaf` per group
    honest = {"honesty": False} if "honesty" in inspect.signature(tree_cls).parameters else {}  # causalml >= 0.16
    tree = tree_cls(
        max_depth=depth,
        min_samples_leaf=2 * leaf,
        min_samples_split=4 * leaf,
        control_name=0,
        random_state=seed,
        **honest,
    )
    treatment = np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    return tree.fit(X=np.vstack([x, x]), treatment=treatment, y=np.r_[control, treated])


def heldout_explained(
    x: np.ndarray, control: np.ndarray, treated: np.ndarray, blocks: np.ndarray, *, depth: int, leaf: int, seed: int
) -> float:
    """Two-fold cross-fitted R² of the ITE on the tree's CATE, clipped to [0, 1].

    Folds are whole blocks of neighbouring windows (overlapping windows share noise), so a tree that
    chased noise predicts the other fold no better than the mean: explained ≈ 0 for a homogeneous effect.
    """
    ite = treated - control
    codes = np.unique(blocks, return_inverse=True)[1]
    order = np.random.default_rng(seed).permutation(codes.max() + 1)
    fold = order[codes] % 2
    total = float(np.sum((ite - ite.mean()) ** 2))
    if total == 0 or fold.min() == fold.max():
        return 0.0
    pred = np.empty_like(ite)
    for k in (0, 1):
        train = fold != k
        tree = fit_tree(x[train], control[train], treated[train], depth=depth, leaf=leaf, seed=seed)
        pred[~train] = tree.predict(x[~train].astype(np.float32))
    return float(np.clip(1 - np.sum((ite - pred) ** 2) / total, 0.0, 1.0))


def fragility_map(
    cov: Covariates,
    control: np.ndarray,
    treated: np.ndarray,
    blocks: np.ndarray,
    *,
    depth: int,
    min_leaf: float,
    rules: int,
    seed: int,
) -> FragilityMap:
    """Drivers, rules and dose of heterogeneity of one system × perturbation (rows: windows where both exist)."""
    ite = treated - control
    leaf = max(MIN_LEAF_WINDOWS, int(np.ceil(min_leaf * len(ite))))
    tree = fit_tree(cov.x, control, treated, depth=depth, leaf=leaf, seed=seed)
    explained = heldout_explained(cov.x, control, treated, blocks, depth=depth, leaf=leaf, seed=seed)
    clean = float(np.mean(control))
    spread = float(np.std(ite) * np.sqrt(explained) / abs(clean)) if clean != 0 else np.nan
    return FragilityMap(
        drivers=drivers(tree.feature_importances_, cov.sources, explained),
        rules=leaf_rules(tree, cov, ite)[:rules],
        spread=spread,
        explained=explained,
    )


def drivers(importances: np.ndarray, sources: list[str], explained: float) -> list[tuple[str, float]]:
    """Per covariate (one-hot columns summed): its share of the tree's split gain times the held-out share
    of ITE variance explained, so the importances add up to `explained` and are all 0 when nothing is
    (a tree always splits somewhere, even on noise). Most important first, ties by name."""
    gain: dict[str, float] = dict.fromkeys(sources, 0.0)
    for value, source in zip(np.clip(importances, 0.0, None), sources, strict=True):
        gain[source] += float(value)
    total = sum(gain.values())
    shares = {k: (explained * v / total if total > 0 else 0.0) for k, v in gain.items()}
    return sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))


def leaf_rules(tree, cov: Covariates, ite: np.ndarray, *, alpha: float = MERGE_ALPHA) -> list[Rule]:
    """The tree's leaves as rules (their paths' conditions in words), largest effect first.

    Two sibling leaves whose windows' ITEs do not differ (Welch's t-test at `alpha`, Bonferroni over the
    tree's splits: the tree chose each split for its difference) are merged, bottom-up, so a rule keeps
    only the conditions that separate effects and reads as short as it can.
    """
    average = float(ite.mean())
    z = float(special.ndtri(0.975))  # the normal quantile (norm.ppf)
    splits = max(1, int(np.sum(tree.tree_.children_left != -1)))
    out = []
    for bounds, members in _readable_leaves(tree.tree_, cov.x.astype(np.float32), ite, alpha / splits):
        values = ite[members]
        cate = float(values.mean())
        half = z * float(values.std(ddof=1)) / np.sqrt(values.size) if values.size > 1 else np.nan
        ratio = cate / average if average != 0 else np.nan
        where = " and ".join(_condition(cov.columns[f], lo, hi) for f, (lo, hi) in sorted(bounds.items()))
        text = (
            f"effect {ratio:.2g}× the average ({cate:.3g} vs {average:.3g}) when {where}"
            if where
            else f"effect {cate:.3g} on every window (no covariate separates the windows)"
        )
        out.append(Rule(text, cate, (cate - half, cate + half), values.size / ite.size, ratio))
    return sorted(out, key=lambda r: (-r.cate, r.text))


def _readable_leaves(t, x: np.ndarray, ite: np.ndarray, alpha: float) -> list[tuple[dict, np.ndarray]]:
    """(bounds {feature: (lower, upper]}, window mask) per leaf of a fitted sklearn-style tree, with sibling
    leaves of indistinguishable effect merged into their parent."""

    def visit(node: int, members: np.ndarray, bounds: dict) -> list[tuple[dict, np.ndarray]]:
        left, right = t.children_left[node], t.children_right[node]
        if left == -1 or not members.any():
            return [(bounds, members)]
        f, thr = int(t.feature[node]), float(t.threshold[node])
        lo, hi = bounds.get(f, (-np.inf, np.inf))
        goes_left = x[:, f] <= thr  # the tree's own test, on float32 features
        lower = visit(left, members & goes_left, {**bounds, f: (lo, min(hi, thr))})
        upper = visit(right, members & ~goes_left, {**bounds, f: (max(lo, thr), hi)})
        if len(lower) == len(upper) == 1 and not _differ(ite[lower[0][1]], ite[upper[0][1]], alpha):
            return [(bounds, members)]
        return [leaf for leaf in lower + upper if leaf[1].any()]

    return visit(0, np.ones(len(x), dtype=bool), {})


def _differ(a: np.ndarray, b: np.ndarray, alpha: float) -> bool:
    """Whether two groups' mean ITEs differ: Welch's test at `alpha` under its edge rule (causal.welch:
    constant groups differ when their values do; a group of fewer than two windows is no evidence)."""
    t, df = welch(*moments(a), *moments(b))
    return bool(two_sided_p(t, df) < alpha)


def _condition(column: str, lo: float, hi: float) -> str:
    """lo < column ≤ hi in plain words."""
    if "=" in column:
        name, value = column.split("=", 1)
        return f"{name} is {value}" if lo >= 0.5 else f"{name} is not {value}"
    if column == DISTANCE:
        nearest, farthest = int(np.floor(lo)) + 1 if np.isfinite(lo) else 0, np.floor(hi)
        if not np.isfinite(hi):
            return f"the perturbed point is at least {nearest} points before the forecast origin"
        if nearest == 0:
            last = int(farthest) + 1
            return (
                "the perturbed point is the last input point"
                if last == 1
                else (f"the perturbed point is among the last {last} input points")
            )
        return f"the perturbed point is {nearest} to {int(farthest)} points before the forecast origin"
    if np.isfinite(lo) and np.isfinite(hi):
        return f"{lo:.4g} < {column} ≤ {hi:.4g}"
    return f"{column} > {lo:.4g}" if np.isfinite(lo) else f"{column} ≤ {hi:.4g}"


def meta_learners(seed: int) -> dict:
    """causalml's X-learner and doubly robust learner on small scikit-learn gradient-boosted trees.

    10 boosting rounds at learning rate 0.35 fit these few hundred windows about as well as 40 at 0.1 did
    (tests/test_heterogeneity.py's confounded draw: PEHE 0.083 vs 0.080 for the X-learner, 0.173 vs 0.169 for
    the DR learner), at a quarter of the cost: the 13 fits per draw were most of the analysis stage's time.
    """
    from sklearn.ensemble import HistGradientBoostingRegressor

    _, x_learner, dr_learner = _causalml()

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


@dataclass(frozen=True)
class Heterogeneity:
    doc: dict  # the ratings.json section: {system: {perturbation: {drivers, rules, spread, explained, ...}}}
    spreads: pd.DataFrame  # system, perturbation, raw (= spread): the fragility_spread score


def assess_heterogeneity(
    study: Study,
    forecasts: pd.DataFrame,
    outcomes: dict[str, pd.DataFrame],
    estimates: list[Estimate],
    memo: Memo = OFF,
) -> Heterogeneity | None:
    """The fragility map (and self-check) of every system × perturbation; None when switched off or impossible.

    Without a usable causalml (a partial install) `assess` and `rate` alike skip it and say so on stderr;
    fragility_spread is then listed as not rated in ratings.json, with the same reason and command.
    """
    cfg = study.config.heterogeneity
    if not cfg.enabled:
        return None
    why = missing()
    if why:
        log.warning("no fragility map: %s; add it with: %s", why, INSTALL)
        return None
    # small fits: OpenMP threads only contend (the machine may be busy); causalml 0.15.5 still passes
    # scikit-learn 1.6-1.7 the old keyword: its own business, not the user's (silenced here, not process-wide)
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="'force_all_finite' was renamed", category=FutureWarning)
        return _assess(study, forecasts, outcomes, estimates, memo)


def _assess(
    study: Study, forecasts: pd.DataFrame, outcomes: dict[str, pd.DataFrame], estimates: list[Estimate], memo: Memo
) -> Heterogeneity:
    cfg = study.config.heterogeneity
    table, n = study.table, study.config.windows.input_length
    missing = [c for c in cfg.covariates if c not in table]
    period = study.config.causal.stl_period
    extra = memo(
        "characteristics",
        (study.windows.inputs, missing, period),
        lambda: compute_characteristics(study.windows.inputs, missing, period=period),
        encode=lambda cols: {k: v.tolist() for k, v in cols.items()},
        decode=lambda cols: {k: np.asarray(v, dtype=float) for k, v in cols.items()},
    )
    frame = table.assign(**extra)
    names = [*study.dataset.attribute_names, *cfg.covariates, DISTANCE]
    blocks = (table["series"].astype(str) + ":" + (table["start"] // n).astype(str)).to_numpy()
    by_cell: dict[tuple[str, str], list[Estimate]] = {}
    for e in estimates:
        by_cell.setdefault((e.system, e.perturbation), []).append(e)
    doc: dict = {}
    spreads = []
    for system, wide in outcomes.items():
        for p in study.suite[1:]:
            inputs = (
                frame, names, blocks, wide[study.control].to_numpy(), wide[p.id].to_numpy(),
                _perturbed_mask(forecasts, system, p, table["start"].to_numpy(), n),
                by_cell.get((system, p.id), []), cfg, study.config.seed,
                stable_seed(study.config.seed, "heterogeneity", system, p.id) % 2**32,
            )  # fmt: skip
            entry = memo("fragility", inputs, partial(fragility_cell, *inputs))
            if entry is None:
                continue
            doc.setdefault(system, {})[p.id] = entry
            spreads.append({"system": system, "perturbation": p.id, "raw": entry["spread"]})
    return Heterogeneity(doc, pd.DataFrame(spreads, columns=["system", "perturbation", "raw"]))


def fragility_cell(
    frame: pd.DataFrame,
    names: list[str],
    blocks: np.ndarray,
    control: np.ndarray,
    treated: np.ndarray,
    mask: np.ndarray,
    estimates: list[Estimate],
    cfg: HeterogeneityConfig,
    seed: int,
    tree_seed: int,
) -> dict | None:
    """The fragility map of one system × perturbation (ratings.json's entry), None with too few windows.

    `frame`: the window table with the covariates; `control`/`treated`: the outcomes per window; `mask`:
    the perturbed input points; `estimates`: this cell's draws (the self-check's samples).
    """
    valid = np.isfinite(control) & np.isfinite(treated)
    if valid.sum() < 4 * MIN_LEAF_WINDOWS:
        return None
    local = frame.assign(**{DISTANCE: perturbed_distance(mask)}).loc[valid]
    cov = Covariates.build(local, names)
    fmap = fragility_map(
        cov, control[valid], treated[valid], blocks[valid],
        depth=cfg.max_depth, min_leaf=cfg.min_leaf, rules=cfg.rules, seed=tree_seed,
    )  # fmt: skip
    ite = treated[valid] - control[valid]
    main = fmap.drivers[0][0] if fmap.drivers and fmap.drivers[0][1] > 0 else None
    checks = (
        selfcheck(frame.loc[valid], cov, ite, estimates, seed=seed, limit=cfg.selfcheck_draws)
        if cfg.selfcheck else []
    )  # fmt: skip
    return {
        "drivers": [{"covariate": c, "importance": v} for c, v in fmap.drivers],
        "rules": [r.__dict__ | {"interval": list(r.interval)} for r in fmap.rules],
        "spread": fmap.spread,
        "explained": fmap.explained,
        "profile": driver_profile(main, local, ite),
        "selfcheck": checks,
        **({"selfcheck_skipped": why} if cfg.selfcheck and (why := selfcheck_skipped(checks, estimates)) else {}),
    }


def _perturbed_mask(forecasts: pd.DataFrame, system: str, p: Perturbation, starts: np.ndarray, n: int) -> np.ndarray:
    """Which input points each window had perturbed: the forecast rows' recorded offsets when the store has
    them (placements that vary per window), else the suite's own positions."""
    if "offsets" in forecasts:
        rows = forecasts[(forecasts["system"] == system) & (forecasts["perturbation"] == p.id)]
        recorded = rows.set_index("window")["offsets"].dropna()
        if len(recorded):
            return offsets_mask(recorded, len(starts), n)
    return p.mask(starts, n)


def driver_profile(driver: str | None, frame: pd.DataFrame, ite: np.ndarray, bins: int = 8) -> dict:
    """Mean ITE along the main driver (quantile bins, or one point per category): the card's chart."""
    if driver is None:
        return {}
    values = frame[driver].reset_index(drop=True)
    numeric = values.dtype.kind in "fiu"
    groups = pd.qcut(values.rank(method="first"), q=min(bins, values.size), labels=False) if numeric else values
    points = []
    for key, idx in pd.Series(range(values.size)).groupby(groups.to_numpy(), sort=True):
        members = idx.to_numpy()
        x = float(values.iloc[members].median()) if numeric else str(key)
        points.append({"x": x, "ite": float(ite[members].mean()), "n": int(members.size)})
    return {"covariate": driver, "points": points}


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
