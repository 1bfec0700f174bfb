"""`causalrate export`: a run's forecast rows as parquet, for analysis outside causalrate.

forecasts.parquet: one row per forecast with its window, truth, series attributes (`attr_<name>`), the
perturbation's `operator` and `operator_params` (JSON), the `input_seen` by the system (after perturbation and
imputation), and the window's `input_dates` / `truth_dates`. forecasts_long.parquet: one row per forecast
step, Nixtla-style: `unique_id, ds, model, perturbation, y_hat, y, window, step`. The last three columns of
the first file need the run's data (its study is rebuilt); without it they are left out, with a warning.
"""

from __future__ import annotations

import json
import logging
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from causalrate.errors import UserError
from causalrate.forecast.encoding import forecast_values
from causalrate.forecast.plan import imputation_of, perturbed_inputs, seen_inputs
from causalrate.perturb.suite import placed_firsts
from causalrate.run import Run, StoredForecasts, load_run_plugins, open_store

log = logging.getLogger(__name__)


def export_parquet(run_dir: Path, *, out: Path | None = None) -> Path:
    """Every forecast row with its window, truth and series attributes (`attr_<name>`), as one parquet file."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UserError(
            "export needs pyarrow, a dependency of causalrate this install lacks: pip install pyarrow"
        ) from None
    if out is not None and out.is_dir():
        raise UserError(f"--out {out}: a folder; give the parquet file's path (e.g. {out / 'forecasts.parquet'})")
    load_run_plugins(run_dir)
    with closing(open_store(run_dir)) as store:
        if store.get_meta("status") != "forecasted":  # exported anyway: partial rows are still worth a look
            log.warning(
                f"{run_dir}: the run's forecasting is unfinished; the export holds only the "
                f"forecasts made so far (finish it with causalrate assess CONFIG --resume {run_dir})"
            )
        rows = store.forecasts(samples=True)
        windows = store.windows_table()
        series = store.series_attributes()
    frame = rows.merge(windows, on="window")
    frame["forecast"] = [forecast_values(v).tolist() if isinstance(v, bytes | str) else None for v in frame["forecast"]]
    for col in ("info", "offsets"):
        frame[col] = frame[col].map(lambda v: None if v is None or v is np.nan or pd.isna(v) else json.loads(v))
    attributes = series.set_index("series").add_prefix("attr_")
    frame = frame.merge(attributes, left_on="series", right_index=True, how="inner")
    frame = frame.merge(_operators(run_dir), on="perturbation", how="left")
    frame = _with_what_was_seen(frame, run_dir)
    target = out or run_dir / "forecasts.parquet"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # as assess makes its --out
        frame.to_parquet(target, index=False)
        if "truth_dates" in frame:
            _long(frame).to_parquet(target.with_name(target.stem + "_long.parquet"), index=False)
    except OSError as exc:
        raise UserError(f"--out {target}: cannot write the parquet file there ({exc.strerror or exc})") from None
    return target


def _operators(run_dir: Path) -> pd.DataFrame:
    """Per perturbation id: its operator and parameters (JSON), from ratings.json or else the stored config."""
    try:
        records = Run.open(run_dir).ratings.perturbations
        rows = [(r.id, r.operator, json.dumps(r.params, sort_keys=True)) for r in records]
    except UserError:  # a run not rated yet: its ids only
        rows = []
    return pd.DataFrame(rows, columns=["perturbation", "operator", "operator_params"])


def _with_what_was_seen(frame: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """The input each system was handed and the windows' dates, recomputed from the rebuilt study exactly as the
    forecast stage made them (worst-case placement: its kept candidate is not recorded, so None)."""
    try:
        study = StoredForecasts.read(run_dir).study(run_dir)
    except UserError as exc:
        log.warning(f"{run_dir}: no input_seen or dates in the export: {exc}")
        return frame
    seen: dict[tuple[str, str], np.ndarray] = {}
    for p in study.suite:
        if p.placement.name == "worst":
            continue
        firsts = placed_firsts(p, study.dataset, study.windows, seed=study.config.seed)[:, 0]
        perturbed, _ = perturbed_inputs(study, p, firsts)
        for name, system in study.systems.items():
            imputation = imputation_of(p, system, study.config.forecast.imputation)
            seen[(name, p.id)] = seen_inputs(perturbed, imputation)
    wd = study.windows
    frame["input_seen"] = [
        None if (s, p) not in seen else [None if np.isnan(v) else float(v) for v in seen[(s, p)][w]]
        for s, p, w in zip(frame["system"], frame["perturbation"], frame["window"], strict=True)
    ]
    frame["input_dates"] = [wd.input_dates[w].astype(str).tolist() for w in frame["window"]]
    frame["truth_dates"] = [wd.truth_dates[w].astype(str).tolist() for w in frame["window"]]
    return frame


def _long(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per forecast step of every successful forecast: unique_id, ds, model, perturbation, y_hat, y."""
    ok = frame[frame["forecast"].notna()]
    steps = ok[["series", "system", "perturbation", "window", "forecast", "truth", "truth_dates"]].explode(
        ["forecast", "truth", "truth_dates"]
    )
    steps["step"] = steps.groupby(level=0).cumcount() + 1
    return pd.DataFrame(
        {
            "unique_id": steps["series"].to_numpy(),
            "ds": pd.to_datetime(steps["truth_dates"]).to_numpy(),
            "model": steps["system"].to_numpy(),
            "perturbation": steps["perturbation"].to_numpy(),
            "y_hat": steps["forecast"].astype(float).to_numpy(),
            "y": steps["truth"].astype(float).to_numpy(),
            "window": steps["window"].to_numpy(),
            "step": steps["step"].to_numpy(),
        }
    )
