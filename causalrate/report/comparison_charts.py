"""The comparison page's figures: robustness vs accuracy with the Pareto front, one panel per
system, size vs robustness. SVG text, like figures.py."""

from __future__ import annotations

import math

from causalrate.report.figures import GREY
from causalrate.report.svg import INK, Canvas, Panel, extent, finite, label_margin, log_ticks, text_width

LOG_RATIO = 10  # the robustness axis turns logarithmic when the effects span this factor


def _size_text(value: float) -> str:
    for power, suffix in ((9, "B"), (6, "M"), (3, "k")):
        if value >= 10**power:
            return f"{value / 10**power:g}{suffix}"
    return f"{value:g}"


def scatter_parameters(
    points: dict[str, tuple[float, float]], *, levels: int, colours: dict[str, str], markers: dict[str, str]
) -> str:
    """Parameter count vs mean robustness rating, one labelled point per system."""
    params = finite(p for p, _ in points.values())
    lo, hi = math.floor(math.log10(min(params))), math.ceil(math.log10(max(params)))
    hi = max(hi, lo + 1)
    c = Canvas(620, 380)
    ax = Panel(c, (80, 20, 500, 280), (10.0**lo, 10.0**hi), (0.7, levels + 0.3), xlog=True, yinvert=True)
    for name, (count, rating) in points.items():
        if math.isfinite(rating):
            c.marker(ax.x(count), ax.y(rating), colours[name], kind=markers[name], size=9)
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
    points: dict[str, dict[str, float]],
    *,
    colours: dict[str, str],
    markers: dict[str, str],
    x_label: str,
    y_label: str,
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
    ys = finite(p["y"] for p in points.values())
    # effects an order of magnitude apart on a log axis, or the small ones collapse onto each other near 0
    ylog = bool(ys) and min(ys) > 0 and max(ys) / min(ys) >= LOG_RATIO
    if ylog:
        y = (min(ys) / 2, max(finite([*ys, *(p["y_hi"] for p in points.values())])) * 1.5)
        y_label += " (log scale)"
    else:
        y = extent([v for p in points.values() for v in (p["y"], p["y_lo"], p["y_hi"])], pad=0.12)
    ax = Panel(c, (95, 45, c.width - 95 - legend_w - 20, 350), x, y, ylog=ylog)
    if len(front) >= 2:
        steps = [centres[front[0]]]
        for name in front[1:]:
            steps += [(centres[name][0], steps[-1][1]), centres[name]]
        c.line(ax.xy(*zip(*steps, strict=True)), GREY, width=1.2, dash="5 3")
    for system, p in points.items():
        ax.errorbar_x(p["y"], p["x_lo"], p["x_hi"], colours[system], width=1.2)
        low = max(p["y_lo"], y[0]) if ylog else p["y_lo"]  # a lower bound at 0 ends at the log axis' floor
        ax.errorbar_y(p["x"], low, p["y_hi"], colours[system], width=1.2)
        edge = INK if system in front else None
        c.marker(ax.x(p["x"]), ax.y(p["y"]), colours[system], kind=markers[system], size=10, edge=edge)
    ax.axes(xlabel=x_label, ylabel=y_label, yticks=log_ticks(*y) if ylog else None)
    c.text(
        c.width / 2,
        16,
        "Lower-left is better; dashed: Pareto front (no other system beats these on both)",
        size=13,
        anchor="middle",
    )
    c.legend(
        [(n, colours[s], markers[s]) for s, n in zip(points, names, strict=True)],
        top=45,
        columns=1,
        left=c.width - legend_w,
    )
    return c.svg()


def small_multiples(
    axes: list[str], series: dict[str, list[float]], *, colours: dict[str, str], columns: int = 4
) -> str:
    """One horizontal-bar panel per system: each score scaled 0 (worst) to 1 (best of the systems)."""
    n = len(series)
    columns = max(1, min(columns, n))
    rows = -(-n // columns)
    left, panel_w, panel_h = label_margin(axes) - 10, 190, 19 * len(axes)
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
            xgrid=True,
        )
        c.text(ax.x(0), ax.top + ax.height + 13, "worst", size=11)  # inside the panel: never into the next
        c.text(ax.x(1), ax.top + ax.height + 13, "best", size=11, anchor="end")
    return c.svg()
