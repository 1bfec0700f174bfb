"""Stage 3 — forecast: plan the full factorial's jobs, run them, and record every batch in the store.

Per (perturbation, placement variant, system): perturb, impute, seed, render charts, look the
forecasts up in the cache, batch the misses into jobs; each finished batch is scored by the
per-forecast metrics and written to the store (and the cache). Jobs are planned as the executor
draws them (a generator), so forecasting starts at once and memory never holds every job of a run.
Worst-case placement keeps only each window's worst candidate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from causalrate import plugins
from causalrate.data import Windows
from causalrate.forecast.cache import Cached, ForecastCache, forecast_keys
from causalrate.forecast.impute import impute
from causalrate.forecast.jobs import BatchResult, Executor, Job, Scoring
from causalrate.forecast.metrics import batch_metrics
from causalrate.forecast.published import published_forecasts
from causalrate.forecast.store import FLUSH_ROWS, ForecastStore
from causalrate.perturb.placement import offsets_of
from causalrate.perturb.suite import perturbation_seeds, placed_firsts, series_history
from causalrate.perturb.worst import WorstCase
from causalrate.seeding import KeyTexts
from causalrate.systems import Batch
from causalrate.systems.plot import render_windows

if TYPE_CHECKING:
    from causalrate.perturb import Perturbation
    from causalrate.study import Study
    from causalrate.systems import System


def store_windows(store: ForecastStore, study: Study) -> None:
    """The run's series and windows (inputs and truth), stored once so a run can be re-read without its data."""
    ds, wd = study.dataset, study.windows
    store.put_series((s.id, s.attributes) for s in ds.series)
    store.put_windows(
        (
            i,
            ds.series[wd.series_index[i]].id,
            int(wd.start[i]),
            str(wd.truth_dates[i, 0]),
            wd.inputs[i].tolist(),
            wd.truth[i].tolist(),
        )
        for i in range(len(wd))
    )


def window_keys(study: Study) -> KeyTexts:
    """Each window's (series id, start), the key its seeds are made from, written once."""
    ds, wd = study.dataset, study.windows
    return KeyTexts([(ds.series[i].id, int(t)) for i, t in zip(wd.series_index, wd.start, strict=True)])


def perturbed_inputs(
    study: Study,
    p: Perturbation,
    firsts: np.ndarray,
    *,
    history: list[np.ndarray] | None = None,
    keys: KeyTexts | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every window's input [w, n] and its dates after perturbation p placed at `firsts` (before imputation);
    `keys`: window_keys(study), if made already."""
    ds, wd = study.dataset, study.windows
    seeds = perturbation_seeds(study.config.seed, p.id, keys or window_keys(study))
    perturbed = p.apply(wd.inputs, firsts, seeds=seeds, history=history or series_history(ds, wd))
    return perturbed, p.apply_dates(wd.input_dates, firsts)


def imputation_of(p: Perturbation, system: System, default: str) -> str | None:
    """How the perturbation's missing values reach the system: its own imputation, the run's, or none (NaN)."""
    return p.impute or (None if system.accepts_nan else default)


def seen_inputs(perturbed: np.ndarray, imputation: str | None) -> np.ndarray:
    """What the system is handed: the perturbed inputs, imputed if it does not take NaN."""
    return impute(perturbed, imputation) if imputation else perturbed


def forecast_all(
    study: Study, store: ForecastStore, *, cache: ForecastCache | None, executor: Executor, refresh: bool = False
) -> dict:
    """The full factorial: every system × window × perturbation not yet in the store.

    Forecasts found in the cache are written at once (unless `refresh`); the rest are batched into jobs,
    and each finished batch is written to the store (in bulk: `ForecastStore.buffered`) and to the cache.
    """
    cfg, wd, ds, season = study.config, study.windows, study.dataset, study.parameters.season
    done = store.done()
    attributes = [ds.series[i].attributes for i in wd.series_index]

    by_id = {p.id: p for p in study.forecast_suite}
    placed = {p.id: placed_firsts(p, ds, wd, seed=cfg.seed) for p in study.forecast_suite}
    worst = {
        (s.name, p.id): WorstCase() for s in cfg.systems for p in study.forecast_suite if p.placement.name == "worst"
    }

    def offsets(perturbation: str, variant: int, rows: np.ndarray) -> list[list[int]]:
        p = by_id[perturbation]
        if p.is_control:
            return []
        firsts, of_row = np.unique(placed[p.id][rows, variant], return_inverse=True)  # a row's offsets: its first's
        lists = offsets_of(p.mask(firsts, wd.input_length))
        return [lists[k] for k in of_row.reshape(-1).tolist()]

    def record(
        system: str, perturbation: str, rows: np.ndarray, result: BatchResult, seconds: np.ndarray, variant: int = 0
    ) -> None:
        metrics = result.metrics  # the worker's (Job.scoring), else computed here: cached rows, a metric that raised
        if metrics is None or not set(store.metrics) <= metrics.keys():
            levels = study.systems[system].quantile_levels
            metrics = batch_metrics(
                wd.truth[rows], result.forecasts, wd.inputs[rows], result.samples, season=season, levels=levels
            )
        placed_at = offsets(perturbation, variant, rows) or [[] for _ in rows]
        if (system, perturbation) in worst:  # a candidate: kept only if it is the window's worst so far
            worst[(system, perturbation)].offer(
                variant=variant,
                window_ids=rows,
                metric=metrics[cfg.outcome],
                result=result,
                seconds=seconds,
                offsets=placed_at,
            )
            return
        store.put_forecasts(
            system=system,
            window_ids=rows,
            perturbations=[perturbation] * rows.size,
            forecasts=result.forecasts,
            errors=result.errors,
            seconds=seconds,
            metrics=metrics,
            samples=result.samples,
            info=result.info,
            offsets=placed_at,
        )

    cfg_plugins = plugins.resolve(cfg.plugins, base_dir=study.base_dir, where=study.base_dir)
    tally = {s.name: {"forecasts": 0, "cached": 0, "published": 0, "failed": 0, "seconds": 0.0} for s in cfg.systems}
    said: dict[str, dict[str, tuple[int, str]]] = {s.name: {} for s in cfg.systems}  # what its libraries said
    history = series_history(ds, wd)
    origin_keys = window_keys(study)  # each window's seed key, written once for every perturbation and system
    todo_of = {  # per (system, perturbation): the windows whose forecasts the store lacks
        (s.name, p.id): np.array([i for i in range(len(wd)) if (s.name, i, p.id) not in done], dtype=int)
        for p in study.forecast_suite
        for s in cfg.systems
        if p.applies_to(study.systems[s.name])
    }
    if (cache is None or refresh) and any(todo.size for todo in todo_of.values()) and hasattr(executor, "start"):
        executor.start()  # forecasts will be made (no cache answers them): the workers start while this plans
    wanted = sum(placed[p].shape[1] * todo.size for (_, p), todo in todo_of.items())
    warm_up(study, executor, [name for (name, _), todo in todo_of.items() if todo.size], tuple(cfg_plugins))
    found = {"cached": 0, "made": 0}

    def planned() -> Iterator[Job]:
        """Per (perturbation, variant, system): its cache hits recorded at once, its misses yielded as jobs (the
        executor draws them as workers free up, so charts are rendered only then)."""
        for p, variant in ((q, v) for q in study.forecast_suite for v in range(placed[q.id].shape[1])):
            perturbed, dates = perturbed_inputs(study, p, placed[p.id][:, variant], history=history, keys=origin_keys)
            charts: dict[bytes, list[bytes]] = {}  # vision systems that see the same rows share the rendering
            for spec in cfg.systems:
                system = study.systems[spec.name]
                todo = todo_of.get((spec.name, p.id))
                if todo is None or todo.size == 0:
                    continue
                seen = seen_inputs(perturbed[todo], imputation_of(p, system, cfg.forecast.imputation))
                seeds = origin_keys.seeds(cfg.seed, spec.name, suffix=(p.id,), rows=todo)
                images = None
                if system.modality == "plot":
                    chart_key = seen.tobytes() + todo.tobytes()
                    if chart_key not in charts:
                        charts[chart_key] = render_windows(seen, dates[todo])
                    images = charts[chart_key]
                context = None
                if system.wants_context or images:
                    context = [
                        {
                            "context": [attributes[i], dates[i].astype(str).tolist()] if system.wants_context else None,
                            "image": hashlib.sha256(images[j]).hexdigest() if images else None,
                        }
                        for j, i in enumerate(todo)
                    ]
                identity = system.identity()
                if system.seasonal or system.wants_context:  # what it reads of the data's calendar
                    identity |= {"frequency": ds.frequency, "season": season}
                stochastic = seeds if system.stochastic else None
                keys = forecast_keys(identity, seen, wd.horizon, seeds=stochastic, context=context) if cache else []
                hits = cache.get(keys) if cache and not refresh else {}
                if keys and not refresh:  # the published reference forecasts take precedence over this machine's
                    published = published_forecasts(identity, seen, wd.horizon, keys, seeds=stochastic, context=context)
                    hits |= published
                    tally[spec.name]["published"] += len(published)
                hit = np.array([k in hits for k in keys], dtype=bool) if hits else np.zeros(todo.size, dtype=bool)
                tally[spec.name]["forecasts"] += int(todo.size)
                tally[spec.name]["cached"] += int(hit.sum())
                found["cached"] += int(hit.sum())
                if hit.any():
                    cached = [hits[k] for k in keys if k in hits]
                    result = BatchResult(
                        forecasts=np.array([c.forecast for c in cached]),
                        errors=[None] * len(cached),
                        seconds=0.0,
                        samples=[c.samples for c in cached],
                        info=[c.info for c in cached],
                    )
                    record(spec.name, p.id, todo[hit], result, np.array([c.seconds for c in cached]), variant)
                miss = np.flatnonzero(~hit)
                size = system.batch_size or cfg.forecast.batch_size  # a model's own batch, not capped by the run's
                batches = np.array_split(miss, max(1, -(-miss.size // size))) if miss.size else []
                for calls in _grouped(batches, pace, spec.name, size, quick=system.quick):
                    chunk = np.concatenate(calls)
                    rows = todo[chunk]
                    batch = Batch(
                        inputs=seen[chunk],
                        horizon=wd.horizon,
                        frequency=ds.frequency,
                        season=season,
                        seeds=seeds[chunk],
                        attributes=tuple(attributes[i] for i in rows),
                        input_dates=dates[rows],
                        truth_dates=wd.truth_dates[rows],
                        images=None if images is None else tuple(images[c] for c in chunk),
                    )
                    found["made"] += int(rows.size)
                    yield Job(
                        system=spec.name,
                        perturbation=p.id,
                        window_ids=rows,
                        spec=spec.model_dump(),
                        base_dir=study.base_dir,
                        timeout=study.parameters.batch_timeout(int(rows.size)),
                        batch=batch,
                        keys=[keys[c] for c in chunk] if keys else [],
                        accelerator=system.accelerator,
                        plugins=tuple(cfg_plugins),
                        variant=variant,
                        calls=tuple(c.size for c in calls) if len(calls) > 1 else (),
                        scoring=Scoring(wd.truth[rows], wd.inputs[rows], season, system.quantile_levels),
                    )

    pace: dict[str, float] = {}  # per system: seconds per forecast of its latest job (the next jobs' size)

    def on_done(job: Job, result: BatchResult) -> None:
        pace[job.system] = result.seconds / max(job.size, 1)
        tally[job.system]["failed"] += len(result.errors) - result.errors.count(None)
        tally[job.system]["seconds"] += result.seconds
        for source, (count, first) in result.warnings.items():
            before, first = said[job.system].get(source, (0, first))
            said[job.system][source] = (before + count, first)
        per_row = np.full(job.size, result.seconds / max(job.size, 1))
        record(job.system, job.perturbation, job.window_ids, result, per_row, job.variant)
        if cache:
            unsaved.extend(
                (k, Cached(result.forecasts[i].tolist(), per_row[i], result.samples[i], result.info[i]))
                for i, k in enumerate(job.keys)
                if result.errors[i] is None
            )
            if len(unsaved) >= FLUSH_ROWS:
                save()

    unsaved: list[tuple[str, Cached]] = []  # made forecasts not yet in the cache: put in bulk, as the store's rows

    def save() -> None:
        if cache and unsaved:
            cache.put(unsaved, replace=refresh)
            unsaved.clear()

    with store.buffered():  # finished batches written in bulk
        jobs = planned()
        try:
            first = next(jobs, None)  # plans until the first miss: a run answered by the cache starts no worker
            if first is not None:
                executor.run(chain([first], jobs), on_done, expected=lambda: wanted - found["cached"])
        finally:
            save()
            if hasattr(executor, "close"):
                executor.close()  # a warmed-up worker no job needed
    for name, seconds in getattr(executor, "startup", {}).items():
        if name in tally:
            tally[name]["startup"] = seconds
    needed = sum(  # worst: m candidates per window
        placed[p.id].size for p in study.forecast_suite for s in cfg.systems if p.applies_to(study.systems[s.name])
    )
    counts = {"made": found["made"], "cached": 0}
    counts["cached"] = needed - sum(placed[k[2]].shape[1] for k in done if k[2] in placed) - counts["made"]
    for (name, perturbation), search in worst.items():
        rows, kept = search.rows()
        if rows.size:
            levels = study.systems[name].quantile_levels
            _record_worst(store, wd, name, perturbation, rows, kept, season=season, levels=levels)
    return {**counts, "systems": {name: {**t, "warnings": said[name]} for name, t in tally.items()}}


def warm_up(study: Study, executor: Executor, names: list[str], plugins: tuple[str, ...]) -> None:
    """Have an executor that can (`warm(job)`, LocalExecutor) start the workers of each named system that loads a
    model (on a device, or torch on the CPU) and load it now, while this process goes on planning (cache lookups,
    perturbations): the start-up is overlapped and reported apart (`startup`, seconds), not paid at the first
    batch."""
    warm = getattr(executor, "warm", None)
    if warm is None:
        return
    wd = study.windows
    for spec in [s for s in study.config.systems if s.name in set(names)]:
        system = study.systems[spec.name]
        if system.accelerator is None and not system.uses_cores:  # nothing heavy to load
            continue
        nothing = Batch(
            inputs=wd.inputs[:0],
            horizon=wd.horizon,
            seeds=np.zeros(0, dtype=np.uint64),
            attributes=(),
            input_dates=wd.input_dates[:0],
            truth_dates=wd.truth_dates[:0],
        )
        limit = study.parameters.batch_timeout(system.batch_size or study.config.forecast.batch_size)  # its batch's
        job = Job(spec.name, "", np.zeros(0, dtype=int), spec.model_dump(), study.base_dir, limit, nothing,
                  accelerator=system.accelerator, plugins=plugins)  # fmt: skip
        warm(job)


JOB_SECONDS = 0.2  # a fast system's batches travel together up to about this much of its time per job ...
JOB_ROWS = 2048  # ... and at most this many rows


def job_rows(pace: float | None, size: int, *, quick: bool = False) -> int:
    """How many rows the next job of a system may hold: until its pace (seconds per forecast of its latest job)
    is known, JOB_ROWS for a system declared quick (System.quick: its jobs are planned while the workers start)
    and its own batch for any other; then as many of its batches as take JOB_SECONDS, at most JOB_ROWS. The model
    sees the same batches whatever the job's size; only the per-job costs (hand-off, metrics, store) shrink."""
    if pace is None:
        return max(size, JOB_ROWS) if quick else size
    return int(min(JOB_ROWS, max(size, JOB_SECONDS / max(pace, 1e-9))))


def _grouped(
    batches: list[np.ndarray], pace: dict[str, float], system: str, size: int, *, quick: bool = False
) -> Iterator[list[np.ndarray]]:
    """Consecutive batches gathered into jobs of at most job_rows rows (at least one batch each), the system's
    pace read again for every job, as the jobs are drawn."""
    start = 0
    while start < len(batches):
        most, stop, rows = job_rows(pace.get(system), size, quick=quick), start + 1, batches[start].size
        while stop < len(batches) and rows + batches[stop].size <= most:
            rows += batches[stop].size
            stop += 1
        yield batches[start:stop]
        start = stop


def summary_lines(systems: dict[str, dict]) -> list[str]:
    """Per system what this run's forecasting did: forecasts, how many from the cache (the published reference
    forecasts among them), failures, time, what its libraries said; then the published ones in all, if any."""
    lines = []
    for name, t in systems.items():
        if not t["forecasts"]:
            continue
        lines.append(
            f"{name}: {t['forecasts']} forecasts ({t['cached']} from the cache), {t['failed']} failed, "
            f"{t['seconds']:.1f} s forecasting"
            + (f", {t['startup']:.1f} s to start its worker and load it (while planning)" if "startup" in t else "")
        )
        for source, (count, first) in sorted(t.get("warnings", {}).items()):  # once per system, after progress
            what = "lines of output" if source == "output" else "warnings"
            lines.append(f"{name}: {source}: {count:,} {what}, first: {first}")
    published = {name: t.get("published", 0) for name, t in systems.items() if t.get("published")}
    if published:
        lines.append(
            f"{sum(published.values()):,} from the published reference forecasts ({', '.join(published)}); "
            "--no-cache recomputes them here"
        )
    return lines


def _record_worst(
    store: ForecastStore,
    wd: Windows,
    system: str,
    perturbation: str,
    rows: np.ndarray,
    kept,
    *,
    season: int,
    levels: tuple[float, ...] | None,
) -> None:
    """Store each window's worst candidate as the row of the `worst` perturbation."""
    forecasts = np.array([k.forecast for k in kept])
    samples = [k.samples for k in kept]
    metrics = batch_metrics(wd.truth[rows], forecasts, wd.inputs[rows], samples, season=season, levels=levels)
    store.put_forecasts(
        system=system,
        window_ids=rows,
        perturbations=[perturbation] * rows.size,
        forecasts=forecasts,
        errors=[k.error for k in kept],
        seconds=np.array([k.seconds for k in kept]),
        metrics=metrics,
        samples=samples,
        info=[k.info for k in kept],
        offsets=[k.offsets for k in kept],
    )
