"""Known answers for the uncertainty layer (issues 29, 40): do the 95 % intervals cover, on Gaussian,
heavy-tailed and near-unit-root outcomes, does WRS's Welch test hold its size, and how often does the
placebo refuter fail a correct estimator?

Replicate studies are simulated: a few AR(1) series around a level of 20 (innovations of unit variance:
Gaussian, or Student t with 3 df scaled to unit variance), cut into overlapping windows exactly as the tool
cuts them (input n, horizon d, stride s). Per window, the scores the tool rates, computed by the tool's own
metric functions (forecast.metrics), all autocorrelated across neighbouring windows:

- `smape`, `mase`: the naive forecast (repeat the last input value);
- `crps`: a quantile forecast at levels 0.1…0.9, the naive forecast ± normal quantiles of the input's one-step
  changes' sd × √h (the tool's quantile CRPS);
- `sign_accuracy`: the input-mean forecast (it moves, unlike naive's, which always scores ½);
- `APE (spike)`: the naive forecast's MAE with the last input value raised by 1 (one innovation sd) minus its
  clean MAE, a paired difference rated as |mean| (the signed mean's interval folded at 0, as `ape` is).

True means: a Monte Carlo over independent windows (each cut from its own path, started in the stationary
distribution or after a burn-in for t innovations), its standard error printed beside. Every replicate study
gets the tool's interval (Resamples.intervals with the windows' series: the t interval over the series, as every
setting has SERIES_MIN of them) and the studentized block-bootstrap interval (block_counts with the block of
dependence_block, capped at half a series, widened by small_sample_factor: the rule before, and the tool's rule
for fewer series): coverage of the true value, misses below and above, and the width ratio.

WRS: the series split into two groups with the same true mean, one Welch test per study at 95 % through
grouped_wrs with the design effects and df sizes the tool uses (the test on block means of METHOD §4),
(a) two groups of two series and (b) two single-series groups (series 0 against series 1), on the accuracy
scores: the false-rejection rate should be 5 % (METHOD §4: 2–8 %, also on t(3) outcomes).

Placebo: planted data on which the matching estimator is correct (three industries, confounded
treatment, effect 0.5 everywhere), refuted by causal.refute.refute with the default 5 simulations; the
placebo's false-failure rate against dowhy's normal test at S = 5, P(|t₄| > 1.645·√4) ≈ 3 %.

Run: nice python bench/calibration.py [--smoke]   (fixed seeds: the same numbers every run; --smoke: tiny
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
    Resamples,
    block_counts,
    dependence_block,
    folded,
    small_sample_factor,
)
from causalrate.causal.wrs import Grouping, grouped_wrs, unit_scaled
from causalrate.forecast.metrics import crps, mase, sign_accuracy, smape

LEVEL = 20.0  # the series' mean: SMAPE and MASE read levels, as on real data
SPIKE = 1.0  # the perturbation of the APE: the last input value raised by one innovation sd
QUANTITIES = ("smape", "mase", "crps", "sign_accuracy", "APE (spike)")
ACCURACY = QUANTITIES[:4]  # the clean-input accuracy scores; WRS is tested on these outcomes
FOLDED = {"APE (spike)"}  # rated as |mean|: the signed mean's interval, folded at 0
QUANTILE_LEVELS = tuple(round(0.1 * k, 1) for k in range(1, 10))
AT_95 = ((0.95, 1.0),)  # one level: a WRS of 1 is one rejection at 5 %
METHODS = ("series", "block")  # the tool's interval (t over series); the studentized block-bootstrap interval


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


@dataclass(frozen=True)
class Setting:
    label: str
    phi: float
    tails: str  # "gaussian" or "t3"
    geometry: Geometry


def innovations(tails: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Unit-variance innovations: standard normal, or Student t(3) / √3."""
    return rng.standard_normal(shape) if tails == "gaussian" else rng.standard_t(3, shape) / math.sqrt(3)


def ar1(phi: float, tails: str, shape: tuple[int, ...], length: int, rng: np.random.Generator) -> np.ndarray:
    """[*shape, length] stationary AR(1) paths around LEVEL: Gaussian paths start in the stationary law; t paths
    after a burn-in that leaves φ^burn < 1e-4 of the start."""
    burn = 0 if tails == "gaussian" or phi == 0 else math.ceil(math.log(1e-4) / math.log(phi))
    x = np.empty((*shape, length + burn))
    x[..., 0] = rng.standard_normal(shape) / math.sqrt(1 - phi**2)
    noise = innovations(tails, (*shape, length + burn), rng)
    for t in range(1, length + burn):
        x[..., t] = phi * x[..., t - 1] + noise[..., t]
    return LEVEL + x[..., burn:]


def window_values(windows: np.ndarray, n: int) -> np.ndarray:
    """[..., q] the QUANTITIES of windows [..., n + d] (input then horizon), by the tool's metric functions."""
    shape = windows.shape[:-1]
    flat = windows.reshape(-1, windows.shape[-1])
    inputs, target = flat[:, :n], flat[:, n:]
    d = target.shape[1]
    naive = np.repeat(inputs[:, -1:], d, axis=1)
    mean = np.repeat(inputs.mean(axis=1, keepdims=True), d, axis=1)
    spread = np.diff(inputs, axis=1).std(axis=1, ddof=1)[:, None, None] * np.sqrt(np.arange(1, d + 1))
    quantiles = naive[:, None, :] + special.ndtri(np.array(QUANTILE_LEVELS))[None, :, None] * spread
    spiked = inputs[:, -1:] + SPIKE
    ape = np.abs(target - spiked).mean(axis=1) - np.abs(target - naive).mean(axis=1)
    out = np.stack(
        [
            smape(target, naive, inputs),
            mase(target, naive, inputs),
            crps(target, naive, inputs, list(quantiles), levels=QUANTILE_LEVELS),
            sign_accuracy(target, mean, inputs),
            ape,
        ],
        axis=-1,
    )
    return out.reshape(*shape, len(QUANTITIES))


def monte_carlo(s: Setting, draws: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The true means [q] (a simulation over `draws` independent windows) and their standard errors."""
    n, d = s.geometry.input_length, s.geometry.horizon
    out = [
        window_values(ar1(s.phi, s.tails, (size,), n + d, rng), n)
        for size in np.diff(np.linspace(0, draws, 11).astype(int))
    ]
    v = np.concatenate(out)
    return v.mean(axis=0), v.std(axis=0, ddof=1) / math.sqrt(v.shape[0])


def studies(s: Setting, count: int, rng: np.random.Generator, chunk: int = 50):
    """Yield [W, q] window values of `count` replicate studies (windows of each series ascending in time)."""
    g = s.geometry
    for start in range(0, count, chunk):
        size = min(chunk, count - start)
        paths = ar1(s.phi, s.tails, (size, g.series), g.length, rng)
        windows = sliding_window_view(paths, g.input_length + g.horizon, axis=-1)[:, :, :: g.stride]
        values = window_values(windows, g.input_length)  # [size, series, windows, q]
        yield from values.reshape(size, g.series * g.windows, len(QUANTITIES))


def calibrate(s: Setting, truth: np.ndarray, count: int, replicates: int, seed: int) -> dict:
    """Over `count` studies: coverage of the tool's interval (over series) and of the studentized block-bootstrap
    interval, their misses below / above the truth and widths, and the WRS test's false rejections with two
    groups of two series and with two single-series groups."""
    g = s.geometry
    rng = np.random.default_rng(seed)
    series = np.repeat(np.arange(g.series), g.windows)
    pairs = {
        "2 × 2 series": (Grouping.of(np.where(series < g.series // 2, "A", "B")), np.arange(series.size)),
        "1 × 1 series": (Grouping.of(np.where(series == 0, "A", "B")[series < 2]), np.flatnonzero(series < 2)),
    }
    widen = small_sample_factor(series, block=g.block)
    hits = {(m, q): np.zeros(3) for m in METHODS for q in QUANTITIES}  # below, inside, above
    width = {(m, q): 0.0 for m in METHODS for q in QUANTITIES}
    rejected = {(label, q): 0 for label in pairs for q in ACCURACY}
    for values in studies(s, count, rng):
        counts = block_counts(series, block=g.block, bootstrap_size=replicates, rng=rng)
        blocks = Resamples(counts, widen)
        means = blocks.means(values)
        tool = Resamples(counts, widen, series).intervals(values, means)
        studentized = blocks.intervals(values, means)
        for j, q in enumerate(QUANTITIES):
            for method, bounds in zip(METHODS, (tool[j], studentized[j]), strict=True):
                lo, hi = folded(*bounds) if q in FOLDED else bounds
                target = abs(truth[j]) if q in FOLDED else truth[j]
                hits[(method, q)][0 if target < lo else 2 if target > hi else 1] += 1
                width[(method, q)] += hi - lo
        for j, q in enumerate(ACCURACY):
            for label, (plan, ids) in pairs.items():
                v = unit_scaled(values[ids, j])
                deff = plan.design_effects(v, series[ids], bandwidth=g.block)
                sizes = plan.df_sizes(v, series[ids], bandwidth=g.block)
                rejected[(label, q)] += grouped_wrs(plan.samples(v), AT_95, deff, sizes)[0] >= 1
    return {
        "coverage": {k: h / count for k, h in hits.items()},
        "width": {k: w / count for k, w in width.items()},
        "size": {k: r / count for k, r in rejected.items()},
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
        small = Geometry(20, 5, 1, 40, 4)
        settings = [Setting("smoke", 0.7, "gaussian", small), Setting("smoke t(3)", 0.98, "t3", small)]
        count, replicates, reps, rows, mc = 20, 100, 2, 300, 4_000
    else:
        base, long = Geometry(80, 20, 2, 50, 4), Geometry(80, 20, 2, 200, 4)
        settings = [
            Setting("Gaussian", 0.7, "gaussian", base),
            Setting("Gaussian, 200 windows", 0.7, "gaussian", long),
            Setting("t(3)", 0.7, "t3", base),
            Setting("t(3), 200 windows", 0.7, "t3", long),
            Setting("near unit root", 0.98, "gaussian", Geometry(80, 20, 1, 200, 4)),
            Setting("near unit root, t(3)", 0.98, "t3", Geometry(80, 20, 1, 200, 4)),
            Setting("n 40, d 10, s 5", 0.7, "gaussian", Geometry(40, 10, 5, 50, 4)),
            Setting("n 40, d 10, s 5, t(3)", 0.7, "t3", Geometry(40, 10, 5, 50, 4)),
        ]
        count, replicates, reps, rows, mc = 600, 200, 1000, 900, 100_000
    print(machine())
    print(f"\n{count} replicate studies per setting, {replicates} bootstrap replicates each; seeds fixed\n")
    print("| setting | φ | n, d, s | windows × series | block | score | true mean (MC ± se) "
          "| coverage, over series (tool) | misses below / above | coverage, studentized block (before) "
          "| misses below / above | width series / block |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    sizes = []
    for k, s in enumerate(settings):
        g = s.geometry
        truth, se = monte_carlo(s, mc, np.random.default_rng(7 + k))
        result = calibrate(s, truth, count, replicates, seed=29 + 100 * k)
        block = max(1, min(g.block, g.windows // 2))
        for j, q in enumerate(QUANTITIES):
            cells = []
            for method in METHODS:
                below, inside, above = result["coverage"][(method, q)]
                cells.append(
                    f"{inside:.3f} ± {binomial_se(inside, count):.3f} | {below * count:.0f} / {above * count:.0f}"
                )
            ratio = result["width"][("series", q)] / result["width"][("block", q)]
            print(
                f"| {s.label} | {s.phi} | {g.input_length}, {g.horizon}, {g.stride} | {g.windows} × {g.series} "
                f"| {block} | {q} | {truth[j]:.4f} ± {se[j]:.4f} | {cells[0]} | {cells[1]} | {ratio:.2f} |"
            )
        sizes.append((s, result["size"]))
    print("\n| setting | score | WRS false rejection at α = 0.05, 2 × 2 series | 1 × 1 series (single-series groups) |")
    print("|---|---|---|---|")
    for s, size in sizes:
        for q in ACCURACY:
            a, b = size[("2 × 2 series", q)], size[("1 × 1 series", q)]
            print(
                f"| {s.label} | {q} | {a:.3f} ± {binomial_se(a, count):.3f} | {b:.3f} ± {binomial_se(b, count):.3f} |"
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
    print(f"\nwall seconds: {time.perf_counter() - started:.0f}; CPU seconds: {time.process_time():.0f}")


if __name__ == "__main__":
    main()
