"""Known answers for the uncertainty layer (issue 29): do the 95 % intervals cover, does WRS's Welch test
hold its size, and how often does the placebo refuter fail a correct estimator?

Replicate studies are simulated: a few AR(1) series (φ = 0.7, and φ = 0 as a control), cut into
overlapping windows exactly as the tool cuts them (input n, horizon d, stride s), and per window the
quantities the tool rates, all autocorrelated across neighbouring windows:

- `naive MAE`: mean absolute error over the horizon of the naive forecast (repeat the last input value),
  a window-mean score rated with `interval` (as SMAPE and MASE are);
- `mean MAE`: the same for the input-mean forecast (it reads every input point, so its dependence runs
  as long as the windows share a point);
- `APE (spike)`: the naive forecast's MAE with the last input value raised by 1 (one innovation sd) minus
  its clean MAE, a paired difference rated as |mean| with `abs_mean_interval` (as `ape` is).

The series are Gaussian and every forecast is linear in the window, so each true mean is closed-form
(E|e| = √(2 Var e / π), the folded normal's mean for the spike); a large independent simulation checks
it. Every replicate study gets the tool's interval (block_counts with the block of dependence_block,
capped by block_counts itself at half a series) and the old per-window bootstrap (block 1): coverage of
the true value and the width ratio.

WRS: the series split into two groups with the same true mean; one Welch test per study at 95 % through
grouped_wrs, with the design effects of Grouping.design_effects (bandwidth = the block) and without
(the per-window tests): the false-rejection rate should be 5 %.

Placebo: planted data on which the matching estimator is correct (three industries, confounded
treatment, effect 0.5 everywhere), refuted by causal.refute.refute with the default 5 simulations; the
placebo's false-failure rate against dowhy's normal test at S = 5, P(|t₄| > 1.645·√4) ≈ 3 %.

Run: python bench/calibration.py [--smoke]   (fixed seeds: the same numbers every run; --smoke: tiny
windows and few replicates, checks the script still runs, its numbers measure nothing).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from common import arguments, machine
from numpy.lib.stride_tricks import sliding_window_view
from scipy import special

from causalrate.causal.resampling import (
    abs_mean_interval,
    block_counts,
    dependence_block,
    interval,
    replicate_means,
    small_sample_factor,
)
from causalrate.causal.wrs import Grouping, grouped_wrs, unit_scaled

SPIKE = 1.0  # the perturbation of the APE: the last input value raised by one innovation sd
QUANTITIES = ("naive MAE", "mean MAE", "APE (spike)")
FOLDED = {"APE (spike)"}  # rated as |mean|: abs_mean_interval; the others as a mean: interval
AT_95 = ((0.95, 1.0),)  # one level: a WRS of 1 is one rejection at 5 %


@dataclass(frozen=True)
class Geometry:
    input_length: int  # n
    horizon: int  # d
    stride: int  # s
    windows: int  # per series
    series: int

    @property
    def length(self) -> int:
        return self.input_length + self.horizon + self.stride * (self.windows - 1)

    @property
    def block(self) -> int:
        return dependence_block(input_length=self.input_length, horizon=self.horizon, stride=self.stride)


def ar1(phi: float, shape: tuple[int, ...], length: int, rng: np.random.Generator) -> np.ndarray:
    """[*shape, length] stationary AR(1) paths with unit innovations (variance 1 / (1 − φ²))."""
    x = np.empty((*shape, length))
    x[..., 0] = rng.standard_normal(shape) / math.sqrt(1 - phi**2)
    noise = rng.standard_normal((*shape, length))
    for t in range(1, length):
        x[..., t] = phi * x[..., t - 1] + noise[..., t]
    return x


def window_values(windows: np.ndarray, n: int) -> np.ndarray:
    """[..., q] the quantities of windows [..., n + d] (input then horizon)."""
    inputs, target = windows[..., :n], windows[..., n:]
    last, mean = inputs[..., -1:], inputs.mean(axis=-1, keepdims=True)
    naive = np.abs(target - last).mean(axis=-1)
    spiked = np.abs(target - last - SPIKE).mean(axis=-1)
    return np.stack([naive, np.abs(target - mean).mean(axis=-1), spiked - naive], axis=-1)


def true_values(phi: float, n: int, d: int) -> np.ndarray:
    """[q] the exact means: every error is a·x for a Gaussian window x with Cov = φ^|i−j| / (1 − φ²)."""
    lag = np.abs(np.subtract.outer(np.arange(n + d), np.arange(n + d)))
    cov = phi**lag / (1 - phi**2)

    def mean_abs(weights: np.ndarray, shift: float = 0.0) -> float:  # mean over the horizon of E|a_k·x − shift|
        sd = np.sqrt(np.einsum("ki,ij,kj->k", weights, cov, weights))
        folded = sd * np.sqrt(2 / np.pi) * np.exp(-(shift**2) / (2 * sd**2))
        return float(np.mean(folded + shift * (1 - 2 * special.ndtr(-shift / sd))))

    def errors(forecast: np.ndarray) -> np.ndarray:  # a_k = e_{n+k} − forecast weights
        a = np.zeros((d, n + d))
        a[:, :n] = -forecast
        a[np.arange(d), n + np.arange(d)] += 1
        return a

    last, mean = np.eye(n)[-1], np.full(n, 1 / n)
    naive = mean_abs(errors(last))
    return np.array([naive, mean_abs(errors(mean)), mean_abs(errors(last), SPIKE) - naive])


def monte_carlo(phi: float, n: int, d: int, draws: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Means and standard errors [q] over `draws` independent windows (the check of true_values)."""
    out = []
    for size in np.diff(np.linspace(0, draws, 11).astype(int)):
        out.append(window_values(ar1(phi, (size,), n + d, rng), n))
    v = np.concatenate(out)
    return v.mean(axis=0), v.std(axis=0, ddof=1) / math.sqrt(v.shape[0])


def studies(phi: float, g: Geometry, count: int, rng: np.random.Generator, chunk: int = 50):
    """Yield [W, q] window values of `count` replicate studies (windows of each series ascending in time)."""
    for start in range(0, count, chunk):
        size = min(chunk, count - start)
        paths = ar1(phi, (size, g.series), g.length, rng)
        windows = sliding_window_view(paths, g.input_length + g.horizon, axis=-1)[:, :, :: g.stride]
        values = window_values(windows, g.input_length)  # [size, series, windows, q]
        yield from values.reshape(size, g.series * g.windows, len(QUANTITIES))


def calibrate(phi: float, g: Geometry, count: int, replicates: int, seed: int) -> dict:
    """Coverage and widths of both bootstraps, and the WRS test's rejections, over `count` studies.

    Also, for the report (not the tool's rule, a proposal): the block replicates' sd against the true sd of
    a study's mean, the coverage of mean ± t_{K−1}(0.975)·sd·(1 − ℓ/m)^(−1/2) (K blocks in all, the usual
    small-sample correction of a block bootstrap's variance), and the size of Welch's test on means of
    non-overlapping blocks of `block` windows (METHOD §4's other option)."""
    rng = np.random.default_rng(seed)
    truth = true_values(phi, g.input_length, g.horizon)
    series = np.repeat(np.arange(g.series), g.windows)
    plan = Grouping.of(np.where(series < g.series // 2, "A", "B"))  # same true mean in both groups
    blocks = {"block": g.block, "per-window": 1}
    ell = max(1, min(g.block, g.windows // 2))  # the length block_counts uses
    total_blocks = g.series * -(-g.windows // ell)
    t_quantile = float(special.stdtrit(total_blocks - 1, 0.975))
    covered = {(b, q): 0 for b in (*blocks, "proposal") for q in QUANTITIES}
    width = {(b, q): 0.0 for b in blocks for q in QUANTITIES}
    spread = np.zeros(len(QUANTITIES))
    observed = []
    rejected = {(label, q): 0 for label in ("design effect", "per-window", "block means") for q in QUANTITIES[:2]}
    chunk = min(g.block, g.windows)  # block means: non-overlapping runs of this many windows per series
    for values in studies(phi, g, count, rng):
        observed.append(values.mean(axis=0))
        for b, length in blocks.items():
            counts = block_counts(series, block=length, bootstrap_size=replicates, rng=rng)
            means = replicate_means(counts, values, widen=small_sample_factor(series, block=length))
            for j, q in enumerate(QUANTITIES):
                lo, hi = (abs_mean_interval if q in FOLDED else interval)(means[:, j])
                covered[(b, q)] += lo <= abs(truth[j]) <= hi
                width[(b, q)] += hi - lo
            if b == "block":
                sd = means.std(axis=0, ddof=1)
                spread += sd
                half = t_quantile * sd / math.sqrt(1 - ell / g.windows)
                for j, q in enumerate(QUANTITIES):
                    covered[("proposal", q)] += abs(values[:, j].mean() - truth[j]) <= half[j]
        for j, q in enumerate(QUANTITIES[:2]):
            v = unit_scaled(values[:, j])
            samples = plan.samples(v)
            for label, deff in (
                ("design effect", plan.design_effects(v, series, bandwidth=g.block)),
                ("per-window", None),
            ):
                rejected[(label, q)] += grouped_wrs(samples, AT_95, design_effects=deff)[0] >= 1
            runs = v[: g.series * g.windows].reshape(g.series, -1)[:, : g.windows // chunk * chunk]
            block_means = runs.reshape(g.series, -1, chunk).mean(axis=-1)
            halves = [block_means[: g.series // 2].ravel(), block_means[g.series // 2 :].ravel()]
            rejected[("block means", q)] += grouped_wrs([halves], AT_95)[0] >= 1
    return {
        "truth": truth,
        "coverage": {k: c / count for k, c in covered.items()},
        "width": {k: w / count for k, w in width.items()},
        "size": {k: r / count for k, r in rejected.items()},
        "sd ratio": spread / count / np.std(observed, axis=0, ddof=1),  # mean bootstrap sd / true sd
    }


def placebo(repetitions: int, rows: int, simulations: int = 5) -> tuple[int, int, float]:
    """(failures, repetitions, seconds) of the placebo refuter on planted data the estimator gets right."""
    from causalrate.causal.effects import DrawSettings, identify_schemes
    from causalrate.causal.estimate import estimate_all
    from causalrate.causal.refute import backdoor_estimand, refute

    failures, started = 0, time.perf_counter()
    for rep in range(repetitions):
        rng = np.random.default_rng(10_000 + rep)
        industry = rng.choice(["A", "B", "C"], rows)
        windows = pd.DataFrame({"industry": industry, "company": [f"{i}{k % 2}" for k, i in enumerate(industry)]})
        clean = np.where(industry == "A", 10.0, 1.0) + rng.normal(0, 0.3, rows)
        outcomes = {"s": pd.DataFrame({"P0": clean, "P1": clean + 0.5})}  # the planted effect: 0.5 everywhere
        settings = DrawSettings(schemes=("industry",), draws=1, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=rep)
        ident = identify_schemes(settings, ["company", "industry"])
        (first,) = estimate_all(
            windows=windows, outcomes=outcomes, control="P0", settings=settings, identification=ident
        )
        data = first.sample(windows, ["company", "industry"])
        _, refutations = refute(
            data,
            backdoor_estimand(data, ("company", "industry")),
            first,
            interval=(0.4, 0.6),
            seed=rep,
            simulations=simulations,
        )
        failures += not next(r for r in refutations if r.refuter == "placebo_treatment").passed
    return failures, repetitions, time.perf_counter() - started


def binomial_se(p: float, count: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / count)


def main() -> None:
    args = arguments()
    started = time.perf_counter()
    if args.smoke:
        geometries = [Geometry(20, 5, 1, 60, 4)]
        count, replicates, reps, rows, mc = 40, 100, 3, 300, 20_000
    else:
        geometries = [Geometry(80, 20, 2, 50, 4), Geometry(80, 20, 2, 200, 4)]
        count, replicates, reps, rows, mc = 1000, 200, 2000, 900, 200_000  # placebo: ≈ 3 min
    print(machine())
    print(f"\n{count} replicate studies per row, {replicates} bootstrap replicates each; seeds fixed\n")
    print("| φ | n, d, s | windows × series | block | quantity | true mean | MC check (± se) "
          "| coverage, block (tool) | coverage, per-window (old) | width block / per-window "
          "| widened block sd / true sd | coverage, t interval (alternative) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    sizes = []
    for k, g in enumerate(geometries):
        for phi in (0.7, 0.0):
            result = calibrate(phi, g, count, replicates, seed=29 + 100 * k + int(phi * 10))
            mc_mean, mc_se = monte_carlo(phi, g.input_length, g.horizon, mc, np.random.default_rng(7))
            block = max(1, min(g.block, g.windows // 2))
            for j, q in enumerate(QUANTITIES):
                cb, cw = result["coverage"][("block", q)], result["coverage"][("per-window", q)]
                ratio = result["width"][("block", q)] / result["width"][("per-window", q)]
                print(
                    f"| {phi} | {g.input_length}, {g.horizon}, {g.stride} | {g.windows} × {g.series} | {block} "
                    f"| {q} | {result['truth'][j]:.4f} | {mc_mean[j]:.4f} ± {mc_se[j]:.4f} "
                    f"| {cb:.3f} ± {binomial_se(cb, count):.3f} | {cw:.3f} ± {binomial_se(cw, count):.3f} "
                    f"| {ratio:.2f} | {result['sd ratio'][j]:.2f} | {result['coverage'][('proposal', q)]:.3f} |"
                )
            sizes.append((phi, g, result["size"]))
    print(
        "\n| φ | windows × series | quantity | WRS test size at α = 0.05, design effect (tool) "
        "| per-window (paper) | block means (proposal) |"
    )
    print("|---|---|---|---|---|---|")
    for phi, g, size in sizes:
        for q in QUANTITIES[:2]:
            a, b, c = size[("design effect", q)], size[("per-window", q)], size[("block means", q)]
            print(
                f"| {phi} | {g.windows} × {g.series} | {q} | {a:.3f} ± {binomial_se(a, count):.3f} "
                f"| {b:.3f} ± {binomial_se(b, count):.3f} | {c:.3f} ± {binomial_se(c, count):.3f} |"
            )
    failures, done, seconds = placebo(reps, rows)
    expected = 2 * float(special.stdtr(4, -1.645 * 2))
    rate = failures / done
    print("\n| placebo refuter (5 simulations, correct estimator) | failures | repetitions | rate | expected | s |")
    print("|---|---|---|---|---|---|")
    print(
        f"| planted: 3 industries, {rows} rows, effect 0.5 | {failures} | {done} "
        f"| {rate:.3f} ± {binomial_se(rate, done):.3f} | {expected:.3f} | {seconds:.0f} |"
    )
    print(f"\nwall seconds: {time.perf_counter() - started:.0f}")


if __name__ == "__main__":
    main()
