"""`causalrate assess`: data → perturb → forecast → score → causal → rate → report.

Each stage lives in its own package (see docs/architecture.md); this module only conducts them.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from causalrate import plugins
from causalrate.causal.effects import DrawSettings, draws_table, identify_schemes, summarise_effects
from causalrate.causal.estimate import estimate_all
from causalrate.causal.heterogeneity import assess_heterogeneity
from causalrate.causal.resampling import Resamples
from causalrate.causal.selfcheck import judge
from causalrate.causal.wrs import wrs_plans, wrs_scores
from causalrate.config import StudyConfig
from causalrate.contracts import violation, watched
from causalrate.errors import UserError
from causalrate.forecast.metrics import METRICS
from causalrate.forecast.store import ForecastStore
from causalrate.memo import Memo
from causalrate.rate.absolute import absolute_margins, absolute_quantities
from causalrate.rate.headlines import headline_ratings
from causalrate.rate.inconclusive import withhold_inconclusive
from causalrate.rate.practical import effects_without_pie, pie_undefined, rigor_without_pie, without_pie
from causalrate.rate.ratings import attach_coverage, coverage_table, rate_scores
from causalrate.rate.stability import with_stability
from causalrate.report.outputs import write_outputs
from causalrate.score.recency import recency_profile
from causalrate.score.scores import SCORES, Evidence, score_all
from causalrate.score.wide import wide_tables
from causalrate.study import Result, Study, prepare
from causalrate.uncertainty.rigor import assess_rigor, run_resamples

if TYPE_CHECKING:
    from causalrate.forecast.cache import ForecastCache
    from causalrate.forecast.jobs import Executor

log = logging.getLogger(__name__)
RUN_FILES = ("forecasts.sqlite", "forecasts.sqlite-*", "ratings.json", "scores.csv", "report.md")


def assess(
    config: StudyConfig,
    *,
    base_dir: Path,
    out: Path,
    workers: int,
    overwrite: bool = False,
    resume: bool = False,
    executor: str = "local",
    address: str | None = None,
    skip_unavailable: bool = False,
    refresh: bool = False,
    keep: float = 0.0,
) -> Path:
    """Run a whole study and write ratings.json, scores.csv, report.md and forecasts.sqlite to `out`.

    With resume, forecasts already in `out`'s store are kept and only the missing ones are made. With refresh
    (or forecast.cache: refresh) nothing is read from the forecast cache; what is made is written to it. With
    `keep` seconds, each device's worker stays, its models loaded, for the next run (forecast/kept.py).
    """
    # forecasting's modules (matplotlib for image systems among them) here, not at import: a re-rate needs none
    from causalrate.forecast.runner import check_workers, make_executor

    check_workers(workers, address=address if executor == "ray" else None)  # before the data is read
    study = prepare(config, base_dir=base_dir, skip_unavailable=skip_unavailable)
    config = study.config  # without the systems that cannot run here, if skipped
    preflight(study)  # a broken plugin fails here, in seconds, not after the forecasts
    # joined before the run's folder is written: a cluster that cannot be reached leaves nothing behind
    runner = make_executor(executor, workers=workers, retries=config.forecast.retries, address=address, keep=keep)
    uncached = refresh or config.forecast.cache in (False, "refresh")
    if uncached and not resume and hasattr(runner, "start"):
        runner.start()  # every forecast will be made here: the workers start while the run's store is written
    try:
        with writer_lock(out):
            return _assess(study, out, runner, resume=resume, overwrite=overwrite, refresh=refresh)
    finally:
        if hasattr(runner, "close"):
            runner.close()  # workers started for a run that stopped before forecasting


def _assess(study: Study, out: Path, runner: Executor, *, resume: bool, overwrite: bool, refresh: bool) -> Path:
    from causalrate.forecast.plan import forecast_all, summary_lines

    config, base_dir = study.config, study.base_dir
    store = _open_store(study, out, resume=resume, overwrite=overwrite)
    cache = _open_cache(config, base_dir)
    try:
        counts = forecast_all(
            study,
            store,
            cache=cache,
            refresh=refresh or config.forecast.cache == "refresh",
            executor=runner,
        )
        store.put_meta("counts", counts)
        for line in summary_lines(counts["systems"]):
            log.info(line)
        store.put_meta("status", "forecasted")
        forecasts = store.forecasts()
    finally:
        store.close()
        if cache:
            cache.close()
    with Memo.open(out / "forecasts.sqlite", plugins=config.plugins, writable=True) as memo:
        result = analyze(study, forecasts, memo)
    write_outputs(study=study, result=result, out=out)
    return out


PREFLIGHT_WINDOWS = 8  # windows each perturbation is applied to before forecasting
PREFLIGHT_LIMIT = 300.0  # seconds a plugin's call may run in the check before it is stopped, named (exit code 2)
PREFLIGHT_NOTE = 10.0  # seconds between notes on stderr naming a plugin's call that is still running


def preflight(study: Study) -> None:
    """Run every registered piece once on synthetic forecasts before any real one is made: each metric on a
    small batch, each perturbation on the first windows, and the whole analysis (every score's compute and
    replicates, every scheme's draws) on synthetic forecast rows of the study's systems, perturbations and
    windows (some failed). A broken plugin stops the run here with a ContractError naming it (exit code 2); a
    slow one is named on stderr every PREFLIGHT_NOTE seconds and stopped at PREFLIGHT_LIMIT (a hang was silent)."""
    with watched("pre-forecast check", limit=PREFLIGHT_LIMIT, every=PREFLIGHT_NOTE):
        _preflight(study)


def _preflight(study: Study) -> None:
    from causalrate.perturb.suite import perturbation_seeds, placed_firsts, series_history
    from causalrate.score.scores import check_metric

    cfg, windows = study.config, study.windows
    for name in cfg.rating.scores or SCORES.names():
        check_metric(name, SCORES.get(name))
    k = min(PREFLIGHT_WINDOWS, len(windows))
    truth, inputs = windows.truth[:k], windows.inputs[:k]
    levels = (0.1, 0.5, 0.9)
    with np.errstate(all="ignore"):
        values = {
            m: METRICS.get(m)(truth, truth * 1.01, inputs, None, season=study.parameters.season, levels=levels)
            for m in METRICS.names()
        }
    if not np.isfinite(np.asarray(values[cfg.outcome], dtype=float)).any():  # every system would tie, rated
        outcome = METRICS.get(cfg.outcome)
        raise violation(
            "metric",
            cfg.outcome,
            outcome,
            "the study's outcome gives no finite value for a plain forecast (1 % off "
            "the truth): every effect would be NaN; return numbers, or choose another outcome",
        )
    history = series_history(study.dataset, windows)[:k]
    origins = [(study.table["series"].iloc[i], int(windows.start[i])) for i in range(k)]
    for p in study.forecast_suite:
        firsts = placed_firsts(p, study.dataset, windows, seed=cfg.seed)[:k, 0]
        p.apply(inputs, firsts, seeds=perturbation_seeds(cfg.seed, p.id, origins), history=history)
    small = cfg.model_copy(
        update={
            "causal": cfg.causal.model_copy(update={"draws": 2}),
            "rigor": cfg.rigor.model_copy(
                update={"bootstrap_size": min(cfg.rigor.bootstrap_size, 20), "refute": False}
            ),
            "heterogeneity": cfg.heterogeneity.model_copy(update={"enabled": False}),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analyze(replace(study, config=small), synthetic_forecasts(study))


def synthetic_forecasts(study: Study) -> pd.DataFrame:
    """Forecast rows as the store gives them, for every system, perturbation and window of the study, with
    positive random metric values; the first system's every tenth forecast failed (NaN metrics)."""
    rng = np.random.default_rng(study.config.seed)
    n = len(study.table)
    systems, perturbations = list(study.systems), [p.id for p in study.forecast_suite]
    rows = len(systems) * len(perturbations) * n
    frame = pd.DataFrame(
        {
            "system": np.repeat(systems, len(perturbations) * n),
            "window": np.tile(np.arange(n), len(systems) * len(perturbations)),
            "perturbation": np.tile(np.repeat(perturbations, n), len(systems)),
            "forecast": "[]",
            "error": None,
            "seconds": 0.0,
            "info": None,
            "offsets": None,
            "series": np.tile(study.table["series"].to_numpy(), len(systems) * len(perturbations)),
            "start": np.tile(study.windows.start, len(systems) * len(perturbations)),
        }
    )
    failed = (frame["system"] == systems[0]).to_numpy() & (np.arange(rows) % 10 == 0)
    frame.loc[failed, "error"] = "synthetic failure"
    for name in METRICS.names():
        frame[name] = np.where(failed, np.nan, rng.uniform(0.05, 1.0, rows))
    return frame


def assess_frame(frame: pd.DataFrame, config: StudyConfig, *, base_dir: Path, out: Path, **options) -> Path:
    """assess() on a long-format DataFrame (unique_id, ds, y and attribute columns; config.data's column and
    frequency settings apply). The frame is written to out/data-<digest>.parquet first, so the run keeps the data
    it rated and a second frame never overwrites the first's."""
    digest = hashlib.sha256(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    digest.update(repr(list(frame.columns)).encode())
    out.mkdir(parents=True, exist_ok=True)
    path = (out / f"data-{digest.hexdigest()[:16]}.parquet").resolve()
    frame.to_parquet(path, index=False)
    data = config.data.model_copy(update={"source": "parquet", "path": str(path), "layout": "long"})
    return assess(config.model_copy(update={"data": data}), base_dir=base_dir, out=out, **options)


LOCK_FILE = ".causalrate.lock"


@contextmanager
def writer_lock(out: Path) -> Iterator[None]:
    """One writer per run folder: a second `assess` into the same --out while one runs is refused at once
    (exit code 2), instead of both writing one store and leaving a ratings.json without its forecasts.
    An OS lock on out/.causalrate.lock, released when the process ends however it ends (no stale lock)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOCK_FILE, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserError(
                f"{out}: another causalrate assess is writing this run folder now; wait for it, or use another --out"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _open_store(study: Study, out: Path, *, resume: bool, overwrite: bool) -> ForecastStore:
    """The run's store: reopened to resume (same config only), or created afresh with the run's metadata."""
    config, base_dir = study.config, study.base_dir
    store_path = out / "forecasts.sqlite"
    if resume:
        store = ForecastStore.open(store_path, metrics=METRICS.names())
        if store.get_meta("config") != config.model_dump(mode="json"):
            store.close()
            raise UserError(
                f"{out}: the run was made with a different config; resume needs the same one "
                "(or start afresh with --overwrite)"
            )
        return store
    if store_path.exists():
        state = _state(store_path)
        if not overwrite and state != "empty":  # a run that failed before its first forecast has nothing to keep
            hint = "" if state == "finished" else f"; it is unfinished: resume it with --resume {out}"
            raise UserError(f"{out} already holds a run (forecasts.sqlite){hint}; use another --out or --overwrite")
        for name in RUN_FILES:  # only the run's own files: --out may hold other things
            for path in out.glob(name):
                path.unlink()
        shutil.rmtree(out / "cards", ignore_errors=True)  # no stale card of a system no longer in the run
    out.mkdir(parents=True, exist_ok=True)
    store = ForecastStore.create(store_path, metrics=METRICS.names())
    store.put_meta("config", config.model_dump(mode="json"))
    store.put_meta("base_dir", str(base_dir))
    store.put_meta("data_hash", study.dataset.content_hash())
    store.put_meta("not_assessed", study.not_assessed)
    store.put_meta("plugins", plugins.resolve(config.plugins, base_dir=base_dir, where=base_dir))
    store.put_meta("status", "forecasting")
    from causalrate.forecast.plan import store_windows

    store_windows(store, study)
    return store


def _state(store_path: Path) -> str:
    """ "finished", "unfinished" (forecasts to keep: resume it) or "empty" (it stopped before its first forecast)."""
    try:
        store = ForecastStore.open(store_path, metrics=METRICS.names())
    except UserError:
        return "finished"  # not ours to resume: only --overwrite applies
    try:
        if store.get_meta("status") == "forecasted":
            return "finished"
        return "unfinished" if store.done() else "empty"
    finally:
        store.close()


def _open_cache(config: StudyConfig, base_dir: Path) -> ForecastCache | None:
    from causalrate.forecast.cache import ForecastCache, default_cache_path

    if not config.forecast.cache:
        return None
    path = (base_dir / config.forecast.cache_path).resolve() if config.forecast.cache_path else default_cache_path()
    return ForecastCache(path)


@threadpool_limits.wrap(limits=1)
def analyze(study: Study, forecasts: pd.DataFrame, memo: Memo | None = None) -> Result:
    """Score, causal analysis and ratings from the stored forecast rows (no forecasting).

    `memo`: the run's store of identification, fragility map and refuter results (causalrate.memo),
    which a re-rate reads instead of refitting them, and its in-memory `memo.run` cache (dowhy's
    estimands, the refuters' matching plans); without one, a memo that stores nothing, for this call.

    One BLAS thread: the arrays are small enough that threads only contend (measured faster on
    2 cores, bench/RESULTS.md), and the sums no longer depend on how many cores the machine has.
    """
    memo = Memo.off() if memo is None else memo
    cfg, control, table, params = study.config, study.control, study.table, study.parameters
    every = forecasts.assign(failed=forecasts["error"].notna(), outcome=forecasts[cfg.outcome])
    newest_of = {p.id: p.newest_of for p in study.newest}
    at_newest = every["perturbation"].isin(list(newest_of))
    forecasts = every[~at_newest]  # the rated suite's; the newest-point forecasts feed ape_last only
    outcomes = outcome_tables(study, forecasts)
    series_index = study.windows.series_index
    # causal: WRS, the observational draws and their matched effects, the fragility map
    dimensions = study.dimensions
    groupings = wrs_plans(table, cfg.causal.wrs_groups, dimensions)
    wrs_table = without_left_out(
        wrs_scores(outcomes, groupings, series=series_index, bandwidth=params.wrs_bandwidth), study
    )
    settings = DrawSettings(
        schemes=tuple(cfg.causal.schemes),
        draws=cfg.causal.draws,
        high=cfg.causal.high,
        low=cfg.causal.low,
        caliper=cfg.causal.caliper,
        covariates=tuple(cfg.causal.covariates),
        seed=cfg.seed,
    )
    identification = identify_schemes(settings, study.dataset.attribute_names, memo)
    # one Estimate per (system, perturbation, scheme, draw): the effects, the rigor layer, the refuters
    # and the heterogeneity self-check all read these
    estimates = estimate_all(
        windows=table,
        outcomes=outcomes,
        control=control,
        settings=settings,
        identification=identification,
        memo=memo,
    )
    draws = draws_table(estimates)
    effects = (
        summarise_effects(draws)
        if len(draws)
        else pd.DataFrame(columns=["system", "perturbation", "scheme", "ape_true", "ape_adj", "pie"])
    )
    severity = {p.id: (p.family, p.severity) for p in study.suite if p.severity is not None}
    fragility = assess_heterogeneity(study, forecasts, outcomes, estimates, memo)
    # score: one raw number per (system, perturbation, score)
    evidence = Evidence(
        forecasts=forecasts,
        wrs=wrs_table,
        effects=effects,
        control=control,
        severity=severity,
        input_length=cfg.windows.input_length,
        recency_k=cfg.causal.recency_k,
        recency_perturbations=tuple(p.id for p in study.suite if p.positional and p.placement.name != "worst"),
        worst_perturbations=tuple(p.id for p in study.suite if p.placement.name == "worst"),
        table=table,
        heterogeneity=fragility.spreads if fragility else None,
        perturbations=tuple(p.id for p in study.suite),
        dimensions=dimensions,
        newest=every[at_newest].assign(perturbation=every.loc[at_newest, "perturbation"].map(newest_of)),
    )
    raw, unavailable = score_all(evidence, cfg.rating.scores)
    raw = without_left_out(raw, study)
    naive_error, skill = params.naive_error, dict(params.naive_scores)
    resampled = cfg.rigor.bootstrap_size > 0
    resamples = (
        run_resamples(series_index, block=params.block_length, bootstrap_size=cfg.rigor.bootstrap_size, seed=cfg.seed)
        if resampled
        else Resamples(np.zeros((0, len(table))))
    )
    rigor = None
    if resampled:
        rigor = assess_rigor(
            config=cfg,
            evidence=evidence,
            resamples=resamples,
            series_index=series_index,
            estimates=estimates,
            wrs_plans=groupings,
            parameters=params,
            memo=memo,
        )
        rigor = replace(
            rigor,
            wrs_tests=tuple(t for t in rigor.wrs_tests if (t["system"], t["perturbation"]) not in left_out(study)),
        )
    # rate: coverage, absolute quantities, margins, levels, harm and inconclusive APEs, stability, headlines
    rating = params.rating
    coverage = coverage_table(every, control=control, n_windows=len(table))
    raw = raw.assign(
        coverage=attach_coverage(raw, coverage, severity),
        quantity=absolute_quantities(raw, wrs_table, naive_error, skill),
        margin=absolute_margins(raw, wrs_table, naive_error, skill),
    )
    # PIE% only where the rated APE shows an effect to explain (METHOD §5.3)
    no_pie = pie_undefined(raw, rigor)
    raw = without_pie(raw, no_pie)
    # point forecasters: declared so, and no stored forecast with paths or quantiles (a python function may
    # return sample paths without declaring them): WQL and coverage error are not applicable to them
    distributions = set(every.loc[every["distribution"], "system"]) if "distribution" in every else set()
    points = frozenset(n for n, s in study.systems.items() if s.output == "point" and n not in distributions)
    rated = rate_scores(
        raw, settings=rating, replicates=rigor.replicate_values if rigor else None, point_systems=points
    )
    if rigor:
        rated, rigor = withhold_inconclusive(rated, rigor_without_pie(rigor, rated), naive_error=naive_error)
        rigor = with_stability(rigor, rated, settings=rating, control=control)
    headlines = headline_ratings(
        rated,
        settings=rating,
        control=control,
        descriptions={p.id: p.description for p in study.suite},
        stability=rigor.overall_stability if rigor else None,
        point_systems=points,
        recency_k=cfg.causal.recency_k,
    )
    evidence = replace(evidence, effects=effects_without_pie(evidence.effects, no_pie))
    return Result(
        evidence=evidence,
        effect_draws=draws,
        rigor=rigor,
        ratings=rated,
        overall={s: h["robustness"]["rating"] for s, h in headlines.items() if "robustness" in h},
        headlines=headlines,
        checks=judge(effects),
        identification=identification,
        unavailable=unavailable,
        recency_profile=recency_profile(evidence, resamples=resamples),
        heterogeneity=fragility.doc if fragility else {},
    )


def left_out(study: Study) -> set[tuple[str, str]]:
    """(system, perturbation) pairs never forecast, so never rated: a `for_systems: nan-accepting` entry
    (e.g. P3+ffill) for a system causalrate imputes anyway (its plain P3 is already system + imputation)."""
    return {(s, p.id) for p in study.suite for s, system in study.systems.items() if not p.applies_to(system)}


def without_left_out(frame: pd.DataFrame, study: Study) -> pd.DataFrame:
    """`frame`'s rows (by system and perturbation) but those of pairs left out."""
    skipped = left_out(study)
    keep = [pair not in skipped for pair in zip(frame["system"], frame["perturbation"], strict=True)]
    return frame.loc[np.array(keep, dtype=bool)]  # a mask, also when empty (a list [] would select no columns)


def outcome_tables(study: Study, forecasts: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per system, the outcome of every window (rows) under every perturbation (columns, suite order)."""
    n, order = len(study.table), [p.id for p in study.suite]
    wide = wide_tables(forecasts, "outcome", perturbations=order, n_windows=n)
    return {s: wide[s] if s in wide else pd.DataFrame(np.nan, index=range(n), columns=order) for s in study.systems}
