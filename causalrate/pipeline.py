"""`causalrate assess`: data → perturb → forecast → score → causal → rate → report."""

from __future__ import annotations

import hashlib
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from causalrate import plugins
from causalrate.causal.effects import DrawSettings, estimate_effects, identify_schemes, summarise_effects
from causalrate.causal.graph import Identification
from causalrate.causal.heterogeneity import assess_heterogeneity
from causalrate.causal.rigor import Rigor, add_stability, assess_rigor
from causalrate.causal.schemes import SCHEMES
from causalrate.causal.selfcheck import judge
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
from causalrate.perturb.placement import offsets_of
from causalrate.perturb.suite import perturbation_seeds, placed_firsts, series_history
from causalrate.perturb.worst import WorstCase
from causalrate.rate.absolute import absolute_quantities, naive_clean_error
from causalrate.rate.headlines import headline_ratings
from causalrate.rate.ratings import RatingSettings, attach_coverage, coverage_table, levels_warning, rate_scores
from causalrate.redact import scrub
from causalrate.report.outputs import write_outputs
from causalrate.score.metrics import METRICS
from causalrate.score.recency import recency_profile
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
    suite = load_suite(config.perturbations, base_dir=base_dir, input_length=w.input_length, placement=config.placement)
    systems, unavailable = {}, dict(not_assessed or {})
    for spec in config.systems:
        system = build_system(spec.model_dump(), base_dir=base_dir)
        try:
            if check_systems:
                system.check(dataset)
        except UserError as exc:
            unavailable[spec.name] = scrub(str(exc))  # stored in the run and its outputs
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
    warning = levels_warning(config.rating.levels, len(systems), config.rating.scale)
    if warning:
        print(f"causalrate: warning: {warning}", file=sys.stderr)
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
            shutil.rmtree(out / "cards", ignore_errors=True)  # no stale card of a system no longer in the run
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

    by_id = {p.id: p for p in study.suite}
    placed = {p.id: placed_firsts(p, ds, wd, seed=cfg.seed) for p in study.suite}
    worst = {(s.name, p.id): WorstCase() for s in cfg.systems for p in study.suite if p.placement.name == "worst"}

    def offsets(perturbation: str, variant: int, rows: np.ndarray) -> list[list[int]]:
        p = by_id[perturbation]
        return [] if p.is_control else offsets_of(p.mask(placed[p.id][rows, variant], wd.input_length))

    def record(
        system: str, perturbation: str, rows: np.ndarray, outcome: Outcome, seconds: np.ndarray, variant: int = 0
    ) -> None:
        truth, clean = wd.truth[rows], wd.inputs[rows]
        with np.errstate(all="ignore"):
            metrics = {name: m(truth, outcome.forecasts, clean, outcome.samples) for name, m in METRICS.items()}
        placed_at = offsets(perturbation, variant, rows) or [[] for _ in rows]
        if (system, perturbation) in worst:  # a candidate: kept only if it is the window's worst so far
            worst[(system, perturbation)].offer(
                variant=variant,
                windows=rows,
                outcomes=metrics[cfg.outcome],
                outcome=outcome,
                seconds=seconds,
                offsets=placed_at,
            )
            return
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
            offsets=placed_at,
        )

    cfg_plugins = plugins.resolve(cfg.plugins, base_dir=study.base_dir, where=study.base_dir)
    jobs = []
    history = series_history(ds, wd)
    for p, variant in ((q, v) for q in study.suite for v in range(placed[q.id].shape[1])):
        firsts = placed[p.id][:, variant]
        perturbed = p.apply(wd.inputs, firsts, seeds=perturbation_seeds(cfg.seed, p.id, windows), history=history)
        dates = p.apply_dates(wd.input_dates, firsts)
        charts: dict[bytes, list[bytes]] = {}  # vision systems that see the same rows share the rendering
        for spec in cfg.systems:
            system = study.systems[spec.name]
            todo = np.array([i for i in range(len(wd)) if (spec.name, i, p.id) not in done], dtype=int)
            if todo.size == 0:
                continue
            imputation = p.impute or (None if system.accepts_nan else cfg.forecast.imputation)
            seen = impute(perturbed[todo], imputation) if imputation else perturbed[todo]
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
                record(spec.name, p.id, todo[hit], outcome, np.array([c.seconds for c in cached]), variant)
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
                        variant=variant,
                    )
                )

    counts = {"made": sum(j.size for j in jobs), "cached": 0}
    needed = len(cfg.systems) * sum(f.size for f in placed.values())  # worst: m candidates per window
    counts["cached"] = needed - sum(placed[k[2]].shape[1] for k in done if k[2] in placed) - counts["made"]

    def on_done(job: Job, outcome: Outcome) -> None:
        per_row = np.full(job.size, outcome.seconds / max(job.size, 1))
        record(job.system, job.perturbation, job.windows, outcome, per_row, job.variant)
        if cache:
            cache.put(
                (k, Cached(outcome.forecasts[i].tolist(), per_row[i], outcome.samples[i], outcome.info[i]))
                for i, k in enumerate(job.keys)
                if outcome.errors[i] is None
            )

    if jobs:
        executor.run(jobs, on_done)
    for (system, perturbation), search in worst.items():
        rows, kept = search.rows()
        if rows.size:
            _record_worst(store, wd, system, perturbation, rows, kept)
    return counts


def _record_worst(store: ForecastStore, wd: Windows, system: str, perturbation: str, rows: np.ndarray, kept) -> None:
    """Store each window's worst candidate as the row of the `worst` perturbation."""
    forecasts = np.array([k.forecast for k in kept])
    samples = [k.samples for k in kept]
    with np.errstate(all="ignore"):
        metrics = {name: m(wd.truth[rows], forecasts, wd.inputs[rows], samples) for name, m in METRICS.items()}
    store.put_forecasts(
        system=system,
        windows=rows,
        perturbations=[perturbation] * rows.size,
        forecasts=forecasts,
        errors=[k.error for k in kept],
        seconds=np.array([k.seconds for k in kept]),
        metrics=metrics,
        samples=samples,
        info=[k.info for k in kept],
        offsets=[k.offsets for k in kept],
    )


@dataclass(frozen=True)
class Result:
    """What the causal and rating stages derive from the forecast rows."""

    evidence: Evidence
    effect_draws: pd.DataFrame
    ratings: pd.DataFrame  # rate.ratings.COLUMNS
    overall: dict[str, int]
    identification: dict[str, Identification]
    unavailable: dict[str, str]  # score → why it was not rated
    rigor: Rigor | None = None
    headlines: dict[str, dict[str, dict]] = field(default_factory=dict)  # system → family → headline
    checks: list[dict] = field(default_factory=list)  # the judged self-check (causal.selfcheck)
    recency_profile: list[dict] = field(default_factory=list)  # APE by distance of the corruption from the origin
    heterogeneity: dict = field(default_factory=dict)  # ratings.json's fragility map (§5.5)


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
        else pd.DataFrame(columns=["system", "perturbation", "scheme", "ape_true", "ape_adj", "pie"])
    )
    severity = {p.id: (p.family, p.severity) for p in study.suite if p.severity is not None}
    fragility = assess_heterogeneity(study, forecasts, outcomes, settings, identification)
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
    )
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
    rigor = None
    if cfg.rigor.replicates > 0:
        rigor = assess_rigor(
            config=cfg,
            table=table,
            series_index=study.windows.series_index,
            forecasts=forecasts,
            outcomes=outcomes,
            draws=draws,
            effects=effects,
            control=control,
            wrs_plans=wrs_plans(table, cfg.causal.wrs_groups),
        )
    settings = RatingSettings(
        levels=cfg.rating.levels, rule=cfg.rating.rule, scale=cfg.rating.scale, min_coverage=cfg.rating.min_coverage
    )
    raw = pd.concat(raw, ignore_index=True)
    coverage = coverage_table(forecasts, control=control, n_windows=len(table))
    naive_error = naive_clean_error(study.windows.inputs, study.windows.truth, METRICS.get(cfg.outcome))
    raw = raw.assign(
        coverage=attach_coverage(raw, coverage, severity),
        quantity=absolute_quantities(raw, wrs_table, naive_error),
    )
    rated = rate_scores(raw, settings=settings, replicates=rigor.replicates if rigor else None)
    if rigor:
        add_stability(rigor, rated, levels=cfg.rating.levels, control=control)
        rated = withhold_inconclusive(rated, rigor)
    headlines = headline_ratings(
        rated, settings=settings, control=control, stability=rigor.overall_stability if rigor else None
    )
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
        recency_profile=recency_profile(evidence, replicates=cfg.rigor.replicates, seed=cfg.seed),
        heterogeneity=fragility.doc if fragility else {},
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
