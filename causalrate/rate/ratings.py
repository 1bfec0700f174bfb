"""Rate every (perturbation, score) across systems (METHOD §6): rule, scale, insufficient and undefined rows.

- insufficient: computed on fewer than rating.min_coverage of the system's windows, or raw NaN without a note
  (no value from its forecasts: a plugin must give a note, and a built-in gives one wherever the reason is not
  failed forecasts, e.g. recency without a window corrupted near its end): the worst level, relative and
  absolute, with the reason in `note` — failures are never rewarded;
- undefined (raw NaN with a note, e.g. PIE% with nothing to explain, a point forecast's coverage error):
  no level on either scale (rating and absolute_rating null: neither best nor worst), shown as "—", left out
  of the binning of the others and of every headline;
- the rest: binned by `rule` (tiers or paper) and, beside it, the published absolute scale. Under tiers
  two systems differ only when significantly AND by more than the score's margin δ (`margin`, raw units),
  and a robustness or bias effect below δ has no practical effect: level 1 on that row (`relevant` False:
  left out of the weakest-link headlines).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from causalrate.parameters import RatingSettings
from causalrate.rate.absolute import ABSOLUTE_LEVELS, absolute_level, scale_of
from causalrate.rate.binning import bin_ratings
from causalrate.rate.tiers import BOOTSTRAP, PAIRED_TESTS, tier_ratings
from causalrate.score.scores import SCORES, Headline
from causalrate.score.wide import wide_tables

COLUMNS = [
    "perturbation",
    "score",
    "system",
    "raw",
    "rating",
    "rule",
    "absolute_rating",
    "tied_with",
    "insufficient",
    "note",
    "display",
    "quantity",
    "margin",
    "relevant",
    "improves",
]
# the weakest-link headlines (the others are a mean of levels): a row of theirs whose effect is below its margin δ
# has no practical effect (level 1, left out of the weakest link)
WEAKEST_LINK: tuple[Headline, ...] = ("robustness", "bias")
# a point forecast's row of a distribution-only score (WQL, coverage error; score.contract.PointForecasts)
NOT_APPLICABLE = "not applicable: a point forecast has no quantiles; not rated"


def levels_warning(levels: int, n_systems: int, scale: str) -> str | None:
    """More levels than systems in relative mode: rated anyway, with a warning that tie groups are positions
    (best 1, worst L), so at most as many levels as systems are used and the ones between stay empty."""
    if scale == "absolute" or levels <= n_systems:
        return None
    return (
        f"rating.levels: {levels} levels for {n_systems} system(s); relative ratings put the best of them at 1 "
        f"and the worst at {levels}, so at most {n_systems} of the {levels} levels are used"
    )


def coverage_table(forecasts: pd.DataFrame, *, control: str, n_windows: int) -> pd.DataFrame:
    """Per system and perturbation: the share of windows forecast ("perturbed") and also clean ("paired")."""
    ok = forecasts.assign(ok=~forecasts["failed"])
    perturbations = sorted(forecasts["perturbation"].unique())
    rows = []
    for system, wide in wide_tables(ok, "ok", perturbations=perturbations, n_windows=n_windows).items():
        part = wide.fillna(0.0)
        for p in part.columns:
            perturbed = part[p].to_numpy()
            paired = perturbed * part[control].to_numpy()
            rows.append(
                {
                    "system": system,
                    "perturbation": p,
                    "perturbed": perturbed.sum() / n_windows,
                    "paired": paired.sum() / n_windows,
                }
            )
    return pd.DataFrame(rows, columns=["system", "perturbation", "perturbed", "paired"])


def attach_coverage(raw: pd.DataFrame, coverage: pd.DataFrame, severity: dict[str, tuple[str, float]]) -> pd.Series:
    """The coverage each raw row was computed on (a severity grid: its worst member)."""
    keys = list(zip(coverage["system"], coverage["perturbation"], strict=True))
    by_key = {kind: dict(zip(keys, coverage[kind].tolist(), strict=True)) for kind in ("perturbed", "paired")}
    grid: dict[str, list[str]] = {}
    for p, (family, _) in severity.items():
        grid.setdefault(family, []).append(p)
    values = []
    for system, perturbation, score in zip(raw["system"], raw["perturbation"], raw["score"], strict=True):
        cls = SCORES.get(score)
        shares = by_key[cls.coverage]
        members = [p + cls.coverage_suffix for p in grid.get(perturbation, [perturbation])]
        found = [shares[system, p] for p in members if (system, p) in shares]
        values.append(min(found) if found else 0.0)
    return pd.Series(values, index=raw.index, dtype=float)


def rate_scores(
    raw: pd.DataFrame,
    *,
    settings: RatingSettings,
    replicates: Mapping[tuple[str, str], Mapping[str, np.ndarray]] | None = None,
    point_systems: frozenset[str] = frozenset(),
) -> pd.DataFrame:
    """raw: perturbation, score, system, raw, coverage, quantity (the absolute-scale value) [, note, margin (δ in
    raw units; absent: 0)]. point_systems: the systems whose forecasts are points (no samples or quantiles), not
    rated on a score whose `point_forecasts` is "not_applicable"."""
    raw = raw.assign(note=raw.get("note"), margin=raw.get("margin", 0.0))
    applicable = np.array(
        [
            not (SCORES.get(score).point_forecasts == "not_applicable" and system in point_systems)
            for score, system in zip(raw["score"], raw["system"], strict=True)
        ],
        dtype=bool,
    )
    raw = raw.assign(raw=raw["raw"].where(applicable), note=raw["note"].where(applicable, NOT_APPLICABLE))
    # one frame sorted by (perturbation, score, system), each group's columns computed on its slice of the
    # arrays and assigned once: 83 groups' frames (sort, assign) cost 0.15 s of a 2.5 s `causalrate rate`
    raw = raw.sort_values(["perturbation", "score", "system"], kind="stable", ignore_index=True)
    keys = list(zip(raw["perturbation"], raw["score"], strict=True))
    starts = [i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]]
    columns = {
        name: raw[name].to_numpy(**kwargs)
        for name, kwargs in (
            ("raw", {"dtype": float}),
            ("note", {}),
            ("coverage", {}),
            ("system", {}),
            ("margin", {"dtype": float}),
            ("quantity", {"dtype": float}),
        )
        if name in raw
    }
    rated: dict[str, list] = {}
    for start, end in zip(starts, [*starts[1:], len(keys)], strict=True):
        p, score = keys[start]
        group = {name: values[start:end] for name, values in columns.items()}
        for name, values in _rate_group(group, score, settings, (replicates or {}).get((score, p))).items():
            rated.setdefault(name, []).extend(values)
    # levels and notes stay Python objects (an int or None, a text or None): no NaN in place of a missing level
    typed = {name: np.array(values, dtype=object) if name in OBJECTS else values for name, values in rated.items()}
    return raw.assign(**typed)[COLUMNS] if len(raw) else raw.reindex(columns=COLUMNS)


OBJECTS = frozenset({"rating", "absolute_rating", "note", "display"})


def _rate_group(
    group: Mapping[str, np.ndarray], score: str, settings: RatingSettings, reps: Mapping[str, np.ndarray] | None
) -> dict[str, list]:
    """One (perturbation, score)'s rows (column arrays, ordered by system): their new columns, row by row."""
    cls = SCORES.get(score)
    levels, higher = settings.levels, cls.higher_is_better
    values = group["raw"]
    n = len(values)
    defined = np.isfinite(values)
    undefined = ~defined & pd.notna(group["note"])
    short = group["coverage"] < settings.min_coverage
    insufficient = short | (~defined & ~undefined)
    eligible = defined & ~insufficient
    systems = group["system"]
    relative = np.full(n, levels)
    tied: list[list[str]] = [[] for _ in systems]
    idx = np.flatnonzero(eligible)
    if settings.rule == "paper":
        relative[idx] = bin_ratings(values[idx], levels=levels, higher_is_better=higher)
    elif idx.size:
        matrix, test = None, PAIRED_TESTS.get(cls.resampling, BOOTSTRAP)
        if reps is not None and all(s in reps for s in systems[idx]):
            matrix = np.column_stack([reps[s] for s in systems[idx]])
        margin = group["margin"][idx]
        ratings, ties = tier_ratings(
            values[idx], matrix, levels=levels, higher_is_better=higher, test=test, margin=margin
        )
        relative[idx] = ratings
        for k, i in enumerate(idx):
            tied[i] = sorted(systems[idx][j] for j in ties[k])
    scale = scale_of(score)
    absolute: list[int | None] = [None] * n
    if scale is not None and settings.scale != "relative":
        quantity = group["quantity"]
        for row in range(n):
            if insufficient[row]:
                absolute[row] = ABSOLUTE_LEVELS
            elif not undefined[row]:
                absolute[row] = absolute_level(quantity[row], scale)
    # an effect below δ is no practical effect (METHOD §6.2): level 1 on the row, not a weakest link
    relevant = np.ones(n, dtype=bool)
    if cls.headline in WEAKEST_LINK and not higher:
        with np.errstate(invalid="ignore"):
            relevant = ~(eligible & (values < group["margin"]))
        if settings.rule == "tiers":
            relative[~relevant] = 1
    use_absolute = settings.scale == "absolute" and scale is not None
    coverage = group["coverage"]
    notes = [
        (
            f"insufficient: computed on {100 * c:.0f} % of the windows (< {100 * settings.min_coverage:.0f} %); "
            "rated worst"
            if is_short
            else f"insufficient: its forecasts failed on the windows this score needs ({100 * c:.0f} % of all its "
            "windows were forecast); rated worst"
        )
        if bad
        else note
        for c, bad, is_short, note in zip(coverage, insufficient, short, group["note"], strict=True)
    ]
    return {
        "rating": [
            None if u and not bad else a if use_absolute else int(r)
            for a, r, u, bad in zip(absolute, relative, undefined, insufficient, strict=True)
        ],
        "rule": ["absolute" if use_absolute else settings.rule] * n,
        "absolute_rating": absolute,
        "tied_with": tied,
        "insufficient": list(insufficient),
        "note": notes,
        "display": ["—" if u and not bad else None for u, bad in zip(undefined, insufficient, strict=True)],
        "relevant": list(relevant),
        "improves": [False] * n,  # set from the signed APE's interval where the rigor layer ran (rate.practical)
    }
