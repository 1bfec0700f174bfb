"""Where a system is fragile (METHOD §5.5), as a stage: the fragility map (causal.fragility) and the
meta-learner self-check (causal.learners) of every system × perturbation, from the forecast rows and the
causal stage's Estimates, kept in the run's memo; ratings.json's `heterogeneity` and the fragility_spread score.
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from causalrate.causal.estimate import Estimate
from causalrate.causal.fragility import (
    DISTANCE,
    MIN_LEAF_WINDOWS,
    Covariates,
    driver_profile,
    fragility_map,
    perturbed_distance,
)
from causalrate.causal.learners import INSTALL, missing, selfcheck, selfcheck_skipped
from causalrate.data.characteristics import compute_characteristics
from causalrate.memo import OFF, Memo
from causalrate.seeding import stable_seed

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from causalrate.config import HeterogeneityConfig
    from causalrate.study import Study


def recorded_masks(forecasts: pd.DataFrame, windows: int, n: int) -> dict[tuple[str, str], np.ndarray]:
    """Per (system, perturbation), the perturbed-point mask (windows × n) from its forecast rows' recorded `offsets`
    (JSON lists, 0 = oldest); only the pairs with some offsets recorded. Every row's list in one parse."""
    if "offsets" not in forecasts:
        return {}
    rows = forecasts.loc[forecasts["offsets"].notna(), ["system", "perturbation", "window", "offsets"]]
    texts = [o if isinstance(o, str) else json.dumps([int(p) for p in o or []]) for o in rows["offsets"].tolist()]
    masks: dict[tuple[str, str], np.ndarray] = {}
    for system, perturbation, window, points in zip(
        rows["system"].tolist(), rows["perturbation"].tolist(), rows["window"].tolist(),
        json.loads("[" + ",".join(texts) + "]"), strict=True,
    ):  # fmt: skip
        mask = masks.get((system, perturbation))
        if mask is None:
            mask = masks[system, perturbation] = np.zeros((windows, n), dtype=bool)
        mask[int(window), [int(p) for p in points]] = True
    return masks


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
    starts = table["start"].to_numpy()
    recorded = recorded_masks(forecasts, len(starts), n)  # placements that vary per window; else the suite's
    doc: dict = {}
    spreads = []
    for system, wide in outcomes.items():
        for p in study.suite[1:]:
            inputs = (
                frame, names, blocks, wide[study.control].to_numpy(), wide[p.id].to_numpy(),
                recorded[system, p.id] if (system, p.id) in recorded else p.mask(starts, n),
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
