"""Figures for cards and the comparison page: SVG drawn by causalrate.report.svg, Okabe–Ito colours.

Every chart function returns the SVG text of one figure; the same inputs give the same bytes.
The pages embed them as data URIs; the Markdown report links them as files.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass

import numpy as np

from causalrate.report.svg import INK, Canvas, Panel, extent, finite, text_width

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


@dataclass(frozen=True)
class Figure:
    """A rendered figure: its name (file suffix, section), SVG text and alt text."""

    name: str
    svg: str
    alt: str

    @property
    def data_uri(self) -> str:
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg.encode()).decode()


def radar(axes: list[str], series: dict[str, list[float]], *, title: str, colours: dict[str, str]) -> str:
    """One polygon per system over normalised axes (1 = best of the systems compared, at the rim)."""
    c = Canvas(860, 640)  # room on both sides for axis names as long as "APE, company-confounded"
    cx, cy, radius = 430, 305, 205
    angles = [-math.pi / 2 + 2 * math.pi * k / len(axes) for k in range(len(axes))]

    def point(angle: float, r: float) -> tuple[float, float]:
        return cx + radius * r / 1.05 * math.cos(angle), cy + radius * r / 1.05 * math.sin(angle)

    for ring in (0.25, 0.5, 0.75, 1.0):
        c.line([point(a, ring) for a in [*angles, angles[0]]], "#d9d9d9", width=0.8)
    c.text(cx + 4, point(-math.pi / 2, 1.0)[1] + 9, "best", size=10, colour=GREY)
    for angle, name in zip(angles, axes, strict=True):
        c.line([(cx, cy), point(angle, 1.05)], "#d9d9d9", width=0.8)
        x, y = point(angle, 1.16)
        cos = math.cos(angle)
        c.text(x, y, name, size=12, anchor="start" if cos > 0.2 else "end" if cos < -0.2 else "middle")
    for i, (name, values) in enumerate(series.items()):
        ring = [point(a, 0.0 if not math.isfinite(v) else v) for a, v in zip(angles, values, strict=True)]
        if i == 0:
            c.polygon(ring, colours[name], opacity=0.15)
        c.line([*ring, ring[0]], colours[name], width=2.6 if i == 0 else 1.5, dash=None if i == 0 else "6 3")
    c.text(cx, 18, title, size=13, anchor="middle")
    kinds = ["line"] + ["dash"] * (len(series) - 1)
    c.legend([(n, colours[n], k) for n, k in zip(series, kinds, strict=True)], top=cy + radius + 50, columns=4)
    return c.svg()


def _title_lines(c: Canvas, title: str, *, centre: float, top: float = 16) -> None:
    for k, line in enumerate(title.splitlines()):
        c.text(centre, top + 17 * k, line, size=13, anchor="middle")


def example_window(
    *,
    clean: np.ndarray,
    perturbed: np.ndarray,
    truth: np.ndarray,
    forecast_clean: np.ndarray | None,
    forecast_perturbed: np.ndarray | None,
    title: str,
) -> str:
    """Clean vs perturbed input, the truth, and the system's forecast from each."""
    n, d = clean.size, truth.size
    past, future = np.arange(-n + 1, 1), np.arange(1, d + 1)
    c = Canvas(860, 420)
    # keep the scale of the data: a value dropped to 0 would squash the series into a flat line
    shown = np.concatenate([clean, truth, *(f for f in (forecast_clean, forecast_perturbed) if f is not None)])
    lo, hi = float(np.nanmin(shown)), float(np.nanmax(shown))
    pad = 0.08 * (hi - lo or abs(hi) or 1.0)
    ax = Panel(c, (80, 62, 760, 240), (-n - 1, d + 2), (lo - pad, hi + pad))
    ax.vline(0.5, GREY)
    ax.canvas.line(ax.xy(past, clean), GREY, width=1.5)
    changed = ~np.isclose(clean, perturbed, equal_nan=False) | np.isnan(perturbed)
    ax.canvas.line(ax.xy(past, np.where(changed, np.nan, perturbed)), PALETTE[1], width=1.3, dash="5 3")
    for x in past[changed]:
        y = float(perturbed[past == x][0])
        if np.isnan(y):
            ax.vline(x, PALETTE[1], width=1.5, dash="2 3")
            c.text(ax.x(x) + 4, ax.top + 8, "missing", size=11, colour=PALETTE[1])
        elif y < lo - pad or y > hi + pad:
            edge = ax.y(lo - pad) if y < lo else ax.y(hi + pad)
            c.marker(ax.x(x), edge, PALETTE[1], kind="v" if y < lo else "^", size=11)
            c.text(ax.x(x) + 8, edge - 10, f"{y:.4g} (off scale)", size=11, colour=PALETTE[1])
        else:
            c.marker(ax.x(x), ax.y(y), PALETTE[1], size=8)
    entries = [("clean input", GREY, "line"), ("perturbed input (changed points marked)", PALETTE[1], "dash")]
    c.line(ax.xy(future, truth), INK, width=1.8)
    entries.append(("truth", INK, "line"))
    if forecast_clean is not None:
        c.line(ax.xy(future, forecast_clean), PALETTE[0], width=1.8)
        entries.append(("forecast from clean input", PALETTE[0], "line"))
    if forecast_perturbed is not None:
        c.line(ax.xy(future, forecast_perturbed), PALETTE[3], width=1.8, dash="6 3")
        entries.append(("forecast from perturbed input", PALETTE[3], "dash"))
    ax.axes(xlabel="trading days relative to the last input value", ylabel="value")
    _title_lines(c, title, centre=c.width / 2)
    # below the axes: a legend inside could cover the "off scale" and "missing" markers
    c.legend(entries, top=ax.top + ax.height + 48, columns=3)
    return c.svg()


def _num(x: object) -> float:
    return float("nan") if x is None else float(x)


def _bounds(row: dict, key: str = "interval") -> tuple[float, float]:
    lo, hi = row.get(key) or (None, None)
    return _num(lo), _num(hi)


def _left_margin(labels: list[str], size: float = 11) -> float:
    return 30 + max((text_width(t, size) for t in labels), default=0)


def ape_bars(effects: list[dict], *, perturbations: list[str], schemes: list[str], outcome: str) -> str:
    """Per perturbation and scheme: APE true / observed / deconfounded, with 2.5–97.5 % ranges over draws."""
    kinds = [
        ("ape_true", "true (randomized)", PALETTE[2]),
        ("ape_obs", "observed (mean over draws)", PALETTE[3]),
        ("ape_adj", "deconfounded APE_adj (mean over draws)", PALETTE[0]),
    ]
    values = [
        _num(e.get(k))
        for e in effects
        for k in ("ape_true", "ape_obs_lo", "ape_obs_hi", "ape_adj_lo", "ape_adj_hi", "ape_obs", "ape_adj")
    ]
    y = extent(values, zero=True)
    panel_w = max(230, 62 * len(schemes))
    c = Canvas(100 + (panel_w + 40) * len(perturbations), 390)
    for j, p in enumerate(perturbations):
        rows = {e["scheme"]: e for e in effects if e["perturbation"] == p}
        ax = Panel(c, (90 + j * (panel_w + 40), 40, panel_w, 250), (-0.5, len(schemes) - 0.5), y)
        for s, scheme in enumerate(schemes):
            row = rows.get(scheme, {})
            for k, (key, _, colour) in enumerate(kinds):
                v, left = _num(row.get(key)), s + (k - 1.5) * 0.26
                if math.isfinite(v):
                    c.rect(ax.x(left), ax.y(0), ax.x(left + 0.26) - ax.x(left), ax.y(v) - ax.y(0), colour)
                if key != "ape_true":
                    ax.errorbar_y(left + 0.13, _num(row.get(f"{key}_lo")), _num(row.get(f"{key}_hi")), INK, cap=2)
        ax.hline(0, INK, width=0.6)
        ax.axes(xticks=list(range(len(schemes))), xlabels=schemes, title=p, ylabel=f"APE ({outcome})" if j == 0 else "")
    c.legend([(label, colour, "box") for _, label, colour in kinds], top=330, columns=3)
    return c.svg()


def recency_profile(rows: list[dict], *, outcome: str) -> str:
    """|APE| by how recent the perturbed input point was (bins of input positions), one line per perturbation."""
    bins = list(dict.fromkeys(r["bin"] for r in rows))
    perturbations = list(dict.fromkeys(r["perturbation"] for r in rows))
    y = extent([v for r in rows for v in (_num(r.get("ape")), *_bounds(r))], zero=True)
    c = Canvas(740, 400)
    ax = Panel(c, (90, 20, 630, 260), (-0.5, len(bins) - 0.5), y)
    ax.hline(0, INK, width=0.6)
    entries = []
    for i, p in enumerate(perturbations):
        colour, offset = PALETTE[i % len(PALETTE)], (i - (len(perturbations) - 1) / 2) * 0.06
        by = {r["bin"]: r for r in rows if r["perturbation"] == p}
        xs = [k + offset for k in range(len(bins))]
        ys = [_num(by.get(b, {}).get("ape")) for b in bins]
        for x, b in zip(xs, bins, strict=True):
            ax.errorbar_y(x, *_bounds(by.get(b, {})), colour)
        c.line(ax.xy(xs, ys), colour, width=1.6)
        for x, v in zip(xs, ys, strict=True):
            c.marker(ax.x(x), ax.y(v) if math.isfinite(v) else math.nan, colour)
        entries.append((p, colour, "line"))
    ax.axes(
        xticks=list(range(len(bins))),
        xlabels=bins,
        xlabel="position of the perturbed point, counted back from the last input (1 = last)",
        ylabel=f"APE ({outcome})",
    )
    c.legend(entries, top=340, columns=4)
    return c.svg()


def fragility_rules(rules: list[dict]) -> str:
    """Conditional effect (CATE) of each subgroup rule with its 95 % interval, largest first."""
    labels = [f"{r['perturbation']}: {r['text']}" for r in rules]
    labels = [t if len(t) <= 60 else t[:57] + "…" for t in labels]
    left = _left_margin(labels)
    x = extent([v for r in rules for v in (_num(r.get("cate")), *_bounds(r))], zero=True)
    c = Canvas(max(820, left + 360), 34 * len(rules) + 90)
    ax = Panel(c, (left, 15, c.width - left - 25, 34 * len(rules)), x, (-0.5, len(rules) - 0.5), yinvert=True)
    ax.vline(0, INK, width=0.6)
    for k, r in enumerate(rules):
        ax.errorbar_x(k, *_bounds(r), PALETTE[3])
        c.marker(ax.x(_num(r.get("cate"))), ax.y(k), PALETTE[3])
    ax.axes(
        yticks=list(range(len(rules))),
        ylabels=labels,
        xlabel="conditional effect of the perturbation in the subgroup (CATE, 95 % interval)",
    )
    return c.svg()


def balance(rows: dict[str, tuple[float, float]], *, title: str) -> str:
    """|SMD| per confounder before and after matching, with the usual 0.1 threshold."""
    names = list(rows)
    left = _left_margin(names)
    c = Canvas(max(650, left + 420), 30 * len(names) + 130)
    x = extent([0.1, *(v for pair in rows.values() for v in pair)], zero=True)
    ax = Panel(c, (left, 40, c.width - left - 30, 30 * len(names)), x, (-0.5, len(names) - 0.5), yinvert=True)
    for k, name in enumerate(names):
        for before, colour, shift in ((True, PALETTE[3], -0.2), (False, PALETTE[0], 0.2)):
            value = rows[name][0 if before else 1]
            top = ax.y(k + shift - 0.19)
            c.rect(ax.x(0), top, ax.x(value) - ax.x(0), ax.y(k + shift + 0.19) - top, colour)
    ax.vline(0.1, GREY, dash="5 3")
    ax.axes(
        yticks=list(range(len(names))),
        ylabels=names,
        xlabel="|standardised mean difference| (below 0.1 = balanced)",
        title=title,
    )
    c.legend(
        [("before matching", PALETTE[3], "box"), ("after matching", PALETTE[0], "box")],
        top=ax.top + ax.height + 45,
        columns=2,
    )
    return c.svg()


def dose_response(
    curves: dict[str, dict[str, list[tuple[float, float]]]],
    *,
    outcome: str,
    labels: dict[str, str],
    colours: dict[str, str],
) -> str:
    """|APE| against severity, one panel per severity grid, one line per system (the card's system first)."""
    families = sorted({f for per in curves.values() for f in per})
    c = Canvas(100 + 400 * len(families), 390)
    for j, family in enumerate(families):
        points = {s: sorted(per.get(family, [])) for s, per in curves.items()}
        xs = [p[0] for pts in points.values() for p in pts]
        ys = [abs(p[1]) for pts in points.values() for p in pts]
        ax = Panel(c, (90 + 400 * j, 40, 340, 250), extent(xs), extent(ys, zero=True))
        for i, (system, pts) in enumerate(points.items()):
            if pts:
                px = ax.xy([p[0] for p in pts], [abs(p[1]) for p in pts])
                c.line(px, colours[system], width=2.2 if i == 0 else 1.2, dash=None if i == 0 else "6 3")
                for a, b in px:
                    c.marker(a, b, colours[system], kind="o" if i == 0 else "s", size=7 if i == 0 else 6)
        ax.axes(title=family, xlabel=labels.get(family) or "severity", ylabel=f"|APE| ({outcome})" if j == 0 else "")
    systems = [s for s, per in curves.items() if any(per.values())]
    kinds = ["line" if i == 0 else "dash" for i in range(len(systems))]
    c.legend([(s, colours[s], k) for s, k in zip(systems, kinds, strict=True)], top=340, columns=5)
    return c.svg()


def fragility(profile: dict, *, title: str, outcome: str) -> str:
    """Mean individual effect (ITE) along the main driver of the fragility map, with the overall average."""
    points = profile["points"]
    xs = [p["x"] for p in points]
    y = np.array([_num(p["ite"]) for p in points])
    n = np.array([p["n"] for p in points])
    average = float(np.sum(np.nan_to_num(y) * n) / max(n.sum(), 1))
    categorical = all(isinstance(v, str) for v in xs)
    c = Canvas(600, 400 if categorical else 370)
    yr = extent([*y, average], zero=True)
    ax = Panel(c, (90, 40, 480, 230), (-0.6, len(xs) - 0.4) if categorical else extent(xs), yr)
    if categorical:
        for k, v in enumerate(y):
            if math.isfinite(v):
                c.rect(ax.x(k - 0.4), ax.y(0), ax.x(k + 0.4) - ax.x(k - 0.4), ax.y(v) - ax.y(0), PALETTE[0])
        ax.axes(xticks=list(range(len(xs))), xlabels=[""] * len(xs), ylabel=f"mean ITE ({outcome})", title=title)
        for k, v in enumerate(xs):
            c.text(ax.x(k) + 4, ax.top + ax.height + 12, v, size=11, anchor="end", rotate=30)
        c.text(ax.left + ax.width / 2, c.height - 38, profile["covariate"], size=12, anchor="middle")
    else:
        px = ax.xy(xs, y)
        c.line(px, PALETTE[0], width=2)
        for a, b in px:
            c.marker(a, b, PALETTE[0])
        ax.axes(xlabel=profile["covariate"], ylabel=f"mean ITE ({outcome})", title=title)
    ax.hline(average, GREY, width=1, dash="5 3")
    c.legend([("average", GREY, "dash")], top=c.height - 28, columns=1)
    return c.svg()


def _size_text(value: float) -> str:
    for power, suffix in ((9, "B"), (6, "M"), (3, "k")):
        if value >= 10**power:
            return f"{value / 10**power:g}{suffix}"
    return f"{value:g}"


def scatter_parameters(points: dict[str, tuple[float, float]], *, levels: int, colours: dict[str, str]) -> str:
    """Parameter count vs mean robustness rating, one labelled point per system."""
    params = finite(p for p, _ in points.values())
    lo, hi = math.floor(math.log10(min(params))), math.ceil(math.log10(max(params)))
    hi = max(hi, lo + 1)
    c = Canvas(620, 380)
    ax = Panel(c, (80, 20, 500, 280), (10.0**lo, 10.0**hi), (0.7, levels + 0.3), xlog=True, yinvert=True)
    for name, (count, rating) in points.items():
        if math.isfinite(rating):
            c.marker(ax.x(count), ax.y(rating), colours[name], size=9)
            c.text(ax.x(count) + 7, ax.y(rating) - 8, name, size=11)
    ax.axes(
        xticks=[10.0**k for k in range(lo, hi + 1)],
        xlabels=[_size_text(10.0**k) for k in range(lo, hi + 1)],
        yticks=list(range(1, levels + 1)),
        xlabel="parameters (log scale)",
        ylabel="mean robustness rating (1 = best, top)",
    )
    return c.svg()


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
) -> str:
    """Accuracy error (x) vs perturbation effect (y), both lower = better, 95 % ranges and the Pareto front.

    points: {system: {x, x_lo, x_hi, y, y_lo, y_hi}}.
    """
    centres = {s: (p["x"], p["y"]) for s, p in points.items()}
    front = pareto_front(centres)
    names = [s + (" (Pareto front)" if s in front else "") for s in points]
    legend_w = 40 + max(text_width(n, 12) for n in names)
    c = Canvas(max(760, 560 + legend_w), 470)
    x = extent([v for p in points.values() for v in (p["x"], p["x_lo"], p["x_hi"])], pad=0.12)
    y = extent([v for p in points.values() for v in (p["y"], p["y_lo"], p["y_hi"])], pad=0.12)
    ax = Panel(c, (95, 45, c.width - 95 - legend_w - 20, 350), x, y)
    if len(front) >= 2:
        steps = [centres[front[0]]]
        for name in front[1:]:
            steps += [(centres[name][0], steps[-1][1]), centres[name]]
        c.line(ax.xy(*zip(*steps, strict=True)), GREY, width=1.2, dash="5 3")
    for system, p in points.items():
        ax.errorbar_x(p["y"], p["x_lo"], p["x_hi"], colours[system], width=1.2)
        ax.errorbar_y(p["x"], p["y_lo"], p["y_hi"], colours[system], width=1.2)
        c.marker(ax.x(p["x"]), ax.y(p["y"]), colours[system], size=10, edge=INK if system in front else None)
    ax.axes(xlabel=x_label, ylabel=y_label)
    c.text(
        c.width / 2,
        16,
        "Lower-left is better; dashed: Pareto front (no other system beats these on both)",
        size=13,
        anchor="middle",
    )
    c.legend(
        [(n, colours[s], "dot") for s, n in zip(points, names, strict=True)], top=45, columns=1, left=c.width - legend_w
    )
    return c.svg()


def small_multiples(
    axes: list[str], series: dict[str, list[float]], *, colours: dict[str, str], columns: int = 4
) -> str:
    """One horizontal-bar panel per system: each score scaled 0 (worst) to 1 (best of the systems)."""
    n = len(series)
    columns = max(1, min(columns, n))
    rows = -(-n // columns)
    left, panel_w, panel_h = _left_margin(axes) - 10, 190, 19 * len(axes)
    c = Canvas(left + columns * (panel_w + 30), rows * (panel_h + 70) + 10)
    for k, (system, values) in enumerate(series.items()):
        r, col = divmod(k, columns)
        box = (left + col * (panel_w + 30), 30 + r * (panel_h + 70), panel_w, panel_h)
        ax = Panel(c, box, (0.0, 1.0), (-0.5, len(axes) - 0.5), yinvert=True)
        for i, v in enumerate(values):
            if math.isfinite(v):
                top = ax.y(i - 0.35)
                c.rect(ax.x(0), top, ax.x(v) - ax.x(0), ax.y(i + 0.35) - top, colours[system])
            else:
                c.text(ax.x(0.02), ax.y(i), "n/a", size=10, colour=GREY)
        ax.axes(
            xticks=[0, 0.5, 1],
            xlabels=["", "", ""],
            yticks=list(range(len(axes))),
            ylabels=axes if col == 0 else [""] * len(axes),
            title=system,
            grid="x",
        )
        c.text(ax.x(0), ax.top + ax.height + 13, "worst", size=11)  # inside the panel: never into the next
        c.text(ax.x(1), ax.top + ax.height + 13, "best", size=11, anchor="end")
    return c.svg()
