"""The plot modality (METHOD §2): one fixed, versioned rendering of an input window as a line chart.

Vision systems see this PNG instead of numbers. Everything that shapes the pixels is fixed
here — size, dpi, fonts, colours, ticks — and independent of the user's matplotlib settings;
the PNG's hash enters the forecast's cache key, so a change of style or library that alters
the pixels re-runs the forecasts. Missing values are gaps in the line (and marked on the
x-axis), a value dropped to zero is a visible fall to the zero line.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

PLOT_STYLE = "plot-v2"  # bump whenever the rendering below changes
SIZE_INCHES = (6.4, 3.6)
DPI = 100

_RC = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "lines.linewidth": 1.4,
    "lines.markersize": 2.5,
}


def render_window(values: np.ndarray, dates: np.ndarray) -> bytes:
    """PNG bytes of one input window: values [n] (NaN = missing), dates [n] (datetime64[D])."""
    with rc_context(_RC):  # type: ignore[arg-type]  # matplotlib types the keys as a Literal of rc names
        fig = Figure(figsize=SIZE_INCHES, dpi=DPI)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        x = np.arange(values.size)
        ax.plot(x, values, color="#0072B2", marker="o")
        missing = np.flatnonzero(np.isnan(values))
        if missing.size:
            ax.plot(
                missing,
                np.full(missing.size, 0.04),
                "x",
                ms=7,
                mew=2,
                color="#D55E00",
                transform=ax.get_xaxis_transform(),
            )
        finite = values[np.isfinite(values)]
        if finite.size and finite.min() <= 0 <= finite.max():
            ax.axhline(0.0, color="#555555", linewidth=0.8)
        ticks = np.unique(np.linspace(0, values.size - 1, 5).round().astype(int))
        ax.set_xticks(ticks, [str(dates[i]) for i in ticks], fontsize=8)
        ax.set_xlim(-1, values.size)
        ax.set_xlabel(f"date (last observed: {dates[-1]})")
        ax.set_ylabel("value")
        ax.set_title("Daily values, oldest left, newest right")
        fig.subplots_adjust(left=0.11, right=0.93, top=0.91, bottom=0.17)  # fixed: tight_layout costs a draw
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def render_windows(values: np.ndarray, dates: np.ndarray) -> list[bytes]:
    """One PNG per row of values [b, n] and dates [b, n]."""
    return [render_window(v, d) for v, d in zip(values, dates, strict=True)]
