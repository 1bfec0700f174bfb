"""`causalrate rate`: causal analysis and ratings again from a finished run's stored forecasts."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from pydantic import ValidationError

from causalrate.config import RatingConfig
from causalrate.errors import UserError
from causalrate.memo import Memo
from causalrate.pipeline import analyze
from causalrate.report.outputs import write_outputs
from causalrate.run import StoredForecasts, open_store


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
    target.mkdir(parents=True, exist_ok=True)
    in_place = target.resolve() == run_dir.resolve()
    if not in_place:  # cards read the store: give the new folder its own copy
        with closing(open_store(run_dir)) as store:
            store.copy_to(target / "forecasts.sqlite")
    # the run's memo of the costly causal results: read in place (the run's file stays untouched), filled in a copy
    with Memo.open(target / "forecasts.sqlite", plugins=study.config.plugins, writable=not in_place) as memo:
        result = analyze(study, forecasts, memo)
    write_outputs(study=study, result=result, out=target)
    return target
