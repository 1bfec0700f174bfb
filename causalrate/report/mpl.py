"""matplotlib for the user-study figures (the cards draw their own SVG: causalrate.report.svg).

`png` gives deterministic bytes: no timestamp in the metadata, so the same inputs give the same image.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

plt.rcParams.update(
    {
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.dpi": 100,
        # laid out once while drawing: savefig(bbox_inches="tight") would draw every figure twice
        "figure.constrained_layout.use": True,
    }
)


def png(fig: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()
