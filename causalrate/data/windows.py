"""Slicing series into windows: input = first n points, truth = last d (METHOD §1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causalrate.data.dataset import Dataset


@dataclass(frozen=True)
class Windows:
    """All windows of a dataset, as aligned arrays (one row per window)."""

    series_index: np.ndarray  # int, index into dataset.series
    start: np.ndarray  # int, position of the window's first input point in its series
    inputs: np.ndarray  # float [w, n], clean input
    truth: np.ndarray  # float [w, d]
    input_dates: np.ndarray  # datetime64[D] [w, n]
    truth_dates: np.ndarray  # datetime64[D] [w, d]

    def __len__(self) -> int:
        return int(self.start.size)

    @property
    def input_length(self) -> int:
        return int(self.inputs.shape[1])

    @property
    def horizon(self) -> int:
        return int(self.truth.shape[1])


def make_windows(dataset: Dataset, *, input_length: int, horizon: int, stride: int) -> Windows:
    """Slide a window of input_length + horizon points over every series with the given stride."""
    size = input_length + horizon
    parts = []
    for i, s in enumerate(dataset.series):
        starts = np.arange(0, s.values.size - size + 1, stride)
        values = np.lib.stride_tricks.sliding_window_view(s.values, size)[starts]
        dates = np.lib.stride_tricks.sliding_window_view(s.dates, size)[starts]
        parts.append((np.full(starts.size, i), starts, values, dates))
    idx, starts, values, dates = (np.concatenate(p) for p in zip(*parts, strict=True))
    return Windows(
        series_index=idx,
        start=starts,
        inputs=np.ascontiguousarray(values[:, :input_length]),
        truth=np.ascontiguousarray(values[:, input_length:]),
        input_dates=np.ascontiguousarray(dates[:, :input_length]),
        truth_dates=np.ascontiguousarray(dates[:, input_length:]),
    )
