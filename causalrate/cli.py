"""The `causalrate` command line. User mistakes print a message and exit with code 2."""

from __future__ import annotations

import argparse
import gc
import os
import sqlite3
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

from causalrate.errors import SystemsFailed, UserError, cut
from causalrate.logs import configure_logging
from causalrate.redact import scrub


@contextmanager
def _loading() -> Iterator[None]:
    """A command's modules imported with the cyclic collector off, then frozen out of its reach.

    The imports (pandas, scipy, pydantic's models, the registries) make about a million objects that live as
    long as the process; collecting while they are made only walks them again and again (0.2-0.3 CPU-s of a
    2.5 s `causalrate rate`), and once frozen (gc.freeze: a permanent generation) no later collection walks them.
    """
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _assess(args: argparse.Namespace) -> int:
    with _loading():
        from causalrate.config import load_config
        from causalrate.pipeline import assess

    if args.address and args.executor != "ray":
        raise UserError(f"--address {args.address}: a Ray cluster's address; add --executor ray (or drop --address)")
    if args.keep_loaded and args.executor != "local":
        raise UserError(
            f"--keep-loaded {args.keep_loaded:g}: kept workers are the local executor's; drop --executor ray "
            "(a Ray cluster keeps its own workers)"
        )
    config, base_dir = load_config(args.config, seed=args.seed)
    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise UserError(
            f"--out {args.out} with --resume {args.resume}: a run is resumed in place, in its own folder; "
            "drop --out (or give the same folder)"
        )
    out = Path(args.resume or args.out or Path("runs") / config.name)
    writable_folder(out, "--resume" if args.resume else "--out")
    started = time.perf_counter()
    try:
        assess(
            config,
            base_dir=base_dir,
            out=out,
            workers=args.workers,
            overwrite=args.overwrite,
            resume=bool(args.resume),
            executor=args.executor,
            address=args.address,
            skip_unavailable=args.skip_unavailable,
            refresh=args.no_cache,
            keep=args.keep_loaded,
        )
    except KeyboardInterrupt:
        print(
            f"causalrate: interrupted; finished forecasts are kept in {out}/forecasts.sqlite.\n"
            f"Resume with: causalrate assess {args.config} --resume {out}",
            file=sys.stderr,
        )
        return 130
    print(f"wrote {out}/ratings.json, scores.csv, report.md, forecasts.sqlite in {time.perf_counter() - started:.1f} s")
    if not args.no_cards:
        from causalrate.report.cards import render_cards

        render_cards(out)
        print(f"wrote the labels, reports, model cards, comparison and index to {out}/cards/ (open index.html)")
    _summarise_checks(out)
    if not args.allow_failed_systems:
        _fail_on_failed_systems(out)
    return 0


def _summarise_checks(out: Path) -> None:
    """The judged self-check on stderr (the exit code does not change: the ratings were still made)."""
    from causalrate.run import RatingsDocument

    checks = RatingsDocument.read(out / "ratings.json").checks
    failed = [c for c in checks if not c.passed]
    if not failed:
        return
    print(
        f"causalrate: self-check failed for {len(failed)} of {len(checks)} confounded distributions:", file=sys.stderr
    )
    for c in failed:
        print(f"  - {c.system} / {c.perturbation} / {c.scheme}: {c.reason}", file=sys.stderr)


def _fail_on_failed_systems(out: Path) -> None:
    """Exit code 3 (after every output is written) when some system failed every forecast."""
    from contextlib import closing

    from causalrate.run import open_store

    with closing(open_store(out)) as store:
        failed = store.failed_systems()
    if failed:
        raise SystemsFailed(failed)


def _rate(args: argparse.Namespace) -> int:
    from causalrate.report.render import picture_renderer

    formats = tuple(CARD_FORMATS.split(","))
    stored = (Path(args.run_dir) / "forecasts.sqlite").is_file()  # else the error comes at once, no browser started
    if args.out or stored:  # where it writes, checked before the analysis
        writable_folder(Path(args.out or args.run_dir), "--out" if args.out else "RUN_DIR")
    renderer = picture_renderer(formats) if stored and not args.no_cards else None  # it starts beside the analysis
    split = lambda text: [x.strip() for x in text.split(",") if x.strip()] if text else None  # noqa: E731
    try:
        with _loading():
            from causalrate.rerate import rerate

        out = rerate(
            Path(args.run_dir),
            levels=args.levels,
            systems=split(args.systems),
            scores=split(args.scores),
            out=Path(args.out) if args.out else None,
        )
        print(f"wrote {out}/ratings.json, scores.csv, report.md (no forecasting)")
    except BaseException:
        if renderer:
            renderer.close()
        raise
    if not args.no_cards:
        from causalrate.report.cards import render_cards

        render_cards(out, formats=_drawable(formats, renderer), renderer=renderer)
    return 0


def _export(args: argparse.Namespace) -> int:
    with _loading():
        from causalrate.export import export_parquet

    print(export_parquet(Path(args.run_dir), out=Path(args.out) if args.out else None))
    return 0


def _card(args: argparse.Namespace) -> int:
    from causalrate.report.render import picture_renderer

    formats = tuple(f.strip() for f in args.format.split(",") if f.strip())
    systems = [args.system] if args.system else None
    # Chromium first: it starts in its own processes while this one imports, reads the run and writes the pages
    # (not for a folder that holds no run: that error comes at once)
    renderer = picture_renderer(formats) if (Path(args.run_dir) / "ratings.json").is_file() else None
    try:
        with _loading():
            from causalrate.report.cards import render_cards
            from causalrate.run import load_run_plugins

        load_run_plugins(Path(args.run_dir))
    except BaseException:
        if renderer:
            renderer.close()
        raise
    # what can be written is written (without Chromium: every format but png and pdf, with a warning saying so)
    written = render_cards(Path(args.run_dir), systems=systems, formats=_drawable(formats, renderer), renderer=renderer)
    for path in written:
        print(path)
    asked = [f for f in ("png", "pdf") if f in formats and args.format != CARD_FORMATS]
    lacking = [f for f in asked if not any(p.suffix == f".{f}" for p in written)]
    if lacking:  # asked for by name: the run's other files are written, but the answer is no
        raise UserError(
            f"--format {args.format}: wrote {len(written)} file(s) but no {' or '.join(lacking)} (see above)"
        )
    return 0


def _drawable(formats: tuple[str, ...], renderer: object | None) -> tuple[str, ...]:
    """`formats` without png and pdf when picture_renderer gave no renderer (it said why, once)."""
    return formats if renderer else tuple(f for f in formats if f not in ("png", "pdf"))


def _fit_head(args: argparse.Namespace) -> int:
    from causalrate.config import load_config
    from causalrate.data import make_windows
    from causalrate.data.loaders import load_dataset
    from causalrate.systems.envsystem import call_in_system
    from causalrate.systems.foundation import fit_moment_head
    from causalrate.systems.spec import build_system

    config, base_dir = load_config(args.config)
    spec = next((s for s in config.systems if s.name == args.system), None)
    if spec is None or spec.type != "moment":
        moments = [s.name for s in config.systems if s.type == "moment"]
        raise UserError(
            f"--system: {args.system!r} is not a moment system of {args.config}; its moment systems: {moments}"
        )
    start, end = args.start, args.end
    assessed = config.data.start
    if not args.allow_overlap and (assessed is None or end >= assessed):
        raise UserError(
            f"--end {end}: the training period must end before the assessed data starts (data.start: {assessed}), "
            "or the head would learn the windows it is rated on; --allow-overlap to do it anyway"
        )
    w = config.windows
    data = config.data.model_copy(update={"start": start, "end": end})
    dataset = load_dataset(data, base_dir=base_dir, min_length=w.input_length + w.horizon)
    system = build_system(spec, base_dir=base_dir)
    windows = make_windows(dataset, input_length=w.input_length, horizon=w.horizon, stride=w.stride)
    head = getattr(system.settings, "head", None)  # MOMENT's: where its fitted head is read from
    out = Path(args.out) if args.out else base_dir / (head or f"{spec.name}-head.safetensors")
    losses = call_in_system(  # in MOMENT's environment
        system,
        fit_moment_head,
        inputs=windows.inputs,
        truth=windows.truth,
        out=out,
        epochs=args.epochs,
        learning_rate=args.lr,
        seed=config.seed,
    )
    print(
        f"trained on {len(windows)} windows ({start} to {end}); MSE {losses['first_epoch_loss']:.4g} → "
        f"{losses['last_epoch_loss']:.4g}; wrote {out}"
    )
    return 0


def _study_export(args: argparse.Namespace) -> int:
    from causalrate.userstudy.export import export_kit

    systems = [x.strip() for x in args.systems.split(",") if x.strip()] if args.systems else None
    out = export_kit(
        Path(args.run_dir),
        out=Path(args.out),
        systems=systems,
        questions=args.questions,
        per_question=args.per_question,
        participants=args.participants,
        seed=args.seed,
        overwrite=args.overwrite,
    )
    print(f"wrote the study kit to {out}/ (start with {out}/README.md; replace consent.md before use)")
    return 0


def _study_analyze(args: argparse.Namespace) -> int:
    from causalrate.userstudy.analyze import analyze_responses

    out = Path(args.out) if args.out else Path(args.kit_dir) / "report"
    summary = analyze_responses(Path(args.kit_dir), Path(args.responses), out=out)
    problems = summary["problems"]
    print(f"{summary['participants']} participants; wrote {out}/report.md, report.html, summary.json, responses.csv")
    if problems:
        print(f"{problems} problem(s) in the response files: see {out}/problems.csv", file=sys.stderr)
    return 0


def _listing(args: argparse.Namespace) -> int:
    from causalrate.listings import LISTINGS, StudyPlugins

    study = StudyPlugins.load(args.config) if args.config else StudyPlugins.none()
    list_entries, _ = LISTINGS[args.command]
    for line in list_entries(study):
        print(line)
    return 0


def _env_create(args: argparse.Namespace) -> int:
    from causalrate.systems.environments import create

    for name in args.names:
        started = time.perf_counter()
        recipe, built = create(name, log=lambda line: print(line, file=sys.stderr))
        took = f"built in {time.perf_counter() - started:.0f} s" if built else "already built"
        print(f"environment {recipe.name}: {recipe.folder} ({took})")
    return 0


def _env_list(args: argparse.Namespace) -> int:
    from causalrate.systems.environments import recipes

    for name, recipe in recipes().items():
        state = f"built at {recipe.folder}" if recipe.built else f"not built (causalrate env create {name})"
        print(f"{name:10} {state}\n{'':10} requires: {', '.join(recipe.requirements)}")
        if recipe.no_deps:
            print(f"{'':10} without their dependencies: {', '.join(recipe.no_deps)}")
            print(f"{'':10} pins relaxed: {'; '.join(recipe.relaxed) or 'none'}")
        record = recipe.record()
        if record.get("packages"):
            print(f"{'':10} resolved: {', '.join(f'{k}=={v}' for k, v in record['packages'].items())}")
        for complaint in record.get("pip_check", []):
            print(f"{'':10} pip check: {complaint}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="causalrate", description="Causally grounded robustness ratings for forecasters.")
    p.add_argument("--version", action=_Version, nargs=0, help="show the installed version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("assess", help="forecast every case, run the causal analysis, write ratings")
    a.add_argument("config", help="study YAML (systems:) or model YAML (model:)")
    a.add_argument("--out", help="run directory (default runs/<study name>)")
    a.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="forecasting processes (default: cores)")
    a.add_argument("--seed", type=_seed, help="override the config's seed")
    a.add_argument("--overwrite", action="store_true", help="replace an existing run in --out")
    a.add_argument("--no-cards", action="store_true", help="skip the rating cards and comparison page")
    a.add_argument(
        "--no-cache",
        action="store_true",
        help="make every forecast afresh, none from the cache (they are stored in it): forecast.cache: refresh",
    )
    a.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run: keep its forecasts, make the rest")
    a.add_argument("--executor", choices=["local", "ray"], default="local", help="where forecasts run")
    a.add_argument(
        "--keep-loaded",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="keep each device's worker, its models loaded, for the next run until SECONDS pass without one "
        "(`causalrate workers --stop` ends them)",
    )
    a.add_argument("--address", help="Ray cluster address (default: a local Ray)")
    a.add_argument(
        "--skip-unavailable",
        action="store_true",
        help="rate the systems that can run here; list the others (missing checkpoint, library or key) as not assessed",
    )
    a.add_argument(
        "--allow-failed-systems",
        action="store_true",
        help="exit 0 even when a system failed every forecast (default: exit code 3 after writing the outputs)",
    )
    a.set_defaults(func=_assess)
    r = sub.add_parser("rate", help="recompute the causal analysis and ratings of a run, without forecasting")
    r.add_argument("run_dir")
    r.add_argument("--levels", type=int, help="L, the number of rating levels")
    r.add_argument("--systems", help="comma-separated subset of the run's systems")
    r.add_argument("--scores", help="comma-separated subset of scores")
    r.add_argument("--out", help="write here instead of into RUN_DIR")
    r.add_argument("--no-cards", action="store_true")
    r.set_defaults(func=_rate)
    e = sub.add_parser("export", help="write a run's forecast rows as parquet")
    e.add_argument("run_dir")
    e.add_argument("--out", help="parquet file (default RUN_DIR/forecasts.parquet)")
    e.set_defaults(func=_export)
    c = sub.add_parser("card", help="write rating cards and the comparison page for a finished run")
    c.add_argument("run_dir", help="a run directory (holds ratings.json and forecasts.sqlite)")
    c.add_argument("--system", help="only this system's card")
    c.add_argument(
        "--format",
        default=CARD_FORMATS,
        help="comma-separated: html (label, report, comparison, index), png, pdf (label), md (report), "
        "json (model card), yaml (model-index); default: all",
    )
    c.set_defaults(func=_card)
    fh = sub.add_parser("fit-head", help="train a moment system's forecasting head on a training period")
    fh.add_argument("config", help="the study YAML that names the moment system")
    fh.add_argument("--system", required=True, help="the moment system's name")
    day = date.fromisoformat
    fh.add_argument("--start", required=True, type=day, help="training period start (YYYY-MM-DD), same data source")
    fh.add_argument("--end", required=True, type=day, help="training period end; must precede the study's data.start")
    fh.add_argument("--out", help="weights file (default: the system's head: setting)")
    fh.add_argument("--epochs", type=int, default=3)
    fh.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate (weight decay 0, head dropout 0.1)")
    fh.add_argument("--allow-overlap", action="store_true", help="allow a training period that overlaps the study's")
    fh.set_defaults(func=_fit_head)
    st = sub.add_parser("study", help="user studies: export a kit of stimuli and questionnaires, analyze answers")
    study = st.add_subparsers(dest="study_command", required=True)
    se = study.add_parser("export", help="write a user-study kit from a finished run")
    se.add_argument("run_dir")
    se.add_argument("--out", required=True, help="kit directory")
    se.add_argument("--systems", help="comma-separated systems to compare (default: all of the run's)")
    se.add_argument("--questions", type=int, default=8, help="number of questions, even (default 8)")
    se.add_argument("--per-question", type=int, help="systems shown per question (default 3, or all if fewer)")
    se.add_argument(
        "--participants", type=_at_least_one, default=30, help="participant ids to assign (default 30; at least 1)"
    )
    se.add_argument("--seed", type=_seed, default=0, help="draws questions, letters, windows and assignments")
    se.add_argument("--overwrite", action="store_true", help="replace the kit's files in a --out that holds some")
    se.set_defaults(func=_study_export)
    sa = study.add_parser("analyze", help="analyze returned answers against a kit")
    sa.add_argument("kit_dir")
    sa.add_argument("responses", help="folder of returned .csv / .json answer files")
    sa.add_argument("--out", help="report directory (default KIT_DIR/report)")
    sa.set_defaults(func=_study_analyze)
    en = sub.add_parser("env", help="managed Python environments for systems that need their own packages")
    env = en.add_subparsers(dest="env_command", required=True)
    ec = env.add_parser("create", help="build a system type's environment (once; does nothing when it is built)")
    ec.add_argument("names", nargs="+", metavar="name", help="environments' names (their system types, e.g. moment)")
    ec.set_defaults(func=_env_create)
    env.add_parser("list", help="list the managed environments and whether they are built").set_defaults(func=_env_list)
    wk = sub.add_parser("workers", help="list the device workers kept by `assess --keep-loaded`; --stop ends them")
    wk.add_argument("--stop", action="store_true", help="end every kept worker no run is using")
    wk.set_defaults(func=_workers)
    from causalrate.listings import LISTINGS

    for name, (_, description) in LISTINGS.items():
        ls = sub.add_parser(name, help=description)
        ls.add_argument(
            "--config", metavar="STUDY.yaml", help="also list what this study's plugins (and python systems) add"
        )
        ls.set_defaults(func=_listing)
    return p


class _Version(argparse.Action):
    """--version: the installed distribution's version, looked up only when asked (importlib.metadata and its
    scan of the installed packages cost every other command 0.05-0.1 s)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib import metadata

        print(f"causalrate {metadata.version('causalrate')}")
        parser.exit()


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more, else exit 2 naming the flag."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected 0 or more seconds, got {text}")
    return value


def _workers(args: argparse.Namespace) -> int:
    from causalrate.forecast import kept

    if args.stop:
        ended, busy = kept.stop()
        print(f"{ended} kept worker(s) ended" + (f"; {busy} serving a run, left running" if busy else ""))
        return 0
    found = kept.listed()
    for device, busy in found:
        print(f"{device:10} {'serving a run' if busy else 'waiting for a run'}")
    if not found:
        print("no kept workers (assess --keep-loaded SECONDS keeps them)")
    return 0


def _seed(text: str) -> int:
    """An argparse type: a seed numpy takes (a whole number from 0 to 2**32 - 1), else exit 2 naming the flag."""
    from causalrate.config import MAX_SEED

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected 0 to {MAX_SEED}, got {value}")
    return value


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse answers anything else with exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def writable_folder(folder: Path, flag: str) -> None:
    """Raise a UserError now, before any work, where a command could not write its output folder: a file there or
    on its path, or a folder (it, or its nearest parent that exists) where no file can be made (permissions, a
    read-only disk). Probed with a file made and removed at once: nothing is left, no folder is made."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{flag} {folder}: a file is there; give a folder (it is created if missing)")
    existing = next(p for p in (folder, *folder.parents) if p.exists())  # "." or "/" at the latest
    if not existing.is_dir():
        raise UserError(f"{flag} {folder}: {existing} is a file, not a folder; give a folder (made if missing)")
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".causalrate-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(
            f"{flag} {folder}: cannot read or write it: no file can be made in {existing} ({exc.strerror or exc}); "
            "give a folder you may write to (check its permissions, or that its disk is not read-only)"
        ) from None


def file_problem(exc: OSError) -> str:
    """An OSError about a path (a folder that cannot be made, no permission, a full or read-only disk) in words:
    the path and what the system said; the user fixes it (another --out, space, permissions), exit code 2."""
    target = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
    return f"{target}: cannot read or write it ({exc.strerror or exc}); check the path, its permissions and free space"


CARD_FORMATS = "html,png,pdf,md,json,yaml"  # card's default --format
DISK_PROBLEMS = ("disk is full", "disk I/O error")  # SQLite's words for a full or failing disk: the user's to fix
MAX_MESSAGE = 8000  # characters of an error message printed: a page or two, never a gigabyte


def main(argv: list[str] | None = None) -> int:
    configure_logging()  # library code logs; here its records reach stderr as "causalrate: ..."
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (UserError, SystemsFailed) as exc:
        print(scrub(cut(f"causalrate: error: {exc}", MAX_MESSAGE)), file=sys.stderr)
        return exc.exit_code
    except sqlite3.OperationalError as exc:
        if not any(words in str(exc) for words in DISK_PROBLEMS):
            sys.stderr.write(scrub("".join(traceback.format_exception(exc))))
            return 1
        folder = getattr(args, "out", None) or getattr(args, "resume", None) or getattr(args, "run_dir", None)
        then = (
            f"; then `causalrate assess {args.config} --resume {folder}` keeps what is made"
            if args.command == "assess"
            else ""
        )
        print(
            scrub(f"causalrate: error: {folder or 'the run'}: cannot write its database ({exc}); free space there or "
                  f"choose another folder{then}"),
            file=sys.stderr,
        )  # fmt: skip
        return 2
    except OSError as exc:
        if exc.filename is None:  # not about a path the user gave (a socket, a pipe): a fault of ours
            sys.stderr.write(scrub("".join(traceback.format_exception(exc))))
            return 1
        print(scrub(cut(f"causalrate: error: {file_problem(exc)}", MAX_MESSAGE)), file=sys.stderr)
        return 2
    except Exception as exc:  # a fault of ours: its traceback is shown, scrubbed like every other text
        sys.stderr.write(scrub("".join(traceback.format_exception(exc))))
        return 1
    except KeyboardInterrupt:
        print("causalrate: interrupted; finished forecasts are kept in the run's forecasts.sqlite", file=sys.stderr)
        return 130
    finally:
        gc.unfreeze()  # what _loading froze is collectable again (main also runs in-process: tests, notebooks)
