"""A system's report figures: SVG drawn by causalrate.report.svg, Okabe–Ito colours.

Every chart function returns the SVG text of one figure; the same inputs give the same bytes.
The pages embed them as data URIs; the Markdown report links them as files. The comparison
page's charts are in comparison_charts.py.
"""

from __future__ import annotations

import base64
import math
import textwrap
from dataclasses import dataclass

import numpy as np

from causalrate.report.svg import INK, Canvas, Panel, extent, label_margin

# Okabe & Ito (2008), readable with every common colour-vision deficiency
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
GREY = "#7f7f7f"


# systems take Okabe–Ito's colours that stay clear of the level colours the rating badges use (blue = best,
# orange = middle, vermillion = worst), then Paul Tol's muted scheme (also colour-blind safe), never a badge's
SYSTEM_ORDER = [
    "#009E73", "#CC79A7", "#56B4E9", "#000000",  # Okabe–Ito
    "#332288", "#DDCC77", "#882255", "#999933", "#CC6677", "#117733", "#AA4499",  # Tol muted
]  # fmt: skip
MARKERS = ["o", "s", "^"]  # each pass through the colours takes the next marker: 33 distinct (colour, marker)


def system_colours(systems: list[str]) -> dict[str, str]:
    """One colour per system, by its position in the study (the same on every page and figure); beyond the
    eleventh a colour comes back with another marker (system_markers), so no two systems look alike."""
    return {name: SYSTEM_ORDER[i % len(SYSTEM_ORDER)] for i, name in enumerate(systems)}


def system_markers(systems: list[str]) -> dict[str, str]:
    """The marker of each system's points: circles for the first eleven, then squares, then triangles."""
    return {name: MARKERS[(i // len(SYSTEM_ORDER)) % len(MARKERS)] for i, name in enumerate(systems)}


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

    for radius_share in (0.25, 0.5, 0.75, 1.0):
        c.line([point(a, radius_share) for a in [*angles, angles[0]]], "#d9d9d9", width=0.8)
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
    # the perturbed input equals the clean one except at the changed points: only those are drawn
    changed = ~np.isclose(clean, perturbed, equal_nan=False) | np.isnan(perturbed)
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
    entries = [("clean input", GREY, "line"), ("perturbed input: the changed points", PALETTE[1], "dot")]
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


def _num(x: float | str | None) -> float:
    return float("nan") if x is None else float(x)


def _bounds(row: dict, key: str = "interval") -> tuple[float, float]:
    lo, hi = row.get(key) or (None, None)
    return _num(lo), _num(hi)


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
    """Conditional effect (CATE) of each subgroup rule with its 95 % interval, largest first.

    A rule's words are wrapped on up to three lines: its condition comes last and must stay readable.
    """
    labels = [textwrap.wrap(f"{r['perturbation']}: {r['text']}", 52, max_lines=3, placeholder=" …") for r in rules]
    left = label_margin([line for lines in labels for line in lines])
    row = 46
    x = extent([v for r in rules for v in (_num(r.get("cate")), *_bounds(r))], zero=True)
    c = Canvas(max(820, left + 360), row * len(rules) + 80)
    ax = Panel(c, (left, 10, c.width - left - 25, row * len(rules)), x, (-0.5, len(rules) - 0.5), yinvert=True)
    ax.vline(0, INK, width=0.6)
    for k, (r, lines) in enumerate(zip(rules, labels, strict=True)):
        ax.errorbar_x(k, *_bounds(r), PALETTE[3])
        c.marker(ax.x(_num(r.get("cate"))), ax.y(k), PALETTE[3])
        for i, line in enumerate(lines):
            c.text(left - 8, ax.y(k) + 13 * (i - (len(lines) - 1) / 2), line, size=11, anchor="end")
    ax.axes(
        yticks=list(range(len(rules))),
        ylabels=[""] * len(rules),
        xlabel="conditional effect of the perturbation in the subgroup (CATE, 95 % interval)",
    )
    return c.svg()


def balance(rows: dict[str, tuple[float, float]], *, title: str) -> str:
    """|SMD| per confounder before and after matching, with the usual 0.1 threshold."""
    names = list(rows)
    left = label_margin(names)
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
