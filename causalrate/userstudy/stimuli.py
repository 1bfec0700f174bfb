"""The figure of one user-study question: each system's forecasts on the clean and the perturbed input,
the truth, and each system's mean error per group of each bias dimension (industry, month, …) under the
perturbation; optionally causalrate's rankings (the "with ratings" condition)."""

from __future__ import annotations

import numpy as np

from causalrate.report import mpl
from causalrate.report.figures import GREY, PALETTE
from causalrate.report.mpl import plt


def question_figure(
    *,
    clean: np.ndarray,
    perturbed: np.ndarray,
    truth: np.ndarray,
    panels: dict[str, tuple[list[float], list[float]]],  # label → (forecast on clean, forecast on perturbed)
    group_errors: dict[str, dict[str, dict[str, float]]],  # dimension → label → group → mean error (perturbed)
    title: str,
    outcome: str,
    rankings: dict | None,
    step: str | None,
) -> bytes:
    k, bars = len(panels), len(group_errors)
    fig = plt.figure(figsize=(4.2 * k, 5.1 + 1.5 * bars + (1.0 if rankings else 0.0)))
    fig.suptitle(title, fontsize=12)
    # the legend's row, the panels, one row of bars per bias dimension, the rankings
    ratios = [0.12, 1.3, *[1.0] * bars, *([0.45] if rankings else [])]
    grid = fig.add_gridspec(len(ratios), k, height_ratios=ratios)
    n, d = clean.size, truth.size
    x_in, x_out = np.arange(n), np.arange(n, n + d)
    changed = np.flatnonzero(~np.isclose(clean, perturbed, equal_nan=False) | np.isnan(perturbed))
    for i, (label, (on_clean, on_perturbed)) in enumerate(panels.items()):
        ax = fig.add_subplot(grid[1, i], sharey=fig.axes[0] if i else None)
        ax.plot(x_in, clean, color=GREY, lw=1.2, label="input (clean)")
        ax.plot(x_out, truth, color="black", lw=1.6, label="what happened")
        ax.plot(x_out, on_clean, color=PALETTE[0], ls="--", lw=1.6, label="forecast, clean input")
        ax.plot(x_out, on_perturbed, color=PALETTE[3], lw=1.8, label="forecast, perturbed input")
        low = np.nanmin(np.concatenate([clean, truth]))
        for n_mark, j in enumerate(changed):
            shown = perturbed[j] if np.isfinite(perturbed[j]) and perturbed[j] >= low * 0.5 else low
            marker = "x" if np.isnan(perturbed[j]) else "v"
            key = None if n_mark else "perturbed input value (× missing, ▼ off the scale)"
            ax.plot(j, shown, marker=marker, ls="none", color=PALETTE[1], ms=9, mew=2, label=key)
        ax.set_title(f"System {label}", fontsize=12, fontweight="bold")
        ax.set_xlabel(f"time step ({step})" if step else "time step")
    # one legend for the panels, in a row of its own above them: inside a panel it covered lines and titles
    handles, keys = fig.axes[0].get_legend_handles_labels()
    legend = fig.add_subplot(grid[0, :])
    legend.axis("off")
    legend.legend(handles, keys, loc="center", ncol=3, fontsize=8.5, frameon=False)
    for row, (dimension, errors_of) in enumerate(group_errors.items(), start=2):
        ax = fig.add_subplot(grid[row, :])
        groups = list(dict.fromkeys(g for errors in errors_of.values() for g in errors))  # the data's order
        width = 0.8 / k
        for i, (label, errors) in enumerate(errors_of.items()):
            ax.bar(
                np.arange(len(groups)) + i * width,
                [errors.get(g, np.nan) for g in groups],
                width,
                label=f"System {label}",
                color=PALETTE[i % len(PALETTE)],
            )
        ax.set_xticks(np.arange(len(groups)) + width * (k - 1) / 2, groups)
        ax.set_ylabel(f"mean {outcome}")
        ax.set_title(f"Mean error per {dimension} under this perturbation (lower is better)", fontsize=10)
        ax.legend(fontsize=8, frameon=False)
    if rankings:
        ax = fig.add_subplot(grid[2 + bars, :])
        ax.axis("off")
        ax.text(0.0, 0.75, "causalrate's ratings as rankings", fontsize=11, fontweight="bold", transform=ax.transAxes)
        ax.text(
            0.0,
            0.35,
            "Most robust first:  " + _ranking(rankings["robustness_rank"]),
            fontsize=11,
            transform=ax.transAxes,
        )
        ax.text(
            0.0, 0.0, "Least biased first:  " + _ranking(rankings["bias_rank"]), fontsize=11, transform=ax.transAxes
        )
    return mpl.png(fig)  # laid out by constrained layout (causalrate.report.mpl): no tight_layout


def _ranking(ranks: dict[str, int]) -> str:
    """'1. System B   2. System A = System C' (tied systems share a place)."""
    places: dict[int, list[str]] = {}
    for label, rank in sorted(ranks.items()):
        places.setdefault(rank, []).append(f"System {label}")
    return "   ".join(f"{rank}. {' = '.join(names)}" for rank, names in sorted(places.items()))
