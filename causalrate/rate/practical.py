"""PIE% only where there is an effect to explain (METHOD §5.3, §6.6): undefined wherever the rated APE's
interval covers 0 or the APE is below its margin δ — in the rating rows and in the effects table alike."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from causalrate.score.confounding import no_effect_note
from causalrate.score.scores import SCORES, PieScore
from causalrate.uncertainty.rigor import Rigor


def pie_undefined(raw: pd.DataFrame, rigor: Rigor | None) -> dict[tuple[str, str], str]:
    """(system, perturbation) → why PIE% is undefined there: the `ape` row (raw = harm, `margin` δ in raw units)
    is below δ, or its signed interval (the rigor layer's, when it ran) covers 0. An interval wholly below 0 is
    said as the fall it is: "the APE 0 is below its margin, no practical effect to explain" was written for
    arima on water demand, whose error fell by 0.047 (interval [-0.071, -0.023]) under P1."""
    out = {}
    for r in raw[raw["score"] == "ape"].itertuples():
        bounds = rigor.row((r.perturbation, "ape", r.system)).ape_true_interval if rigor else None
        if bounds is not None and bounds[0] <= 0 <= bounds[1]:
            out[(r.system, r.perturbation)] = no_effect_note("APE_true", bounds[0], bounds[1])
        elif bounds is not None and bounds[1] < 0:  # a fall is an effect, not "no practical effect"
            out[(r.system, r.perturbation)] = (
                f"undefined: the perturbation lowers its error (APE_true interval [{bounds[0]:.3g}, {bounds[1]:.3g}]),"
                " no harm to explain"
            )
        elif np.isfinite(r.raw) and r.raw < r.margin:
            out[(r.system, r.perturbation)] = (
                f"undefined: the APE {r.raw:.3g} is below its margin {r.margin:.3g}, no practical effect to explain"
            )
    return out


def without_pie(raw: pd.DataFrame, undefined: dict[tuple[str, str], str]) -> pd.DataFrame:
    """The raw rows with every PIE% score undefined (raw NaN, the reason as its note) where `undefined` says."""
    is_pie = raw["score"].map(lambda s: issubclass(SCORES.get(s), PieScore))
    reasons = pd.Series(
        [undefined.get((s, p)) for s, p in zip(raw["system"], raw["perturbation"], strict=True)], index=raw.index
    )
    hit = is_pie & reasons.notna()
    note = raw["note"] if "note" in raw else pd.Series(None, index=raw.index, dtype=object)
    return raw.assign(raw=raw["raw"].mask(hit), note=note.mask(hit, reasons))


def effects_without_pie(effects: pd.DataFrame, undefined: dict[tuple[str, str], str]) -> pd.DataFrame:
    """The effects table with PIE% and its interval null (and `pie_note` saying why) where `undefined` says."""
    reasons = pd.Series(
        [undefined.get((s, p)) for s, p in zip(effects["system"], effects["perturbation"], strict=True)],
        index=effects.index,
        dtype=object,
    )
    out = effects.assign(pie_note=reasons)
    out.loc[reasons.notna(), ["pie", "pie_lo", "pie_hi"]] = np.nan
    return out


def rigor_without_pie(rigor: Rigor, rated: pd.DataFrame) -> Rigor:
    """The rigor results with no interval on an undefined PIE% row (there is no value for it to hold)."""
    undefined = rated[rated["display"].eq("—")]
    keys = set(zip(undefined["perturbation"], undefined["score"], undefined["system"], strict=True))
    return replace(rigor, rows={k: replace(v, interval=None) if k in keys else v for k, v in rigor.rows.items()})
