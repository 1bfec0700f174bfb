"""Rating stability (METHOD §6): the share of replicates in which a reported rating is kept.

Every replicate — a window-block bootstrap resample, or one observational draw for the deconfounded
scores — is rated by the rule that rated the row: `paper` bins the replicate's values by rank;
`tiers` re-runs the tiering on it (tiers.replicate_tier_ratings) with the score's own paired test
(bootstrap or, for draws, t-test), so systems the rule ties stay tied unless the replicate makes their
difference significant. An inconclusive APE is floored (never the best level) in every replicate as it
is in the report, and a robustness or bias value below its margin δ is level 1 (no practical effect) in
every replicate. Rows rated on the absolute scale, insufficient and undefined rows have no stability.
The robustness headline (the worst of a system's robustness levels) is re-derived in every bootstrap
replicate the same way it is derived from the reported ratings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TypeAlias

import numpy as np
import pandas as pd

from causalrate.causal.resampling import stability
from causalrate.rate.binning import bin_ratings
from causalrate.rate.headlines import headline_rows, robustness_rows
from causalrate.rate.inconclusive import inconclusive_level
from causalrate.rate.ratings import WEAKEST_LINK, RatingSettings
from causalrate.rate.tiers import BOOTSTRAP, PAIRED_TESTS, replicate_tier_ratings
from causalrate.score.scores import SCORES
from causalrate.uncertainty.rigor import Rigor


def with_stability(rigor: Rigor, rated: pd.DataFrame, *, settings: RatingSettings, control: str) -> Rigor:
    """`rigor` with, per rating row and per robustness headline, the share of replicates that keep the
    reported level."""
    replicated, updated = {}, dict(rigor.rows)
    columns = {name: rated[name].to_numpy() for name in ROW_COLUMNS}
    groups = rated.groupby(["score", "perturbation"], sort=False).indices
    for (score, p), per_system in rigor.replicate_values.items():
        if (score, p) not in groups:
            continue
        rows = {name: values[groups[(score, p)]] for name, values in columns.items()}
        found = replicate_levels(rows, per_system, rigor, levels=settings.levels)
        if found is None:
            continue
        systems, reported, matrix = found
        for s, share in zip(systems, stability(matrix, reported), strict=True):
            updated[(p, score, s)] = replace(rigor.row((p, score, s)), stability=float(share))
        if (score, p) in rigor.bootstrap:
            replicated[(score, p)] = (systems, matrix)
    overall = _overall_stability(rigor, rated, replicated, settings, control)
    return replace(rigor, rows=updated, overall_stability=overall)


# the rating rows' columns stability reads; `Rows` is a DataFrame of them or a dict of their arrays
ROW_COLUMNS = ("score", "perturbation", "system", "rule", "raw", "rating", "insufficient", "display", "margin")
Rows: TypeAlias = pd.DataFrame | dict[str, np.ndarray]


def replicate_levels(
    rows: Rows, per_system: Mapping[str, np.ndarray], rigor: Rigor, *, levels: int
) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """The systems one (score, perturbation) rated by its rule, their reported levels [n] and their levels
    in every replicate [B, n]; None when the rows were rated on the absolute scale or lack replicates."""
    rateable = ~np.asarray(rows["insufficient"], dtype=bool) & (np.asarray(rows["display"], dtype=object) != "—")
    by_system = np.argsort(np.asarray(rows["system"], dtype=object)[rateable], kind="stable")
    rated = {name: np.asarray(rows[name])[rateable][by_system] for name in ROW_COLUMNS}
    rules, systems = set(rated["rule"].tolist()), rated["system"].tolist()
    if not systems or rules - {"paper", "tiers"} or any(s not in per_system for s in systems):
        return None
    (rule,) = rules
    score, p = rated["score"][0], rated["perturbation"][0]
    cls = SCORES.get(score)
    higher = cls.higher_is_better
    raw = rated["raw"].astype(float)
    matrix = np.column_stack([per_system[s] for s in systems])
    if rule == "paper":
        per_replicate = np.vstack([bin_ratings(row, levels=levels, higher_is_better=higher) for row in matrix])
    else:
        test = PAIRED_TESTS.get(cls.resampling, BOOTSTRAP)
        margin = rated["margin"].astype(float)
        per_replicate = replicate_tier_ratings(
            raw, matrix, levels=levels, higher_is_better=higher, test=test, margin=margin
        )
        if cls.headline in WEAKEST_LINK and not higher:  # no practical effect in the replicate: level 1
            with np.errstate(invalid="ignore"):
                per_replicate = np.where(matrix < margin[None, :], 1, per_replicate)
    floored = np.array([rigor.row((p, score, s)).inconclusive for s in systems], dtype=bool)
    per_replicate = np.where(floored[None, :], inconclusive_level(per_replicate), per_replicate)
    return systems, reported_levels(rated, rigor).to_numpy(dtype=int), per_replicate


def reported_levels(rows: Rows, rigor: Rigor) -> pd.Series:
    """System → the level the report shows for rows of one (score, perturbation): inconclusive APEs floored."""
    keys = zip(rows["perturbation"], rows["score"], rows["system"], strict=True)
    floored = np.array([rigor.row(key).inconclusive for key in keys], dtype=bool)
    rating = np.asarray(rows["rating"], dtype=float)
    return pd.Series(np.where(floored, inconclusive_level(rating), rating), index=np.asarray(rows["system"]))


def _overall_stability(
    rigor: Rigor, rated: pd.DataFrame, replicated: dict, settings: RatingSettings, control: str
) -> dict[str, float]:
    """Re-derive the robustness headline (the worst of the system's practically relevant robustness levels; 1
    with none) in every bootstrap replicate from the rows' replicate levels (replicated: (score, perturbation) →
    systems, [B, n]); rows without replicates keep their level."""
    robust = robustness_rows(rated, control=control)
    systems = sorted(headline_rows(rated, "robustness", control=control)["system"].unique())
    b = next((matrix.shape[0] for _, matrix in replicated.values()), 0)
    if not systems or b == 0 or settings.scale == "absolute":
        return {}
    worst, reported_worst = np.ones((b, len(systems))), np.ones(len(systems))  # no relevant row: level 1
    for (score, p), group in robust.groupby(["score", "perturbation"]):
        reported = reported_levels(group, rigor)
        per_replicate = pd.DataFrame(np.tile(reported.to_numpy(), (b, 1)), columns=reported.index)
        if (score, p) in replicated:
            found_systems, matrix = replicated[(score, p)]
            kept = [k for k, name in enumerate(found_systems) if name in reported.index]  # its relevant rows
            per_replicate[[found_systems[k] for k in kept]] = matrix[:, kept]
        worst = np.fmax(worst, per_replicate.reindex(columns=systems).fillna(1.0).to_numpy())
        reported_worst = np.fmax(reported_worst, reported.reindex(systems).fillna(1.0).to_numpy())
    return {s: float(v) for s, v in zip(systems, stability(worst, reported_worst), strict=True)}
