"""`placement: worst`: per (system, window), keep the candidate offset that raised the error most.

Every candidate is forecast like any perturbation (batched, cached); this keeps, per window,
the row with the largest outcome (a failed forecast counts as the largest: a model that fails
is never rated well). Ties go to the lowest candidate index, so the result does not depend on
the order in which batches finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Kept:
    score: float
    variant: int
    forecast: np.ndarray
    error: str | None
    seconds: float
    samples: np.ndarray | None
    info: dict | None
    offsets: list[int]


@dataclass
class WorstCase:
    """The worst candidate seen so far for each window of one (system, perturbation)."""

    kept: dict[int, Kept] = field(default_factory=dict)

    def offer(self, *, variant: int, window_ids: np.ndarray, metric: np.ndarray, result, seconds, offsets) -> None:
        """metric: the study's outcome metric per row (larger = worse); result: the runner's BatchResult."""
        for j, w in enumerate(window_ids.tolist()):
            failed = result.errors[j] is not None
            score = np.inf if failed else float(metric[j]) if np.isfinite(metric[j]) else -np.inf
            best = self.kept.get(w)
            if best is None or (score, -variant) > (best.score, -best.variant):
                samples = result.samples[j] if result.samples else None
                info = result.info[j] if result.info else None
                self.kept[w] = Kept(
                    score,
                    variant,
                    result.forecasts[j],
                    result.errors[j],
                    float(seconds[j]),
                    samples,
                    info,
                    offsets[j],
                )

    def rows(self) -> tuple[np.ndarray, list[Kept]]:
        windows = np.array(sorted(self.kept), dtype=int)
        return windows, [self.kept[w] for w in windows.tolist()]
