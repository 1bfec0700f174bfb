"""A worked plugin: one registered class of each kind (two scores: a mean and a median), rated like the built-ins.

Listed under `plugins:` in study.yaml (a path relative to the YAML), this file is imported before
the study is read, in every forecasting worker and by `causalrate card/rate/export` on the run.
"""

import numpy as np
import pandas as pd

from causalrate.causal.schemes import SCHEMES, Scheme
from causalrate.perturb.operators import OPERATORS, Operator
from causalrate.score.scores import SCORES, MetricScore, Score, percentile, wide_column
from causalrate.systems import SYSTEMS, System


@OPERATORS.register("swap")
class Swap(Operator):
    """A perturbation: the value trades places with the one before it (a transposition when keying data)."""

    description = "a value trades places with the one before it (transposed when entered)"
    touches = "neighbours"  # it changes a masked point's neighbour too (checked: every other point is unchanged)

    def apply(self, values, mask, *, seeds, **params):
        rows, cols = np.nonzero(mask)
        keep = cols > 0
        rows, cols = rows[keep], cols[keep]
        before = values[rows, cols - 1].copy()
        values[rows, cols - 1] = values[rows, cols]
        values[rows, cols] = before
        return values


@SYSTEMS.register("drift")
class Drift(System):
    """A system: the last observed value plus the window's mean step per horizon step (random walk with drift)."""

    accepts_nan = False  # the run imputes missing inputs first, and records that it did

    def forecast(self, batch):
        steps = np.nanmean(np.diff(batch.inputs, axis=1), axis=1)
        ahead = np.arange(1, batch.horizon + 1)
        return batch.inputs[:, -1:] + steps[:, None] * ahead[None, :]


@SCORES.register("mae")
class Mae(MetricScore):
    """A score: mean absolute error in the data's units; a window mean, so bootstrapped for its interval."""

    headline = "accuracy"  # joins the accuracy headline: a plugin score joins a headline only by declaring it
    metric = "mae"  # a per-forecast metric the run already computes
    label = "MAE"
    description = "mean absolute forecast error, in the data's units"


def weighted_medians(counts, values):
    """[B] lower weighted median of values [W] (NaN left out) under each row of window counts [B, W]."""
    keep = np.isfinite(values)
    order = np.argsort(values[keep])
    sorted_values, weights = values[keep][order], counts[:, keep][:, order]
    if sorted_values.size == 0:
        return np.full(len(counts), np.nan)
    cumulative = np.cumsum(weights, axis=1)
    return sorted_values[np.argmax(cumulative >= cumulative[:, -1:] / 2, axis=1)]


@SCORES.register("medae")
class Medae(Score):
    """A median-type score: the median over windows of the forecasts' MAE. It is no mean, so it brings its
    own replicates: the same median under each of the run's block resamples of the windows."""

    headline = "accuracy"  # it joins the accuracy headline (a score without `headline` joins none)
    rows = "clean"  # with its clean-input rows: accuracy on clean input
    coverage = "perturbed"
    on_control = True  # rated on the clean input too: that is where accuracy is rated
    resampling = "windows"  # block-bootstrap replicates: their interval, stability and the tiers test
    label = "MedAE"
    description = "typical absolute forecast error: half the windows do better, in the data's units"
    estimator = "median over windows of MAE"

    def compute(self, evidence):
        rows = [
            (system, p, weighted_medians(np.ones((1, len(wide))), wide[p].to_numpy())[0])
            for system, wide in wide_column(evidence, "mae").items()
            for p in wide.columns
        ]
        return pd.DataFrame(rows, columns=["system", "perturbation", "raw"])

    def replicates(self, evidence, resampler):
        counts = resampler.resamples.counts
        return {
            (system, p): percentile(weighted_medians(counts, wide[p].to_numpy()))
            for system, wide in wide_column(evidence, "mae").items()
            for p in wide.columns
        }


@SCHEMES.register("calm_first")
class CalmFirst(Scheme):
    """A scheme: calm windows are perturbed more often, so volatility confounds the naive comparison.

    Registered schemes get their ape_calm_first and pie_calm_first scores automatically.
    """

    confounders = ("volatility",)
    description = "P falls from high to low with the rank of the window's volatility"

    def probabilities(self, table, *, high, low):
        rank = table["volatility"].rank(method="average").to_numpy()
        return high - (high - low) * (rank - 1) / max(len(table) - 1, 1)
