"""`causalrate assess`: data → perturb → forecast → score → causal → rate → report."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from causalrate import plugins
from causalrate.causal.effects import DrawSettings, estimate_effects, identify_schemes, summarise_effects
from causalrate.causal.graph import Identification
from causalrate.causal.rigor import Rigor, assess_rigor
from causalrate.causal.schemes import SCHEMES
from causalrate.causal.wrs import wrs
from causalrate.config import StudyConfig
from causalrate.data import Dataset, Windows, make_windows
from causalrate.data.characteristics import CHARACTERISTICS, compute_characteristics, terciles
from causalrate.data.loaders import load_dataset
from causalrate.errors import UserError
from causalrate.forecast import Batch
from causalrate.forecast.cache import Cached, ForecastCache, default_cache_path, forecast_keys
from causalrate.forecast.impute import impute
from causalrate.forecast.plot import render_windows
from causalrate.forecast.runner import Job, Outcome, make_executor
from causalrate.forecast.store import ForecastStore
from causalrate.forecast.systems import System, build_system
from causalrate.perturb import Perturbation, load_suite
from causalrate.perturb.suite import perturbation_seeds
from causalrate.rate.ratings import overall_ratings, rate_scores
from causalrate.report.outputs import write_outputs
from causalrate.score.metrics import METRICS
from causalrate.score.scores import SCORES, Evidence
from causalrate.seeding import row_seeds

RUN_FILES = ("forecasts.sqlite", "forecasts.sqlite-*", "ratings.json", "scores.csv", "report.md")


@dataclass(frozen=True)
class Study:
    """Everything resolved from a config before any forecast is made."""

    config: StudyConfig
    base_dir: Path
    dataset: Dataset
    windows: Windows
    suite: list[Perturbation]
    systems: dict[str, System]
    table: pd.DataFrame  # per window: series, attributes, characteristics
    not_assessed: dict[str, str] = field(default_factory=dict)  # system → why it could not run (--skip-unavailable)

    @property
    def control(self) -> str:
        return self.suite[0].id


def prepare(
    config: StudyConfig,
    *,
    base_dir: Path,
    check_systems: bool = True,
    skip_unavailable: bool = False,
    not_assessed: dict[str, str] | None = None,
) -> Study:
    """Load data, windows, the perturbation suite and the systems; every user mistake surfaces here.

    Systems that cannot run here (a missing checkpoint, library or API key) are all listed in one
    error — or, with skip_unavailable, left out of the study and listed in its outputs, never silently.
    Re-rating stored forecasts does not need the systems to run (check_systems=False).
    """
    w = config.windows
    dataset = load_dataset(config.data, base_dir=base_dir, min_length=w.input_length + w.horizon)
    windows = make_windows(dataset, input_length=w.input_length, horizon=w.horizon, stride=w.stride)
    suite = load_suite(config.perturbations, base_dir=base_dir, input_length=w.input_length)
    systems, unavailable = {}, dict(not_assessed or {})
    for spec in config.systems:
        system = build_system(spec.model_dump(), base_dir=base_dir)
        try:
            if check_systems:
                system.check(dataset)
        except UserError as exc:
            unavailable[spec.name] = str(exc)
            continue
        systems[spec.name] = system
    if unavailable and check_systems:
        listing = "\n".join(f"  - {name}: {why}" for name, why in unavailable.items())
        if not skip_unavailable:
            raise UserError(
                f"{len(unavailable)} system(s) cannot run here:\n{listing}\n"
                "Provide them, or pass --skip-unavailable to rate the others (the skipped ones are then "
                "listed in ratings.json and report.md)."
            )
        if not systems:
            raise UserError(f"no system can run here:\n{listing}")
        config = config.model_copy(update={"systems": [s for s in config.systems if s.name in systems]})
    table = window_table(dataset, windows, config)
    for name in config.causal.schemes:
        SCHEMES.get(name)().check(table)
    return Study(
        config=config,
        base_dir=base_dir,
        dataset=dataset,
        windows=windows,
        suite=suite,
        systems=systems,
        table=table,
        not_assessed=unavailable,
    )


def window_table(dataset: Dataset, windows: Windows, config: StudyConfig) -> pd.DataFrame:
    """Per window: its series, attributes (Z), and the characteristics the causal settings use."""
    table = pd.DataFrame([dataset.series[i].attributes for i in windows.series_index])
    table.insert(0, "series", [dataset.series[i].id for i in windows.series_index])
    table["start"] = windows.start
    causal = config.causal
    driven = [c for name in causal.schemes for c in SCHEMES.get(name).confounders if c in CHARACTERISTICS]
    needed = list(dict.fromkeys([*causal.covariates, *driven, *causal.wrs_groups]))
    table = table.assign(**compute_characteristics(windows.inputs, needed, period=causal.stl_period))
    for name in causal.wrs_groups:
        table[f"{name}_tercile"] = terciles(table[name].to_numpy())
    return table


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
) -> Path:
    """Run a whole study and write ratings.json, scores.csv, report.md and forecasts.sqlite to `out`.

    With resume, forecasts already in `out`'s store are kept and only the missing ones are made.
    """
    study = prepare(config, base_dir=base_dir, skip_unavailable=skip_unavailable)
    config = study.config  # without the systems that cannot run here, if skipped
    store_path = out / "forecasts.sqlite"
    if resume:
        store = ForecastStore.open(store_path, metrics=METRICS.names())
        stored = store.get_meta("config")
        if stored != config.model_dump(mode="json"):
            store.close()
            raise UserError(
                f"{out}: the run was made with a different config; resume needs the same one "
                "(or start afresh with --overwrite)"
            )
    else:
        if store_path.exists():
            finished = _finished(store_path)
            if not overwrite:
                hint = "" if finished else f"; it is unfinished: resume it with --resume {out}"
                raise UserError(f"{out} already holds a run (forecasts.sqlite){hint}; use another --out or --overwrite")
            for name in RUN_FILES:  # only the run's own files: --out may hold other things
                for path in out.glob(name):
                    path.unlink()
        out.mkdir(parents=True, exist_ok=True)
        store = ForecastStore.create(store_path, metrics=METRICS.names())
        store.put_meta("config", config.model_dump(mode="json"))
        store.put_meta("base_dir", str(base_dir))
        store.put_meta("data_hash", study.dataset.content_hash())
        store.put_meta("not_assessed", study.not_assessed)
        store.put_meta("plugins", plugins.resolve(config.plugins, base_dir=base_dir, where=base_dir))
        store.put_meta("status", "forecasting")
        _store_windows(store, study)
    cache = _open_cache(config, base_dir)
    try:
        counts = forecast_all(
            study,
            store,
            cache=cache,
            executor=make_executor(executor, workers=workers, retries=config.forecast.retries, address=address),
        )
        store.put_meta("counts", counts)
        store.put_meta("status", "forecasted")
        forecasts = store.forecasts()
    finally:
        store.close()
        if cache:
            cache.close()
    result = analyse(study, forecasts)
    write_outputs(study=study, result=result, out=out)
    return out


def _finished(store_path: Path) -> bool:
    try:
        store = ForecastStore.open(store_path, metrics=METRICS.names())
    except UserError:
        return True  # not ours to resume: only --overwrite applies
    try:
        return store.get_meta("status") == "forecasted"
    finally:
        store.close()


def _open_cache(config: StudyConfig, base_dir: Path) -> ForecastCache | None:
    if not config.forecast.cache:
        return None
    path = (base_dir / config.forecast.cache_path).resolve() if config.forecast.cache_path else default_cache_path()
    return ForecastCache(path)


def _store_windows(store: ForecastStore, study: Study) -> None:
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


def forecast_all(study: Study, store: ForecastStore, *, cache: ForecastCache | None, executor) -> dict[str, int]:
    """The full factorial: every system × window × perturbation not yet in the store.

    Forecasts found in the cache are written at once; the rest are batched into jobs, and
    each finished batch is written to the store (one transaction) and to the cache.
    """
    cfg, wd, ds = study.config, study.windows, study.dataset
    done = store.done()
    series_ids = [ds.series[i].id for i in wd.series_index]
    windows = list(zip(series_ids, wd.start.tolist(), strict=True))
    attributes = [ds.series[i].attributes for i in wd.series_index]

    def record(system: str, perturbation: str, rows: np.ndarray, outcome: Outcome, seconds: np.ndarray) -> None:
        truth, clean = wd.truth[rows], wd.inputs[rows]
        with np.errstate(all="ignore"):
            metrics = {name: m(truth, outcome.forecasts, clean, outcome.samples) for name, m in METRICS.items()}
        store.put_forecasts(
            system=system,
            windows=rows,
            perturbations=[perturbation] * rows.size,
            forecasts=outcome.forecasts,
            errors=outcome.errors,
            seconds=seconds,
            metrics=metrics,
            samples=outcome.samples,
            info=outcome.info,
        )

    cfg_plugins = plugins.resolve(cfg.plugins, base_dir=study.base_dir, where=study.base_dir)
    jobs = []
    for p in study.suite:
        perturbed = p.apply(wd.inputs, wd.start, seeds=perturbation_seeds(cfg.seed, p.id, windows))
        dates = p.apply_dates(wd.input_dates, wd.start)
        charts: dict[bytes, list[bytes]] = {}  # vision systems that see the same rows share the rendering
        for spec in cfg.systems:
            system = study.systems[spec.name]
            todo = np.array([i for i in range(len(wd)) if (spec.name, i, p.id) not in done], dtype=int)
            if todo.size == 0:
                continue
            seen = perturbed[todo] if system.accepts_nan else impute(perturbed[todo], cfg.forecast.imputation)
            seeds = row_seeds(cfg.seed, spec.name, keys=[(*windows[i], p.id) for i in todo])
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
            keys = forecast_keys(
                system.identity(), seen, wd.horizon, seeds=seeds if system.stochastic else None, context=context
            )
            hits = cache.get(keys) if cache else {}
            hit = np.array([k in hits for k in keys], dtype=bool)
            if hit.any():
                cached = [hits[k] for k in keys if k in hits]
                outcome = Outcome(
                    forecasts=np.array([c.forecast for c in cached]),
                    errors=[None] * len(cached),
                    seconds=0.0,
                    samples=[c.samples for c in cached],
                    info=[c.info for c in cached],
                )
                record(spec.name, p.id, todo[hit], outcome, np.array([c.seconds for c in cached]))
            miss = np.flatnonzero(~hit)
            size = system.batch_size or cfg.forecast.batch_size  # a model's own batch, not capped by the run's
            for chunk in np.array_split(miss, max(1, -(-miss.size // size))) if miss.size else []:
                rows = todo[chunk]
                batch = Batch(
                    inputs=seen[chunk],
                    horizon=wd.horizon,
                    seeds=seeds[chunk],
                    attributes=tuple(attributes[i] for i in rows),
                    input_dates=dates[rows],
                    truth_dates=wd.truth_dates[rows],
                    images=None if images is None else tuple(images[c] for c in chunk),
                )
                jobs.append(
                    Job(
                        system=spec.name,
                        perturbation=p.id,
                        windows=rows,
                        spec=spec.model_dump(),
                        base_dir=study.base_dir,
                        timeout=cfg.forecast.timeout,
                        batch=batch,
                        keys=[keys[c] for c in chunk],
                        accelerator=system.accelerator,
                        plugins=tuple(cfg_plugins),
                    )
                )

    counts = {"made": sum(j.size for j in jobs), "cached": 0}
    counts["cached"] = len(cfg.systems) * len(study.suite) * len(wd) - len(done) - counts["made"]

    def on_done(job: Job, outcome: Outcome) -> None:
        per_row = np.full(job.size, outcome.seconds / max(job.size, 1))
        record(job.system, job.perturbation, job.windows, outcome, per_row)
        if cache:
            cache.put(
                (k, Cached(outcome.forecasts[i].tolist(), per_row[i], outcome.samples[i], outcome.info[i]))
                for i, k in enumerate(job.keys)
                if outcome.errors[i] is None
            )

    if jobs:
        executor.run(jobs, on_done)
    return counts


@dataclass(frozen=True)
class Result:
    """What the causal and rating stages derive from the forecast rows."""

    evidence: Evidence
    effect_draws: pd.DataFrame
    ratings: pd.DataFrame  # perturbation, score, system, raw, rating
    overall: dict[str, int]
    identification: dict[str, Identification]
    unavailable: dict[str, str]  # score → why it was not rated
    rigor: Rigor | None = None


def withhold_inconclusive(rated: pd.DataFrame, rigor: Rigor) -> pd.DataFrame:
    """An APE with no effect detected and too little power is not awarded the best level (shown as '≥ k')."""
    rated = rated.copy()
    for i, row in rated.iterrows():
        extra = rigor.rows.get((row["perturbation"], row["score"], row["system"]), {})
        if extra.get("inconclusive"):
            extra["display"] = f"≥ {row['rating']}"
            rated.loc[i, "rating"] = max(int(row["rating"]), 2)
    return rated


def analyse(study: Study, forecasts: pd.DataFrame) -> Result:
    """Score, causal analysis and ratings from the stored forecast rows (no forecasting)."""
    cfg, control = study.config, study.control
    forecasts = forecasts.assign(failed=forecasts["error"].notna(), outcome=forecasts[cfg.outcome])
    table = study.table
    wide = forecasts.pivot_table(index=["system", "window"], columns="perturbation", values="outcome", dropna=False)
    order = [p.id for p in study.suite]
    outcomes = {
        s: wide.loc[s].reindex(index=range(len(table)), columns=order)
        if s in wide.index.get_level_values(0)
        else pd.DataFrame(np.nan, index=range(len(table)), columns=order)
        for s in study.systems
    }
    wrs_table = wrs_scores(outcomes, table, groups=cfg.causal.wrs_groups)
    settings = DrawSettings(
        schemes=tuple(cfg.causal.schemes),
        draws=cfg.causal.draws,
        high=cfg.causal.high,
        low=cfg.causal.low,
        caliper=cfg.causal.caliper,
        covariates=tuple(cfg.causal.covariates),
        seed=cfg.seed,
    )
    attributes = study.dataset.attribute_names
    identification = identify_schemes(settings, attributes)
    draws = estimate_effects(
        windows=table, outcomes=outcomes, control=control, settings=settings, identification=identification
    )
    effects = (
        summarise_effects(draws)
        if len(draws)
        else pd.DataFrame(columns=["system", "perturbation", "scheme", "ape_true", "abs_ape_adj", "pie"])
    )
    severity = {p.id: (p.family, p.severity) for p in study.suite if p.severity is not None}
    evidence = Evidence(forecasts=forecasts, wrs=wrs_table, effects=effects, control=control, severity=severity)
    raw, unavailable = [], {}
    for name in cfg.rating.scores or SCORES.names():
        score = SCORES.get(name)()
        values = score.compute(evidence)
        if values is None:
            unavailable[name] = score.unavailable
            continue
        if not score.on_control:
            values = values[values["perturbation"] != control]
        raw.append(values.assign(score=name))
    rated = rate_scores(pd.concat(raw, ignore_index=True), levels=cfg.rating.levels)
    rigor = None
    if cfg.rigor.replicates > 0:
        rigor = assess_rigor(
            config=cfg,
            table=table,
            series_index=study.windows.series_index,
            forecasts=forecasts,
            outcomes=outcomes,
            rated=rated,
            draws=draws,
            effects=effects,
            control=control,
            wrs_plans=wrs_plans(table, cfg.causal.wrs_groups),
        )
        rated = withhold_inconclusive(rated, rigor)
    return Result(
        evidence=evidence,
        effect_draws=draws,
        rigor=rigor,
        ratings=rated,
        overall=overall_ratings(rated, levels=cfg.rating.levels, control=control),
        identification=identification,
        unavailable=unavailable,
    )


def wrs_plans(table: pd.DataFrame, groups: list[str]) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
    """(attribute, group labels, blocks) for each WRS: industries; companies within an industry; terciles."""
    plans = [(name, table[f"{name}_tercile"].to_numpy(), None) for name in groups]
    if "industry" in table:
        plans.append(("industry", table["industry"].to_numpy(), None))
    if "company" in table:
        within = table["industry"].to_numpy() if "industry" in table else None
        plans.append(("company", table["company"].to_numpy(), within))
    return plans


def wrs_scores(outcomes: dict[str, pd.DataFrame], table: pd.DataFrame, *, groups: list[str]) -> pd.DataFrame:
    """WRS per system and perturbation for every grouping of wrs_plans."""
    plans = wrs_plans(table, groups)
    rows = []
    for system, wide in outcomes.items():
        for perturbation in wide.columns:
            values = wide[perturbation].to_numpy()
            ok = np.isfinite(values)
            for attribute, labels, within in plans:
                score, pairs = wrs(values[ok], labels[ok], within=None if within is None else within[ok])
                rows.append(
                    {
                        "system": system,
                        "perturbation": perturbation,
                        "attribute": attribute,
                        "wrs": score,
                        "pairs": pairs,
                    }
                )
    return pd.DataFrame(rows, columns=["system", "perturbation", "attribute", "wrs", "pairs"])
