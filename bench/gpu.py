"""Benchmark (issue 18): forecasts/s of foundation models through the engine vs the model alone, GPU busy %.

Run on a GPU machine:   python bench/gpu.py            (device: auto → CUDA, bfloat16)
Smoke run on a CPU:     python bench/gpu.py --smoke    (tiny checkpoints, seconds)
Some systems only:      python bench/gpu.py --systems chronos,chronos-bolt,phi3   (MOMENT needs its environment)
CPU stand-in:           python bench/gpu.py --systems standin,standin-fast   (torch MLPs of fixed cost per batch,
                        one thread: Chronos-like and Chronos-Bolt-like rates on a CPU)
Kept workers:           python bench/gpu.py --keep-loaded   (each engine phase twice: the second run's worker is the
                        first's, kept with its model loaded: assess --keep-loaded)

Models are randomly initialised from configs of their real sizes (no download): Chronos
(t5-small: d_model 512, 6+6 layers, 4,096 bins, 20 sample paths), Chronos-Bolt (small), MOMENT
(a t5-small-sized encoder, seq_len 512) and a Phi-3-sized chat model (hidden 3,072, 32 heads,
vocab 32,064) cut to 2 layers. Each runs the quickstart's windows (6 series, 2022, 80 in, 20
ahead) under the paper's four perturbations (the chat model writes 40 new tokens per answer):

- engine: the `assess` forecast stage (`forecast_all`: a spawned worker per device, started and loading its
  model while the stage plans, jobs of one or more of the system's batches, store and metrics, no cache),
  worker start and model load included; "start-up s": from the worker's start to its model loaded (reported
  apart, overlapping planning); and its steady rate (the forecasts answered after the first batch over the
  time from the first answer to the last);
- model alone: the same system's `forecast()` on the same inputs in batches of its batch size,
  in this process, after loading (load time shown apart).

With --keep-loaded the engine runs twice per system, with kept workers (`assess --keep-loaded`): "cold" starts the
kept worker (as a plain one), "kept" is the next run, answered by that worker with its model loaded.

Busy % is the device's: on a GPU nvidia-smi's utilization.gpu, sampled every 0.2 s during each phase; without
one (the CPU stand-ins) the CPU seconds of the processes that forecast (the engine's workers; the model alone:
this process) over the phase's wall seconds. Targets (issue 43): steady
vs alone ≥ 90 % for Chronos and the chat model, engine vs alone+load ≥ 50 % for Chronos-Bolt.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path

import numpy as np
from common import ROOT, arguments, machine

sys.path.insert(0, str(ROOT))  # tests.tiny_models: the tokenizer builder

SIZES = {  # (full, smoke)
    "t5": ({"d_model": 512, "d_ff": 2048, "num_layers": 6, "num_heads": 8, "d_kv": 64}, {"d_model": 16, "d_ff": 32}),
    "phi3": (
        {"hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 32, "vocab_size": 32064},
        {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 700},
    ),
}


def t5_sizes(smoke: bool) -> dict:
    """The T5 sizes of the benchmarked checkpoints (the real ones, or tiny for --smoke)."""
    size = SIZES["t5"][smoke]
    base = {"num_layers": 1, "num_heads": 2, "d_kv": 8} if smoke else {}
    return {**base, **size, "num_decoder_layers": size.get("num_layers", 1)}


def build_chronos(folder: Path, smoke: bool) -> None:
    from tests.tiny_models import build_chronos as build

    build(folder, sizes=t5_sizes(smoke), bins=64 if smoke else 4096, context_length=512, prediction_length=64)


def build_bolt(folder: Path, smoke: bool) -> None:
    from tests.tiny_models import build_chronos_bolt

    build_chronos_bolt(folder, sizes=t5_sizes(smoke), context_length=2048, prediction_length=64, patch=16)


def build_moment(folder: Path, smoke: bool) -> Path:
    """Built by MOMENT's own environment (causalrate env create moment), or here if momentfm is installed."""
    import importlib.util

    from causalrate.systems.environments import python_of, recipes
    from tests.tiny_models import build_moment_in

    recipe = recipes()["moment"]
    python = python_of(recipe.folder) if recipe.built else Path(sys.executable)
    if not recipe.built and importlib.util.find_spec("momentfm") is None:
        raise SystemExit("MOMENT's environment is not built: causalrate env create moment")
    from transformers import T5Config

    t5 = {**T5Config(**t5_sizes(smoke)).to_dict(), "vocab_size": 32, "feed_forward_proj": "gated-gelu"}
    return build_moment_in(python, folder, horizon=20, seq_len=512, t5=t5)[1]


def build_phi3(folder: Path, smoke: bool) -> None:
    from transformers import Phi3Config, Phi3ForCausalLM

    from tests.tiny_models import build_tokenizer

    tokenizer = build_tokenizer([f"({i}, {i * 1.5:.2f}) <forecast> 2022-01-{i % 28 + 1:02d}" for i in range(500)])
    size = SIZES["phi3"][smoke]
    config = Phi3Config(
        **size,
        num_hidden_layers=2,
        num_key_value_heads=size["num_attention_heads"],
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=tokenizer.eos_token_id,
    )
    tokenizer.save_pretrained(folder)
    Phi3ForCausalLM(config).save_pretrained(folder)


SYSTEMS = {
    "chronos": "{name: chronos, type: chronos, model: ckpt/chronos, num_samples: 20}",
    "chronos-bolt": "{name: chronos-bolt, type: chronos, model: ckpt/bolt}",
    "moment": "{name: moment, type: moment, model: ckpt/moment, head: ckpt/moment-head.safetensors, seq_len: 512}",
    "phi3": "{name: phi3, type: phi3, model: ckpt/phi3, max_new_tokens: %d, parse_retries: 0}",
    # the CPU stand-ins (not run by default): torch models of fixed cost per batch, on one thread as in a worker
    "standin": "{name: standin, type: python, function: ckpt/standin.py:forecast}",
    "standin-fast": "{name: standin-fast, type: python, function: ckpt/standin.py:fast}",
}
DEFAULT = ("chronos", "chronos-bolt", "moment", "phi3")

STANDIN = """import numpy as np
import torch

torch.manual_seed(0)
LAYERS = [torch.randn(80, 2048) / 9, torch.randn(2048, 2048) / 45, torch.randn(2048, 20) / 45]
FAST = [torch.randn(80, 1536) / 9, torch.randn(1536, 1536) / 39, torch.randn(1536, 20) / 39]  # ≈ Bolt on an H100


def run(layers, inputs, horizon):
    torch.set_num_threads(1)
    x = torch.nan_to_num(torch.as_tensor(inputs, dtype=torch.float32))
    with torch.no_grad():
        for layer in layers:
            x = torch.tanh(x @ layer)
    return np.asarray(inputs)[:, -1:] + x.numpy().astype(np.float64)[:, :horizon]


def forecast(inputs, horizon):
    return run(LAYERS, inputs, horizon)


def fast(inputs, horizon):
    return run(FAST, inputs, horizon)
"""


def build_standin(folder: Path, smoke: bool) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    (folder.parent / "standin.py").write_text(STANDIN)


# the paper's four, inline: the timed batches replay exactly these (no newest-point companions, no P3+ffill)
PAPER_FOUR = (
    "[{id: P0, operator: none}, {id: P1, operator: drop_to_zero}, {id: P2, operator: halve}, "
    "{id: P3, operator: missing}]"
)


def study(folder: Path, system: str, smoke: bool, start: str = "2022-01-01") -> Path:
    series = "[AAPL, MSFT]" if smoke else "[AAPL, MSFT, MRK, PFE, JPM, BAC]"
    path = folder / f"{system}.yaml"
    path.write_text(
        f"""name: gpu-{system}
data: {{source: embedded, series: {series}, start: {start}, end: 2022-12-31}}
windows: {{input_length: 80, horizon: 20, stride: {40 if smoke else 1}}}
forecast: {{cache: false, timeout: 600}}
perturbations: {PAPER_FOUR}
systems: [{SYSTEMS[system].replace("%d", "8" if smoke else "40")}]
"""
    )
    return path


class Busy:
    """How busy the device was over the block: nvidia-smi's mean utilization.gpu on a GPU; else the CPU seconds of
    the forecasting processes over the block's wall seconds (`engine`: the workers — this process's children, or
    the kept workers (alive at the end: `kept`) —; else this process)."""

    def __init__(self, engine: bool, kept: bool = False) -> None:
        self.engine, self.kept = engine, kept

    def __enter__(self) -> Busy:
        self.samples: list[float] = []
        self.running = shutil.which("nvidia-smi") is not None
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        self.cpu, self.wall = self._cpu(), time.perf_counter()
        return self

    def _cpu(self) -> float:
        import os

        if not self.engine:
            return time.process_time()
        if not self.kept:
            return os.times().children_user + os.times().children_system
        ticks = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                if "causalrate.forecast.kept" in stat.with_name("cmdline").read_text():
                    ticks += sum(int(t) for t in stat.read_text().rpartition(")")[2].split()[11:13])  # utime, stime
            except OSError:
                continue
        return ticks / os.sysconf("SC_CLK_TCK")

    def _sample(self) -> None:
        while self.running:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
            ).stdout.split()
            self.samples.append(float(out[0]) if out else np.nan)
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        self.running = False
        self.thread.join()
        self.cpu, self.wall = self._cpu() - self.cpu, time.perf_counter() - self.wall

    @property
    def busy(self) -> str:
        if self.samples:
            return f"{np.nanmean(self.samples):.0f} %"
        return f"{100 * self.cpu / self.wall:.0f} % CPU"


def measure(folder: Path, name: str, smoke: bool, keep: bool, start: str) -> list[tuple[str, ...]]:
    """The system's row (with --keep-loaded: a cold and a kept row): the engine's rates against the model alone's."""
    from causalrate.config import load_config
    from causalrate.forecast.metrics import METRICS
    from causalrate.forecast.plan import forecast_all, store_windows
    from causalrate.forecast.store import ForecastStore
    from causalrate.study import prepare

    config, base_dir = load_config(study(folder, name, smoke, start))
    prepared = prepare(config, base_dir=base_dir)
    engines = []
    for run in ("cold", "kept") if keep else ("",):
        store = ForecastStore.create(folder / f"{name}{run}.sqlite", metrics=METRICS.names())
        store_windows(store, prepared)
        executor = Clocked(1, keep=600.0 if keep else 0.0)
        with Busy(engine=True, kept=keep) as engine_busy:
            started = time.perf_counter()
            rows = forecast_all(prepared, store, cache=None, executor=executor)["made"]
            engine = time.perf_counter() - started
        # worker start and model load (overlapping planning); a kept worker's: the warm-up's answer
        startup = executor.startup.get(name, float("nan"))
        engines.append((run, engine, startup, executor.steady(), engine_busy.busy))
        assert len(store.forecasts()) == rows  # the same rows, forecast again by the model alone below
        store.close()
    if keep:
        import os

        from causalrate.forecast import kept

        kept.stop()
        with suppress(ChildProcessError):  # reap them now: their CPU seconds are not the next phase's children's
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
    system = prepared.systems[name]
    batch = batches(prepared)
    started = time.perf_counter()
    system.forecast(batch[0].row(0))  # loads the model (and forecasts one row)
    load = time.perf_counter() - started
    with Busy(engine=False) as alone_busy:
        started = time.perf_counter()
        for part in batch:
            system.forecast(part)
        alone = time.perf_counter() - started
    assert rows == sum(len(b.inputs) for b in batch)
    return [
        (
            f"{name} ({run})" if run else name,
            system.accelerator or "cpu",
            str(system.batch_size or prepared.config.forecast.batch_size),
            f"{rows:,}",
            f"{rows / engine:.1f}",
            f"{startup:.1f}",
            f"{steady:.1f}",
            busy,
            f"{rows / alone:.1f}",
            alone_busy.busy,
            f"{load:.1f}",
            f"{100 * steady * alone / rows:.0f} %",
            f"{100 * (alone + load) / engine:.0f} %",
        )
        for run, engine, startup, steady, busy in engines
    ]


class Clocked:
    """The local executor, noting when each batch's answer reached the main process: the engine's steady rate is
    the forecasts answered after the first batch over the time from the first answer to the last (worker start
    and model load excluded)."""

    def __init__(self, workers: int, keep: float) -> None:
        from causalrate.forecast.local import LocalExecutor

        self.executor = LocalExecutor(workers, keep=keep)
        self.answers: list[tuple[float, int]] = []  # (when, rows)

    def warm(self, job) -> None:
        self.executor.warm(job)

    def close(self) -> None:
        self.executor.close()

    @property
    def startup(self) -> dict[str, float]:
        return self.executor.startup

    def run(self, jobs, on_done, **kwargs) -> None:
        def clocked(job, result) -> None:
            on_done(job, result)
            self.answers.append((time.perf_counter(), job.size))

        self.executor.run(jobs, clocked, **kwargs)

    def steady(self) -> float:
        if len(self.answers) < 2:
            return float("nan")
        (first, _), (last, _) = self.answers[0], self.answers[-1]
        return sum(rows for _, rows in self.answers[1:]) / (last - first)


def batches(prepared) -> list:
    """The forecast stage's own inputs: every perturbation of every window, in the system's batch size."""
    from causalrate.forecast.impute import impute
    from causalrate.perturb.suite import perturbation_seeds
    from causalrate.seeding import row_seeds
    from causalrate.systems.base import Batch

    wd, ds, cfg = prepared.windows, prepared.dataset, prepared.config
    (name,) = prepared.systems
    system = prepared.systems[name]
    keys = [(ds.series[i].id, int(s)) for i, s in zip(wd.series_index, wd.start, strict=True)]
    out = []
    for p in prepared.suite:
        seen = p.apply(wd.inputs, wd.start, seeds=perturbation_seeds(cfg.seed, p.id, keys))
        if not system.accepts_nan:
            seen = impute(seen, cfg.forecast.imputation)
        seeds = row_seeds(cfg.seed, name, keys=[(*k, p.id) for k in keys])
        dates = p.apply_dates(wd.input_dates, wd.start)
        size = system.batch_size or cfg.forecast.batch_size
        for rows in np.array_split(np.arange(len(wd)), max(1, -(-len(wd) // size))):
            out.append(
                Batch(
                    inputs=seen[rows],
                    horizon=wd.horizon,
                    seeds=seeds[rows],
                    attributes=tuple(ds.series[wd.series_index[i]].attributes for i in rows),
                    input_dates=dates[rows],
                    truth_dates=wd.truth_dates[rows],
                )
            )
    return out


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", default=",".join(DEFAULT), help=f"comma-separated, of {', '.join(SYSTEMS)}")
    parser.add_argument("--keep-loaded", action="store_true", help="each engine phase twice, the second kept")
    parser.add_argument("--start", default="2022-01-01", help="the data's first day (earlier: more windows)")
    args = arguments(parser)
    chosen = [name for name in args.systems.split(",") if name]
    if unknown := sorted(set(chosen) - set(SYSTEMS)):
        raise SystemExit(f"--systems: unknown {unknown}; choose among {list(SYSTEMS)}")
    print(machine())
    builders = {
        "chronos": build_chronos,
        "chronos-bolt": build_bolt,
        "moment": build_moment,
        "phi3": build_phi3,
        "standin": build_standin,
        "standin-fast": build_standin,
    }
    folders = {
        "chronos": "chronos",
        "chronos-bolt": "bolt",
        "moment": "moment",
        "phi3": "phi3",
        "standin": "standin",
        "standin-fast": "standin",
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in chosen:
            builders[name](folder / "ckpt" / folders[name], args.smoke)
        rows = [row for name in chosen for row in measure(folder, name, args.smoke, args.keep_loaded, args.start)]
    head = (
        "system",
        "device",
        "batch",
        "forecasts",
        "engine fc/s",
        "start-up s",
        "engine steady fc/s",
        "busy",
        "model alone fc/s",
        "busy",
        "load s",
        "steady vs alone",
        "engine vs alone+load",
    )
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
