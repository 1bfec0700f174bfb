"""Train a small neuralforecast NHITS on the first three weeks of ../mlforecast/load.csv, save it to trained/.

CPU only (the on-disk torch); positions, not dates: ds is 0..T−1 with freq=1, as the adapter feeds each window.
"""

from pathlib import Path

import pandas as pd
from neuralforecast import NeuralForecast
from neuralforecast.models import NHITS

HORIZON, INPUT = 24, 96


def train(csv: Path, out: Path, hours: int = 24 * 21, steps: int = 50) -> NeuralForecast:
    frame = pd.read_csv(csv).groupby("unique_id").head(hours)
    frame = frame.assign(ds=frame.groupby("unique_id").cumcount())[["unique_id", "ds", "y"]]
    model = NHITS(
        h=HORIZON,
        input_size=INPUT,
        max_steps=steps,
        random_seed=0,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    nf = NeuralForecast(models=[model], freq=1)
    nf.fit(frame)
    nf.save(str(out), overwrite=True)
    return nf


if __name__ == "__main__":
    here = Path(__file__).parent
    train(here.parent / "mlforecast" / "load.csv", here / "trained")
