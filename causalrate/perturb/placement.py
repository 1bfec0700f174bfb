"""Where a perturbation falls inside each input window (METHOD §2, placement).

Every placement picks, per window, the *first* perturbed offset f in 0..k−1 (k = the period,
0 = the oldest input point); the perturbed offsets are then f, f + k, f + 2k, … < n. So
periods below n (several points per window) and severity grids work under every placement.

- ``cyclic`` (default): per series, windows in time order take the offsets of a seeded random
  permutation of 0..k−1, a fresh permutation for each block of k windows. Every offset is used
  equally often (±1) in every series whatever the stride, and the offset is unrelated to time.
- ``series``: the paper's rule, series positions i with (i − phase) % k == 0 (the paper at stride 1).
- ``last``: the last input point (n − 1); ``offset``: a fixed offset j; ``random``: seeded, per window.
- ``worst``: no single offset; the candidates (all k, or a seeded subset of m per window) are each
  forecast and the one that raises the error most is kept (see forecast_all in the pipeline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from causalrate.seeding import rng, stable_seed

PLACEMENTS = ("cyclic", "series", "last", "offset", "random", "worst")
PlacementName = Literal["cyclic", "series", "last", "offset", "random", "worst"]


@dataclass(frozen=True)
class Placement:
    """A placement rule and its settings: `offset` for 'offset', `candidates` (m) for 'worst'."""

    name: PlacementName = "cyclic"
    offset: int | None = None
    candidates: int | None = None  # worst: None = all k offsets

    def firsts(
        self, starts: np.ndarray, series: np.ndarray, *, period: int, phase: int, input_length: int, seed: int
    ) -> np.ndarray:
        """int [w]: each window's first perturbed offset (in 0..period−1). Not for 'worst' (see candidate_firsts)."""
        k = period
        if self.name == "series":
            return np.mod(phase - starts, k).astype(int)
        if self.name == "last":
            return np.full(starts.size, (input_length - 1) % k, dtype=int)
        if self.name == "offset":
            assert self.offset is not None  # the spec requires it for placement 'offset'
            return np.full(starts.size, self.offset % k, dtype=int)
        if self.name == "random":
            return np.array(
                [
                    rng(seed, "placement", "random", k, s, int(t)).integers(k)
                    for s, t in zip(series, starts, strict=True)
                ],
                dtype=int,
            )
        if self.name == "cyclic":
            return cyclic_firsts(starts, series, period=k, seed=seed)
        raise ValueError(f"placement {self.name!r} has no single offset per window")

    def candidate_firsts(self, starts: np.ndarray, series: np.ndarray, *, period: int, seed: int) -> np.ndarray:
        """int [w, m]: the candidate first offsets of 'worst' per window (all k in order, or a seeded subset of m)."""
        k = period
        if self.candidates is None or self.candidates >= k:
            return np.tile(np.arange(k), (starts.size, 1))
        return np.array(
            [
                np.sort(rng(seed, "placement", "worst", k, s, int(t)).choice(k, size=self.candidates, replace=False))
                for s, t in zip(series, starts, strict=True)
            ],
            dtype=int,
        ).reshape(starts.size, self.candidates)


def cyclic_firsts(starts: np.ndarray, series: np.ndarray, *, period: int, seed: int) -> np.ndarray:
    """Per series, in start order: window j takes perm_b[j mod k], perm_b a seeded permutation for block b = j // k."""
    firsts = np.empty(starts.size, dtype=int)
    for s in dict.fromkeys(series.tolist()):
        members = np.flatnonzero(series == s)
        members = members[np.argsort(starts[members], kind="stable")]
        for block in range(-(-members.size // period)):
            chunk = members[block * period : (block + 1) * period]
            perm = np.random.default_rng(stable_seed(seed, "placement", "cyclic", period, s, block)).permutation(period)
            firsts[chunk] = perm[: chunk.size]
    return firsts


def offsets_mask(firsts: np.ndarray, *, period: int, input_length: int) -> np.ndarray:
    """bool [w, n]: offsets o with (o − first) % period == 0."""
    return (np.arange(input_length)[None, :] - np.asarray(firsts)[:, None]) % period == 0


def offsets_of(mask: np.ndarray) -> list[list[int]]:
    """Per row, the perturbed offsets (0 = oldest), as stored in the forecast store. A placement marks few
    distinct patterns (one per first offset), so rows with the same mask share one list (read, never changed)."""
    found: dict[bytes, list[int]] = {}  # a row's packed mask → its list
    out = []
    for i, key in enumerate(map(bytes, np.packbits(mask, axis=1))):
        offsets = found.get(key)
        if offsets is None:
            offsets = found[key] = np.flatnonzero(mask[i]).tolist()
        out.append(offsets)
    return out
