"""`causalrate rate`: causal analysis and ratings again from a finished run's stored forecasts."""

from __future__ import annotations

import shutil
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from causalrate.config import RatingConfig
from causalrate.errors import UserError
from causalrate.memo import Memo
from causalrate.pipeline import analyze
from causalrate.report.outputs import write_outputs
from causalrate.run import StoredForecasts, open_store

if TYPE_CHECKING:
    import pandas as pd

    from causalrate.study import Study


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
    stored = StoredForecasts.read(run_dir)
    raw = stored.config  # edited in place: the study is rebuilt from it
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
    study = stored.study(run_dir)
    forecasts = stored.rows[stored.rows["system"].isin(study.systems)]
    target = out or run_dir
    if target.exists() and not target.is_dir():
        raise UserError(f"--out {target}: a file is there; give a folder (it is created if missing)")
    if target.resolve() == run_dir.resolve():
        _analyze_into(study, forecasts, target, in_place=True)
        return target
    created = not target.exists()
    copy = target / "forecasts.sqlite"
    target.mkdir(parents=True, exist_ok=True)
    try:
        with closing(open_store(run_dir)) as store:  # cards read the store: give the new folder its own copy
            store.copy_to(copy)
        _analyze_into(study, forecasts, target, in_place=False)
    except BaseException:  # nothing half-made is left behind: the copy alone is the run's size
        copy.unlink(missing_ok=True)
        if created:
            shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def _analyze_into(study: Study, forecasts: pd.DataFrame, target: Path, *, in_place: bool) -> None:
    """The causal analysis and outputs, with the run's memo of the costly causal results: read in place (the
    run's file stays untouched), filled in a copy."""
    with Memo.open(target / "forecasts.sqlite", plugins=study.config.plugins, writable=not in_place) as memo:
        result = analyze(study, forecasts, memo)
    write_outputs(study=study, result=result, out=target)
