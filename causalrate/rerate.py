"""Work on a finished run's store without forecasting: re-rate it, export its rows."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from causalrate.config import StudyConfig, format_validation_error, import_plugins
from causalrate.errors import UserError
from causalrate.forecast.store import ForecastStore
from causalrate.pipeline import analyse, prepare
from causalrate.report.outputs import write_outputs
from causalrate.score.metrics import METRICS


def rerate(
    run_dir: Path,
    *,
    levels: int | None = None,
    systems: list[str] | None = None,
    scores: list[str] | None = None,
    out: Path | None = None,
) -> Path:
    """Causal analysis and ratings again from the stored forecasts, with other levels, systems or scores."""
    store = ForecastStore.open(run_dir / "forecasts.sqlite", metrics=METRICS.names(), readonly=True)
    try:
        raw = store.get_meta("config")
        base_dir = Path(store.get_meta("base_dir"))
        data_hash = store.get_meta("data_hash")
        if store.get_meta("status") != "forecasted":
            raise UserError(
                f"{run_dir}: the run's forecasting is unfinished; resume it with causalrate assess "
                f"CONFIG --resume {run_dir}"
            )
        forecasts = store.forecasts()
    finally:
        store.close()
    if levels is not None:
        raw["rating"]["levels"] = levels
    if scores is not None:
        raw["rating"]["scores"] = scores
    if systems is not None:
        known = [s["name"] for s in raw["systems"]]
        unknown = [s for s in systems if s not in known]
        if unknown:
            raise UserError(f"--systems: {unknown} not in this run; its systems: {known}")
        raw["systems"] = [s for s in raw["systems"] if s["name"] in systems]
    import_plugins(raw.get("plugins", []), run_dir)
    try:
        config = StudyConfig.model_validate(raw)
    except ValidationError as exc:
        raise UserError(format_validation_error(run_dir, exc)) from None
    study = prepare(config, base_dir=base_dir)
    if study.dataset.content_hash() != data_hash:
        raise UserError(
            f"{run_dir}: the data ({study.dataset.source}) changed since the run; re-rating would mix "
            "old forecasts with new truth"
        )
    forecasts = forecasts[forecasts["system"].isin(study.systems)]
    target = out or run_dir
    target.mkdir(parents=True, exist_ok=True)
    if target.resolve() != run_dir.resolve():  # cards read the store: give the new folder its own copy
        with (
            closing(sqlite3.connect(run_dir / "forecasts.sqlite")) as src,
            closing(sqlite3.connect(target / "forecasts.sqlite")) as dst,
        ):
            src.backup(dst)
    write_outputs(study=study, result=analyse(study, forecasts), out=target)
    return target


def export_parquet(run_dir: Path, *, out: Path | None = None) -> Path:
    """Every forecast row with its window, truth and series attributes, as one parquet file."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UserError("export needs pyarrow: pip install 'causalrate[parquet]'") from None
    store = ForecastStore.open(run_dir / "forecasts.sqlite", metrics=METRICS.names(), readonly=True)
    try:
        rows = store.forecasts(samples=True)
        windows = pd.read_sql_query("SELECT window, first_forecast_date, input, truth FROM windows", store.conn)
        series = pd.read_sql_query("SELECT id AS series, attributes FROM series", store.conn)
    finally:
        store.close()
    frame = rows.merge(windows, on="window").merge(series, on="series")
    for col in ("forecast", "input", "truth", "info"):
        frame[col] = frame[col].map(lambda v: None if v is None else json.loads(v))
    attrs = pd.DataFrame([json.loads(a) for a in frame.pop("attributes")], index=frame.index)
    frame = pd.concat([frame, attrs.add_prefix("attr_")], axis=1)
    target = out or run_dir / "forecasts.parquet"
    frame.to_parquet(target, index=False)
    return target
