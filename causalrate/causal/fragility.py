"""The fragility map of one system × perturbation (METHOD §5.5): where its perturbation effect differs.

The full factorial gives every window's individual effect exactly, ITE = R(p) − R(P0) on the same
window. causalml's causal tree, fit on both potential outcomes of every window (the clean and the
perturbed row stacked with a treatment indicator), splits the windows where the effect differs most:
its split gains are the drivers, its leaves readable rules. A cross-fitted copy says how much of the
ITE spread the covariates explain on windows it did not see (the dose of heterogeneity).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from causalrate.causal.learners import estimators
from causalrate.causal.welch import moments, two_sided_p, welch

DISTANCE = "distance"  # input points between the latest perturbed point and the forecast origin (0 = the last)
MIN_LEAF_WINDOWS = 5
MERGE_ALPHA = 0.05  # sibling leaves whose effects do not differ at this level are reported as one rule


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


def fit_tree(x: np.ndarray, control: np.ndarray, treated: np.ndarray, *, depth: int, leaf: int, seed: int):
    """causalml's causal tree on both potential outcomes of every window (control rows T=0, perturbed rows T=1).

    Both rows of a window share their covariates, so they share a leaf and each leaf's value is the
    exact paired mean ITE of its windows. causalml's honest split would separate a window's two rows
    and lose that pairing; overfitting is measured by cross-fitting instead (heldout_explained).
    """
    tree_cls, _, _ = estimators()
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
        if not where:
            text = f"effect {cate:.3g} on every window (no covariate separates the windows)"
        elif average > 0:
            text = f"effect {ratio:.2g}× the average ({cate:.3g} vs {average:.3g}) when {where}"
        else:  # a multiple of an average fall (or of none) reads as a harm's multiple: "-46× the average"
            text = f"effect {cate:.3g} (the average over all windows: {average:.3g}) when {where}"
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
        if nearest == farthest:  # "1 to 1 points before" (water demand, arima under P1)
            return f"the perturbed point is {nearest} point{'' if nearest == 1 else 's'} before the forecast origin"
        return f"the perturbed point is {nearest} to {int(farthest)} points before the forecast origin"
    if np.isfinite(lo) and np.isfinite(hi):
        return f"{lo:.4g} < {column} ≤ {hi:.4g}"
    return f"{column} > {lo:.4g}" if np.isfinite(lo) else f"{column} ≤ {hi:.4g}"


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
