"""SVG charts drawn directly as text: a canvas, panels with linear or log scales, ticks and legends.

The cards' figures are simple (lines, bars, dots, error bars, a radar), so they are written as SVG
here instead of rasterised by matplotlib: no plotting library to import, a few milliseconds per
figure, sharp at any zoom, and the same run gives the same bytes (coordinates are rounded,
nothing is timestamped). Text widths are estimated (DejaVu Sans averages ≈ 0.6 em per character),
which is what margins and legends are laid out from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
INK = "#222222"
GRID = "#e6e6e6"


def text_width(text: str, size: float) -> float:
    """Estimated width in px of `text` at font `size` px."""
    return 0.6 * size * len(text)


def label_margin(labels: list[str], size: float = 11) -> float:
    """Room left of a panel for tick labels of this size, and the tick marks."""
    return 30 + max((text_width(t, size) for t in labels), default=0)


def finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k steps) covering [lo, hi] with about `count` ticks."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / count
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
    first = math.ceil(lo / step - 1e-9)
    return [round(k * step, 12) for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5 × 10^k ticks inside [lo, hi] (both > 0); the decades alone when that gives over eight."""
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    ticks = [m * 10.0**k for k in decades for m in (1, 2, 5) if lo <= m * 10.0**k <= hi]
    return ticks if len(ticks) <= 8 else [t for t in ticks if math.log10(t).is_integer()]


def tick_text(value: float) -> str:
    text = f"{value:.4g}"
    return "0" if text in ("-0", "0.0") else text.replace("-", "−")


def extent(values, *, pad: float = 0.06, zero: bool = False) -> tuple[float, float]:
    """A data range with a margin; [0, 1] when there is no finite value."""
    vals = finite(values) + ([0.0] if zero else [])
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    margin = (hi - lo) * pad or abs(hi) * 0.1 or 1.0
    return (lo if zero and lo == 0 else lo - margin), (hi if zero and hi == 0 else hi + margin)


@dataclass(frozen=True)
class Scale:
    """Data → pixels; `log` maps log10 of the value."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        v, lo, hi = value, self.lo, self.hi
        if self.log:
            v, lo, hi = math.log10(v), math.log10(lo), math.log10(hi)
        return self.start + (v - lo) / ((hi - lo) or 1.0) * (self.end - self.start)


def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


class Canvas:
    """An SVG document built element by element."""

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height
        self.parts: list[str] = []

    def line(self, points, colour: str, *, width: float = 1.5, dash: str | None = None) -> None:
        """A polyline; non-finite points break it into separate runs."""
        run: list[tuple[float, float]] = []
        for x, y in [*points, (math.nan, math.nan)]:
            if math.isfinite(x) and math.isfinite(y):
                run.append((x, y))
                continue
            if len(run) >= 2:
                coords = " ".join(f"{_n(a)},{_n(b)}" for a, b in run)
                style = f' stroke-dasharray="{dash}"' if dash else ""
                self.parts.append(
                    f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="{width}"'
                    f' stroke-linejoin="round"{style}/>'
                )
            run = []

    def polygon(self, points, colour: str, *, opacity: float) -> None:
        coords = " ".join(f"{_n(a)},{_n(b)}" for a, b in points)
        self.parts.append(f'<polygon points="{coords}" fill="{colour}" fill-opacity="{opacity}"/>')

    def rect(self, x: float, y: float, w: float, h: float, colour: str) -> None:
        x, w = (x + w, -w) if w < 0 else (x, w)
        y, h = (y + h, -h) if h < 0 else (y, h)
        self.parts.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{colour}"/>')

    def marker(self, x: float, y: float, colour: str, *, kind: str = "o", size: float = 7, edge: str | None = None):
        if not (math.isfinite(x) and math.isfinite(y)):
            return
        stroke = f' stroke="{edge}" stroke-width="1.6"' if edge else ""
        r = size / 2
        if kind == "o":
            self.parts.append(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{_n(r)}" fill="{colour}"{stroke}/>')
        elif kind == "s":
            box = f'x="{_n(x - r)}" y="{_n(y - r)}" width="{_n(size)}" height="{_n(size)}"'
            self.parts.append(f'<rect {box} fill="{colour}"{stroke}/>')
        else:  # "v" / "^": a triangle pointing down / up
            tip = r if kind == "v" else -r
            pts = f"{_n(x - r)},{_n(y - tip)} {_n(x + r)},{_n(y - tip)} {_n(x)},{_n(y + tip)}"
            self.parts.append(f'<polygon points="{pts}" fill="{colour}"{stroke}/>')

    def text(
        self,
        x: float,
        y: float,
        text: str,
        *,
        size: float = 12,
        anchor: str = "start",
        colour: str = INK,
        rotate: float = 0,
    ) -> None:
        """Text centred vertically on y, turned `rotate` degrees counter-clockwise about (x, y)."""
        turn = f' transform="rotate({_n(-rotate)} {_n(x)} {_n(y)})"' if rotate else ""
        self.parts.append(
            f'<text x="{_n(x)}" y="{_n(y + 0.35 * size)}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{colour}"{turn}>{escape(text)}</text>'
        )

    def legend(self, items: list[tuple[str, str, str]], *, top: float, columns: int, left: float | None = None):
        """Entries (label, colour, kind: 'line' | 'dash' | 'box' | 'dot' or a marker 'o' | 's' | '^') in rows of at
        most `columns` (fewer when they would not fit the width); centred unless `left`. Returns the height used."""
        size, gap = 12, 22
        col = max((28 + text_width(label, size) for label, _, _ in items), default=0)
        room = self.width - (left or 0) - 10
        columns = max(1, min(columns, int((room + gap) // (col + gap))))
        rows = [items[i : i + columns] for i in range(0, len(items), columns)]
        x0 = left if left is not None else (self.width - len(rows[0]) * col - (len(rows[0]) - 1) * gap) / 2
        for r, row in enumerate(rows):  # a grid: a shorter last row starts under the first column
            y = top + 9 + r * 20
            for k, (label, colour, kind) in enumerate(row):
                x = x0 + k * (col + gap)
                if kind == "box":
                    self.rect(x, y - 6, 20, 12, colour)
                elif kind in ("dot", "o", "s", "^"):
                    self.marker(x + 10, y, colour, kind="o" if kind == "dot" else kind, size=8)
                else:
                    self.line([(x, y), (x + 20, y)], colour, width=2, dash="5 3" if kind == "dash" else None)
                self.text(x + 26, y, label, size=size)
        return 20 * len(rows)

    def svg(self) -> str:
        w, h = _n(self.width), _n(self.height)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="{FONT}">\n<rect width="100%" height="100%" fill="white"/>\n'
            + "\n".join(self.parts)
            + "\n</svg>\n"
        )


class Panel:
    """One set of axes on a canvas: a pixel box, x and y scales, left and bottom spines."""

    def __init__(
        self,
        canvas: Canvas,
        box: tuple[float, float, float, float],
        x: tuple[float, float],
        y: tuple[float, float],
        *,
        xlog: bool = False,
        ylog: bool = False,
        yinvert: bool = False,
    ) -> None:
        self.canvas = canvas
        self.left, self.top, self.width, self.height = box
        bottom = self.top + self.height
        self.x = Scale(*x, self.left, self.left + self.width, log=xlog)
        self.y = Scale(*y, self.top if yinvert else bottom, bottom if yinvert else self.top, log=ylog)

    def xy(self, xs, ys) -> list[tuple[float, float]]:
        return [
            (self.x(a), self.y(b))
            if a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
            else (math.nan, math.nan)
            for a, b in zip(xs, ys, strict=True)
        ]

    def hline(self, value: float, colour: str = INK, *, width: float = 0.8, dash: str | None = None) -> None:
        self.canvas.line(
            [(self.left, self.y(value)), (self.left + self.width, self.y(value))], colour, width=width, dash=dash
        )

    def vline(self, value: float, colour: str = INK, *, width: float = 0.8, dash: str | None = None) -> None:
        self.canvas.line(
            [(self.x(value), self.top), (self.x(value), self.top + self.height)], colour, width=width, dash=dash
        )

    def errorbar_y(self, x: float, lo: float, hi: float, colour: str, *, cap: float = 3, width: float = 1.0) -> None:
        if not all(math.isfinite(v) for v in (x, lo, hi)):
            return
        px, a, b = self.x(x), self.y(lo), self.y(hi)
        self.canvas.line([(px, a), (px, b)], colour, width=width)
        for end in (a, b):
            self.canvas.line([(px - cap, end), (px + cap, end)], colour, width=width)

    def errorbar_x(self, y: float, lo: float, hi: float, colour: str, *, cap: float = 3, width: float = 1.0) -> None:
        if not all(math.isfinite(v) for v in (y, lo, hi)):
            return
        py, a, b = self.y(y), self.x(lo), self.x(hi)
        self.canvas.line([(a, py), (b, py)], colour, width=width)
        for end in (a, b):
            self.canvas.line([(end, py - cap), (end, py + cap)], colour, width=width)

    def axes(
        self,
        *,
        xticks: list[float] | None = None,
        xlabels: list[str] | None = None,
        yticks: list[float] | None = None,
        ylabels: list[str] | None = None,
        xlabel: str = "",
        ylabel: str = "",
        title: str = "",
        xgrid: bool = False,
        size: float = 11,
    ) -> None:
        """Spines, ticks with labels (default: round values of the scale), axis labels and title."""
        c, bottom, right = self.canvas, self.top + self.height, self.left + self.width
        xticks = nice_ticks(min(self.x.lo, self.x.hi), max(self.x.lo, self.x.hi)) if xticks is None else xticks
        yticks = nice_ticks(min(self.y.lo, self.y.hi), max(self.y.lo, self.y.hi)) if yticks is None else yticks
        for v, label in zip(xticks, xlabels or [tick_text(v) for v in xticks], strict=True):
            px = self.x(v)
            if xgrid:
                c.line([(px, self.top), (px, bottom)], GRID, width=0.6)
            c.line([(px, bottom), (px, bottom + 4)], INK, width=0.8)
            c.text(px, bottom + 13, label, size=size, anchor="middle")
        for v, label in zip(yticks, ylabels or [tick_text(v) for v in yticks], strict=True):
            py = self.y(v)
            c.line([(self.left - 4, py), (self.left, py)], INK, width=0.8)
            c.text(self.left - 7, py, label, size=size, anchor="end")
        c.line([(self.left, self.top), (self.left, bottom), (right, bottom)], INK, width=0.8)
        if xlabel:  # centred under the axes, shifted left where it would run off the canvas
            centre = min(self.left + self.width / 2, c.width - 5 - text_width(xlabel, 12) / 2)
            c.text(centre, bottom + 33, xlabel, size=12, anchor="middle")
        if ylabel:
            width = max((text_width(t, size) for t in (ylabels or [tick_text(v) for v in yticks])), default=0)
            c.text(self.left - width - 20, self.top + self.height / 2, ylabel, size=12, anchor="middle", rotate=90)
        if title:
            c.text(self.left + self.width / 2, self.top - 14, title, size=13, anchor="middle")
