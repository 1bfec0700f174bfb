"""Figures for cards and the comparison page: matplotlib, Okabe–Ito colours, deterministic PNG bytes.

Every function returns a Figure; `png` turns it into bytes with no timestamp in the
metadata, so the same run gives the same image bytes.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

# Okabe & Ito (2008), readable with every common colour-vision deficiency
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
GREY = "#7f7f7f"


# systems take Okabe–Ito's colours in this order: the first four stay clear of the level colours
# (blue = best, orange = middle, vermillion = worst) that the rating badges use
SYSTEM_ORDER = ["#009E73", "#CC79A7", "#56B4E9", "#000000", "#0072B2", "#E69F00", "#D55E00", "#F0E442"]


def system_colours(systems: list[str]) -> dict[str, str]:
    """One colour per system, by its position in the study (the same on every page and figure).

    Okabe–Ito's eight colours; a ninth system and beyond reuse them in order (labels and legends
    still tell them apart).
    """
    return {name: SYSTEM_ORDER[i % len(SYSTEM_ORDER)] for i, name in enumerate(systems)}


plt.rcParams.update(
    {
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.hashsalt": "causalrate",
        "figure.dpi": 100,
        # laid out once while drawing: savefig(bbox_inches="tight") would draw every figure twice
        "figure.constrained_layout.use": True,
    }
)


@dataclass(frozen=True)
class Figure:
    """A rendered figure: its name (file suffix, section), PNG bytes and alt text."""

    name: str
    png: bytes
    alt: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode()


def png(fig: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def radar(axes: list[str], series: dict[str, list[float]], *, title: str, colours: dict[str, str]) -> plt.Figure:
    """One polygon per system over normalised axes (1 = best of the systems compared, at the rim)."""
    angles = np.linspace(0, 2 * np.pi, len(axes), endpoint=False)
    closed = np.r_[angles, angles[:1]]
    fig, ax = plt.subplots(figsize=(6.2, 6.2), subplot_kw={"polar": True})
    for i, (name, values) in enumerate(series.items()):
        v = np.nan_to_num(np.asarray(values, dtype=float), nan=0.0)
        colour = colours[name]
        style = "-" if i == 0 else "--"
        ax.plot(closed, np.r_[v, v[:1]], style, color=colour, linewidth=2.4 if i == 0 else 1.4, label=name)
        if i == 0:
            ax.fill(closed, np.r_[v, v[:1]], color=colour, alpha=0.15)
    ax.set_xticks(angles)
    ax.set_xticklabels(axes, fontsize=8.5)
    ax.tick_params(axis="x", pad=12)  # labels clear of the rim
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
    # below the axes: a legend inside could cover the "off scale" and "missing" markers
    ax.legend(fontsize=8, frameon=False, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return fig


def ape_bars(effects: list[dict], *, perturbations: list[str], schemes: list[str], outcome: str) -> plt.Figure:
    """Per perturbation and scheme: APE true / observed / deconfounded, with 2.5–97.5 % ranges over draws."""
    fig, axes = plt.subplots(1, len(perturbations), figsize=(3.3 * len(perturbations) + 0.6, 3.4), squeeze=False)
    kinds = [
        ("ape_true", "true (randomized)", PALETTE[2]),
        ("ape_obs", "observed (mean over draws)", PALETTE[3]),
        ("ape_adj", "deconfounded APE_adj (mean over draws)", PALETTE[0]),
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
    fig.legend(
        *axes[0][0].get_legend_handles_labels(),
        fontsize=8,
        frameon=False,
        ncol=3,
        loc="outside lower center",
    )
    return fig


def recency_profile(rows: list[dict], *, outcome: str) -> plt.Figure:
    """|APE| by how recent the perturbed input point was (bins of input positions), one line per perturbation."""
    bins = list(dict.fromkeys(r["bin"] for r in rows))
    perturbations = list(dict.fromkeys(r["perturbation"] for r in rows))
    fig, ax = plt.subplots(figsize=(7.2, 3.4))
    x = np.arange(len(bins))
    for i, p in enumerate(perturbations):
        by = {r["bin"]: r for r in rows if r["perturbation"] == p}
        y = np.array([_num(by.get(b, {}).get("ape")) for b in bins])
        lo = np.array([_num((by.get(b, {}).get("interval") or [None, None])[0]) for b in bins])
        hi = np.array([_num((by.get(b, {}).get("interval") or [None, None])[1]) for b in bins])
        err = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
        offset = (i - (len(perturbations) - 1) / 2) * 0.06
        ax.errorbar(
            x + offset, y, yerr=np.nan_to_num(err), fmt="o-", color=PALETTE[i % len(PALETTE)], capsize=3, label=p
        )
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels(bins)
    ax.set_xlabel("position of the perturbed point, counted back from the last input (1 = last)")
    ax.set_ylabel(f"APE ({outcome})")
    ax.legend(fontsize=8, frameon=False, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    return fig


def fragility_rules(rules: list[dict]) -> plt.Figure:
    """Conditional effect (CATE) of each subgroup rule with its 95 % interval, largest first."""
    labels = [f"{r['perturbation']}: {r['text']}" for r in rules]
    y = np.arange(len(rules))
    cate = np.array([_num(r.get("cate")) for r in rules])
    lo = np.array([_num((r.get("interval") or [None, None])[0]) for r in rules])
    hi = np.array([_num((r.get("interval") or [None, None])[1]) for r in rules])
    fig, ax = plt.subplots(figsize=(8.2, 0.42 * len(rules) + 1.2))
    ax.errorbar(
        cate,
        y,
        xerr=np.nan_to_num(np.vstack([np.clip(cate - lo, 0, None), np.clip(hi - cate, 0, None)])),
        fmt="o",
        color=PALETTE[3],
        capsize=3,
    )
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_yticks(y)
    ax.set_yticklabels([t if len(t) <= 60 else t[:57] + "…" for t in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("conditional effect of the perturbation in the subgroup (CATE, 95 % interval)")
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
    curves: dict[str, dict[str, list[tuple[float, float]]]],
    *,
    outcome: str,
    labels: dict[str, str],
    colours: dict[str, str],
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
                    color=colours[system],
                    linewidth=2.2 if i == 0 else 1.2,
                    markersize=5,
                    label=system,
                )
        ax.set_title(family, fontsize=10)
        ax.set_xlabel(labels.get(family) or "severity")
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel(f"|APE| ({outcome})")
    axes[0][0].legend(fontsize=8, frameon=False)
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


def scatter_parameters(points: dict[str, tuple[float, float]], *, levels: int, colours: dict[str, str]) -> plt.Figure:
    """Parameter count vs mean robustness rating, one labelled point per system."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, (params, rating) in points.items():
        ax.scatter([params], [rating], color=colours[name], s=50)
        ax.annotate(name, (params, rating), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_ylim(levels + 0.3, 0.7)
    ax.set_xlabel("parameters (log scale)")
    ax.set_ylabel("mean robustness rating (1 = best, top)")
    return fig


def pareto_front(points: dict[str, tuple[float, float]]) -> list[str]:
    """Systems no other system beats on both axes (both lower = better), sorted by the first axis."""
    front = [
        a
        for a, (xa, ya) in points.items()
        if not any((xb <= xa and yb <= ya) and (xb < xa or yb < ya) for b, (xb, yb) in points.items() if b != a)
    ]
    return sorted(front, key=lambda name: points[name])


def robustness_accuracy(
    points: dict[str, dict[str, float]], *, colours: dict[str, str], x_label: str, y_label: str
) -> plt.Figure:
    """Accuracy error (x) vs perturbation effect (y), both lower = better, 95 % ranges and the Pareto front.

    points: {system: {x, x_lo, x_hi, y, y_lo, y_hi}}.
    """
    fig, ax = plt.subplots(figsize=(7.4, 4.6))
    centres = {s: (p["x"], p["y"]) for s, p in points.items()}
    front = pareto_front(centres)
    if len(front) >= 2:
        xs, ys = zip(*(centres[s] for s in front), strict=True)
        ax.step(xs, ys, where="post", color=GREY, linewidth=1.2, linestyle="--", zorder=1)
    for system, p in points.items():
        err_x = [[max(p["x"] - p["x_lo"], 0)], [max(p["x_hi"] - p["x"], 0)]]
        err_y = [[max(p["y"] - p["y_lo"], 0)], [max(p["y_hi"] - p["y"], 0)]]
        ax.errorbar(
            [p["x"]],
            [p["y"]],
            xerr=err_x,
            yerr=err_y,
            fmt="o",
            color=colours[system],
            markersize=8,
            markeredgecolor="black" if system in front else colours[system],
            markeredgewidth=1.6,
            capsize=3,
            linewidth=1.2,
            zorder=3,
            label=system + (" (Pareto front)" if system in front else ""),
        )
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title("Lower-left is better; dashed: Pareto front (no other system beats these on both)", fontsize=9.5)
    ax.legend(fontsize=9, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.margins(0.12)
    return fig


def small_multiples(
    axes: list[str], series: dict[str, list[float]], *, colours: dict[str, str], columns: int = 4
) -> plt.Figure:
    """One horizontal-bar panel per system: each score scaled 0 (worst) to 1 (best of the systems)."""
    n = len(series)
    columns = max(1, min(columns, n))
    rows = -(-n // columns)
    fig, grid = plt.subplots(
        rows,
        columns,
        figsize=(2.35 * columns + 1.3, 0.2 * len(axes) * rows + 0.9 * rows),
        squeeze=False,
        sharex=True,
        sharey=True,
    )
    y = np.arange(len(axes))
    for k, (system, values) in enumerate(series.items()):
        ax = grid[k // columns][k % columns]
        v = np.asarray(values, dtype=float)
        ax.barh(y, np.nan_to_num(v, nan=0.0), color=colours[system], height=0.7)
        for i in np.flatnonzero(~np.isfinite(v)):
            ax.text(0.02, i, "n/a", va="center", fontsize=7, color=GREY)
        ax.set_title(system, fontsize=10, color="black")
        ax.set_xlim(0, 1.0)
        ax.set_xticks([0, 0.5, 1])
        ax.set_xticklabels(["worst", "", "best"], fontsize=7.5)
        ax.grid(axis="x", color="#e6e6e6", linewidth=0.6)
    for k in range(n, rows * columns):
        grid[k // columns][k % columns].axis("off")
    for row in grid:
        row[0].set_yticks(y)
        row[0].set_yticklabels(axes, fontsize=8)
        row[0].invert_yaxis()
    return fig


def _num(x: object) -> float:
    return float("nan") if x is None else float(x)
