"""Figures for cards and the comparison page: matplotlib, Okabe–Ito colours, deterministic PNG bytes.

Every function returns a Figure; `png` turns it into bytes with no timestamp in the
metadata, so the same run gives the same image bytes.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

# Okabe & Ito (2008), readable with every common colour-vision deficiency
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
GREY = "#7f7f7f"

plt.rcParams.update(
    {
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.hashsalt": "causalrate",
        "figure.dpi": 100,
    }
)


def png(fig: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def radar(axes: list[str], series: dict[str, list[float]], *, title: str) -> plt.Figure:
    """One polygon per system over normalised axes (1 = best of the systems compared, at the rim)."""
    angles = np.linspace(0, 2 * np.pi, len(axes), endpoint=False)
    closed = np.r_[angles, angles[:1]]
    fig, ax = plt.subplots(figsize=(6.2, 6.2), subplot_kw={"polar": True})
    for i, (name, values) in enumerate(series.items()):
        v = np.nan_to_num(np.asarray(values, dtype=float), nan=0.0)
        colour = PALETTE[i % len(PALETTE)]
        style = "-" if i == 0 else "--"
        ax.plot(closed, np.r_[v, v[:1]], style, color=colour, linewidth=2.4 if i == 0 else 1.4, label=name)
        if i == 0:
            ax.fill(closed, np.r_[v, v[:1]], color=colour, alpha=0.15)
    ax.set_xticks(angles)
    ax.set_xticklabels(axes, fontsize=8.5)
    ax.set_ylim(0, 1.05)
    ax.set_yticks([0.25, 0.5, 0.75, 1.0])
    ax.set_yticklabels(["", "", "", "best"], fontsize=7, color=GREY)
    ax.set_title(title, fontsize=10, pad=18)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=3, frameon=False, fontsize=9)
    return fig


def example_window(
    *,
    clean: np.ndarray,
    perturbed: np.ndarray,
    truth: np.ndarray,
    forecast_clean: np.ndarray | None,
    forecast_perturbed: np.ndarray | None,
    title: str,
) -> plt.Figure:
    """Clean vs perturbed input, the truth, and the system's forecast from each."""
    n, d = clean.size, truth.size
    past, future = np.arange(-n + 1, 1), np.arange(1, d + 1)
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    ax.plot(past, clean, color=GREY, linewidth=1.5, label="clean input")
    changed = ~np.isclose(clean, perturbed, equal_nan=False) | np.isnan(perturbed)
    ax.plot(
        past,
        np.where(changed, np.nan, perturbed),
        color=PALETTE[1],
        linewidth=1.2,
        linestyle="--",
        label="perturbed input (changed points marked)",
    )
    # keep the scale of the data: a value dropped to 0 would squash the series into a flat line
    shown = np.concatenate([clean, truth, *(f for f in (forecast_clean, forecast_perturbed) if f is not None)])
    lo, hi = np.nanmin(shown), np.nanmax(shown)
    pad = 0.08 * (hi - lo or abs(hi) or 1.0)
    ax.set_ylim(lo - pad, hi + pad)
    for x in past[changed]:
        y = perturbed[past == x][0]
        if np.isnan(y):
            ax.axvline(x, color=PALETTE[1], linestyle=":", linewidth=1.5)
            ax.annotate(
                "missing", (x, hi + pad), textcoords="offset points", xytext=(3, -12), fontsize=8, color=PALETTE[1]
            )
        elif y < lo - pad or y > hi + pad:
            edge = lo - pad if y < lo else hi + pad
            ax.plot([x], [edge], "v" if y < lo else "^", color=PALETTE[1], markersize=9, clip_on=False)
            ax.annotate(
                f"{y:.4g} (off scale)",
                (x, edge),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=8,
                color=PALETTE[1],
            )
        else:
            ax.plot([x], [y], "o", color=PALETTE[1], markersize=7)
    ax.plot(future, truth, color="black", linewidth=1.8, label="truth")
    if forecast_clean is not None:
        ax.plot(future, forecast_clean, color=PALETTE[0], linewidth=1.8, label="forecast from clean input")
    if forecast_perturbed is not None:
        ax.plot(
            future,
            forecast_perturbed,
            color=PALETTE[3],
            linewidth=1.8,
            linestyle=(0, (4, 2)),
            label="forecast from perturbed input",
        )
    ax.axvline(0.5, color=GREY, linewidth=0.8)
    ax.set_xlabel("trading days relative to the last input value")
    ax.set_ylabel("value")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False, ncol=2, loc="best")
    return fig


def ape_bars(effects: list[dict], *, perturbations: list[str], schemes: list[str], outcome: str) -> plt.Figure:
    """Per perturbation and scheme: APE true / observed / deconfounded, with 2.5–97.5 % ranges over draws."""
    fig, axes = plt.subplots(1, len(perturbations), figsize=(3.3 * len(perturbations) + 0.6, 3.4), squeeze=False)
    kinds = [
        ("ape_true", "true (randomized)", PALETTE[2]),
        ("ape_obs", "observed", PALETTE[3]),
        ("ape_adj", "deconfounded", PALETTE[0]),
    ]
    for ax, p in zip(axes[0], perturbations, strict=True):
        rows = {e["scheme"]: e for e in effects if e["perturbation"] == p}
        x = np.arange(len(schemes))
        for k, (key, label, colour) in enumerate(kinds):
            values = np.array([_num(rows.get(s, {}).get(key)) for s in schemes])
            err = None
            if key != "ape_true":
                lo = np.array([_num(rows.get(s, {}).get(f"{key}_lo")) for s in schemes])
                hi = np.array([_num(rows.get(s, {}).get(f"{key}_hi")) for s in schemes])
                err = np.vstack([np.clip(values - lo, 0, None), np.clip(hi - values, 0, None)])
            ax.bar(
                x + (k - 1) * 0.26,
                values,
                0.26,
                color=colour,
                label=label,
                yerr=err,
                capsize=2,
                error_kw={"linewidth": 0.8},
            )
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks(x)
        ax.set_xticklabels(schemes, fontsize=8)
        ax.set_title(p, fontsize=10)
    axes[0][0].set_ylabel(f"APE ({outcome})")
    axes[0][0].legend(fontsize=7.5, frameon=False)
    fig.tight_layout()
    return fig


def balance(rows: dict[str, tuple[float, float]], *, title: str) -> plt.Figure:
    """|SMD| per confounder before and after matching, with the usual 0.1 threshold."""
    names = list(rows)
    y = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(6.5, 0.32 * len(names) + 1.3))
    ax.barh(y + 0.2, [rows[n][0] for n in names], 0.38, color=PALETTE[3], label="before matching")
    ax.barh(y - 0.2, [rows[n][1] for n in names], 0.38, color=PALETTE[0], label="after matching")
    ax.axvline(0.1, color=GREY, linestyle="--", linewidth=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("|standardised mean difference| (below 0.1 = balanced)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig


def dose_response(
    curves: dict[str, dict[str, list[tuple[float, float]]]], *, outcome: str, labels: dict[str, str]
) -> plt.Figure:
    """|APE| against severity, one panel per severity grid, one line per system (the card's system first)."""
    families = sorted({f for per in curves.values() for f in per})
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families) + 0.4, 3.3), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        for i, (system, per) in enumerate(curves.items()):
            points = sorted(per.get(family, []))
            if points:
                x, y = zip(*points, strict=True)
                ax.plot(
                    x,
                    np.abs(y),
                    "o-" if i == 0 else "s--",
                    color=PALETTE[i % len(PALETTE)],
                    linewidth=2.2 if i == 0 else 1.2,
                    markersize=5,
                    label=system,
                )
        ax.set_title(family, fontsize=10)
        ax.set_xlabel(labels.get(family) or "severity")
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel(f"|APE| ({outcome})")
    axes[0][0].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def fragility(profile: dict, *, title: str, outcome: str) -> plt.Figure:
    """Mean individual effect (ITE) along the main driver of the fragility map, with the overall average."""
    points = profile["points"]
    x = [p["x"] for p in points]
    y = np.array([_num(p["ite"]) for p in points])
    n = np.array([p["n"] for p in points])
    fig, ax = plt.subplots(figsize=(5.6, 3.2))
    if all(isinstance(v, str) for v in x):
        ax.bar(range(len(x)), y, color=PALETTE[0])
        ax.set_xticks(range(len(x)))
        ax.set_xticklabels(x, fontsize=8, rotation=30, ha="right")
    else:
        ax.plot(x, y, "o-", color=PALETTE[0], linewidth=2)
    ax.axhline(float(np.sum(y * n) / max(n.sum(), 1)), color=GREY, linestyle="--", linewidth=1, label="average")
    ax.set_xlabel(profile["covariate"])
    ax.set_ylabel(f"mean ITE ({outcome})")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    return fig


def scatter_parameters(points: dict[str, tuple[float, float]], *, levels: int) -> plt.Figure:
    """Parameter count vs mean robustness rating, one labelled point per system."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, (name, (params, rating)) in enumerate(points.items()):
        ax.scatter([params], [rating], color=PALETTE[i % len(PALETTE)], s=50)
        ax.annotate(name, (params, rating), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_ylim(levels + 0.3, 0.7)
    ax.set_xlabel("parameters (log scale)")
    ax.set_ylabel("mean robustness rating (1 = best, top)")
    return fig


def _num(x: object) -> float:
    return float("nan") if x is None else float(x)
