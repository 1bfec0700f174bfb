"""Stage 1 — data: series with attributes, loaders, and input/truth windows."""

from causalrate.data.dataset import Dataset, Series
from causalrate.data.windows import Windows, make_windows

__all__ = ["Dataset", "Series", "Windows", "make_windows"]
