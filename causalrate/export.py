"""`causalrate export`: a run's forecast rows as one parquet file, for analysis outside causalrate."""

from __future__ import annotations

import json
import sys
from contextlib import closing
from pathlib import Path

from causalrate.errors import UserError
from causalrate.run import load_run_plugins, open_store


def export_parquet(run_dir: Path, *, out: Path | None = None) -> Path:
    """Every forecast row with its window, truth and series attributes (`attr_<name>`), as one parquet file."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UserError("export needs pyarrow: pip install 'causalrate[parquet]'") from None
    if out is not None and out.is_dir():
        raise UserError(f"--out {out}: a folder; give the parquet file's path (e.g. {out / 'forecasts.parquet'})")
    load_run_plugins(run_dir)
    with closing(open_store(run_dir)) as store:
        if store.get_meta("status") != "forecasted":  # exported anyway: partial rows are still worth a look
            print(
                f"causalrate: warning: {run_dir}: the run's forecasting is unfinished; the export holds only the "
                f"forecasts made so far (finish it with causalrate assess CONFIG --resume {run_dir})",
                file=sys.stderr,
            )
        rows = store.forecasts(samples=True)
        windows = store.windows_table()
        series = store.series_attributes()
    frame = rows.merge(windows, on="window")
    for col in ("forecast", "info", "offsets"):
        frame[col] = frame[col].map(lambda v: None if v is None else json.loads(v))
    attributes = series.set_index("series").add_prefix("attr_")
    frame = frame.merge(attributes, left_on="series", right_index=True, how="inner")
    target = out or run_dir / "forecasts.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)  # as assess makes its --out
    frame.to_parquet(target, index=False)
    return target
