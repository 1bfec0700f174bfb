"""The self-check of METHOD §5.4, judged: is the deconfounded APE closer to the truth than the naive one?

For every confounded distribution (a scheme whose assignment depends on a confounder) it passes
when APE_true lies in the APE_adj interval over the draws, or — where the confounding bias
|APE_obs − APE_true| exceeds the draws' noise (the half-width of APE_obs's interval) — when APE_adj
is closer to APE_true than APE_obs. Anything else fails: the estimator did not do its job.
"""

from __future__ import annotations

import pandas as pd

from causalrate.causal.schemes import SCHEMES


def judge(effects: pd.DataFrame) -> list[dict]:
    """One verdict per (system, perturbation, confounded scheme) of summarise_effects()."""
    out = []
    for r in effects.itertuples():
        if not SCHEMES.get(r.scheme).confounders:
            continue  # uniform: nothing to deconfound
        noise = (r.ape_obs_hi - r.ape_obs_lo) / 2
        bias = abs(r.ape_obs - r.ape_true)
        inside = r.ape_adj_lo <= r.ape_true <= r.ape_adj_hi
        closer = abs(r.ape_adj - r.ape_true) < bias
        if inside:
            passed, reason = True, "APE_true lies in the APE_adj interval"
        elif bias > noise and closer:
            passed, reason = True, "APE_adj is closer to APE_true than the confounded APE_obs"
        elif bias > noise:
            passed, reason = False, "matching did not move the estimate towards APE_true (confounding bias > noise)"
        else:
            passed, reason = False, "APE_true lies outside the APE_adj interval although APE_obs shows no confounding"
        out.append(
            {
                "system": r.system,
                "perturbation": r.perturbation,
                "scheme": r.scheme,
                "ape_true": r.ape_true,
                "ape_obs": r.ape_obs,
                "ape_adj": r.ape_adj,
                "interval": [r.ape_adj_lo, r.ape_adj_hi],
                "noise": noise,
                "passed": passed,
                "reason": reason,
            }
        )
    return out
