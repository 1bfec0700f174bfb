"""Work on a finished run's store without forecasting: re-rate it, export its rows."""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from causalrate import plugins
from causalrate.config import RatingConfig, StudyConfig
from causalrate.errors import UserError, format_validation_error
from causalrate.forecast.store import ForecastStore
from causalrate.pipeline import analyse
from causalrate.report.outputs import write_outputs
from causalrate.score.metrics import METRICS
from causalrate.study import Study, prepare


def read_run(run_dir: Path) -> tuple[dict, Path, str, dict[str, str], pd.DataFrame]:
    """A finished run's stored config (raw), base folder, data hash, not-assessed systems and forecast rows."""
    store = ForecastStore.open(run_dir / "forecasts.sqlite", metrics=METRICS.names(), readonly=True)
    try:
        if store.get_meta("status") != "forecasted":
            raise UserError(
                f"{run_dir}: the run's forecasting is unfinished; resume it with causalrate assess "
                f"CONFIG --resume {run_dir}"
            )
        forecasts = store.forecasts()
        return (
            store.get_meta("config"),
            Path(store.get_meta("base_dir")),
            store.get_meta("data_hash"),
            store.get_meta("not_assessed") or {},
            forecasts,
        )
    finally:
        store.close()


def load_run_plugins(run_dir: Path) -> None:
    """Import the plugins a run was made with (its store records them), so its registered names resolve."""
    store = ForecastStore.open(run_dir / "forecasts.sqlite", metrics=METRICS.names(), readonly=True)
    try:
        entries = store.get_meta("plugins")
        if entries is None:  # a run made before the list was recorded: its config's, against its YAML folder
            raw, base_dir = store.get_meta("config") or {}, Path(store.get_meta("base_dir") or run_dir)
            entries = plugins.resolve(raw.get("plugins", []), base_dir=base_dir, where=run_dir)
    finally:
        store.close()
    plugins.load(entries, where=run_dir / "forecasts.sqlite")


def study_of(run_dir: Path, raw: dict, *, base_dir: Path, data_hash: str, not_assessed: dict[str, str]) -> Study:
    """The run's study rebuilt from its stored config (systems not checked: nothing is forecast)."""
    load_run_plugins(run_dir)
    try:
        config = StudyConfig.model_validate(raw)
    except ValidationError as exc:
        raise UserError(format_validation_error(run_dir, exc)) from None
    study = prepare(config, base_dir=base_dir, check_systems=False, not_assessed=not_assessed)
    if study.dataset.content_hash() != data_hash:
        raise UserError(
            f"{run_dir}: the data ({study.dataset.source}) changed since the run; re-rating would mix "
            "old forecasts with new truth"
        )
    return study


def rerate(
    run_dir: Path,
    *,
    levels: int | None = None,
    systems: list[str] | None = None,
    scores: list[str] | None = None,
    out: Path | None = None,
) -> Path:
    """Causal analysis and ratings again from the stored forecasts, with other levels, systems or scores."""
    if levels is not None:  # the flag, not the stored config, is what the user got wrong
        try:
            RatingConfig(levels=levels)
        except ValidationError as exc:
            raise UserError(f"--levels: {exc.errors()[0]['msg'].lower()}, got {levels}") from None
    raw, base_dir, data_hash, not_assessed, forecasts = read_run(run_dir)
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
    study = study_of(run_dir, raw, base_dir=base_dir, data_hash=data_hash, not_assessed=not_assessed)
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
    load_run_plugins(run_dir)
    store = ForecastStore.open(run_dir / "forecasts.sqlite", metrics=METRICS.names(), readonly=True)
    try:
        if store.get_meta("status") != "forecasted":  # exported anyway: partial rows are still worth a look
            print(
                f"causalrate: warning: {run_dir}: the run's forecasting is unfinished; the export holds only the "
                f"forecasts made so far (finish it with causalrate assess CONFIG --resume {run_dir})",
                file=sys.stderr,
            )
        rows = store.forecasts(samples=True)
        windows = pd.read_sql_query("SELECT window, first_forecast_date, input, truth FROM windows", store.conn)
        series = pd.read_sql_query("SELECT id AS series, attributes FROM series", store.conn)
    finally:
        store.close()
    frame = rows.merge(windows, on="window").merge(series, on="series")
    for col in ("forecast", "input", "truth", "info", "offsets"):
        frame[col] = frame[col].map(lambda v: None if v is None else json.loads(v))
    attrs = pd.DataFrame([json.loads(a) for a in frame.pop("attributes")], index=frame.index)
    frame = pd.concat([frame, attrs.add_prefix("attr_")], axis=1)
    target = out or run_dir / "forecasts.parquet"
    frame.to_parquet(target, index=False)
    return target
