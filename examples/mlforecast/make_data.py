"""A synthetic hourly load CSV (unique_id, ds, y, region): a daily profile, a weekly swing, noise."""

from pathlib import Path

import numpy as np
import pandas as pd


def make(path: Path, *, days: int = 28, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    ds = pd.date_range("2024-03-04", periods=24 * days, freq="h")
    hour, day = ds.hour.to_numpy(), ds.day_of_week.to_numpy()
    rows = []
    for k, region in enumerate(["north", "north", "south", "south", "east", "east"]):
        base = 100 + 20 * k + 15 * np.sin(2 * np.pi * (hour - 7) / 24) - 8 * (day >= 5)
        rows.append(
            pd.DataFrame({"unique_id": f"feeder{k}", "ds": ds, "y": base + rng.normal(0, 2, ds.size), "region": region})
        )
    pd.concat(rows).to_csv(path, index=False)
    return path


if __name__ == "__main__":
    make(Path(__file__).parent / "load.csv")
