"""A system that runs in its own Python environment, seen by the engine as any other System.

EnvironmentSystem stands in for the real adapter: each process that forecasts starts one long-lived
worker (causalrate.systems.envworker) with the environment's interpreter and sends it the batches.
The worker's identity (settings, checkpoint, its libraries' versions) plus every package version of
the environment is the cache key's system part, so forecasts made with other versions are never reused.
A worker that fails to answer (a crash, or a timeout that interrupts the wait) is killed and started
afresh on the next call; its rows fail with the reason, like any failing forecast.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from causalrate.data.dataset import Dataset
from causalrate.errors import UserError
from causalrate.systems.base import Batch, Prediction, System
from causalrate.systems.environments import recipes, resolve, worker_environment
from causalrate.systems.envworker import PROTOCOL, read_message, write_message


class WorkerError(RuntimeError):
    """The environment's worker raised, crashed or spoke another protocol."""


class EnvironmentSystem(System):
    """Proxy for `inner` running under the interpreter of `environment`."""

    def __init__(
        self, inner: type[System], settings: BaseModel, *, base_dir: Path, environment: str, type_name: str
    ) -> None:
        super().__init__(settings, base_dir=base_dir)
        self.inner, self.environment, self.type_name = inner, environment, type_name
        self.Settings = inner.Settings
        self.version, self.libraries = inner.version, inner.libraries
        self._process: subprocess.Popen | None = None
        self._stderr: Any = None
        self._hello: dict[str, Any] | None = None
        self._identity: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:  # a pickled copy starts its own worker
        return {**self.__dict__, "_process": None, "_stderr": None}

    def __del__(self) -> None:
        self.close()

    def _fact(self, name: str) -> Any:
        """A fact of the real system: from the worker once it answered, else the adapter class's (settings win)."""
        if self._hello is not None:
            return self._hello["facts"][name]
        return getattr(self.settings, name, getattr(self.inner, name))

    family = property(lambda self: self._fact("family"))
    modality = property(lambda self: self._fact("modality"))
    architecture = property(lambda self: self._fact("architecture"))
    accepts_nan = property(lambda self: self._fact("accepts_nan"))
    wants_context = property(lambda self: self._fact("wants_context"))
    stochastic = property(lambda self: self._fact("stochastic"))
    nan_policy = property(lambda self: self.inner.nan_policy)  # class facts: the adapter's, no worker needed
    licence = property(lambda self: self.inner.licence)
    seasonal = property(lambda self: self._fact("seasonal"))
    quantile_levels = property(lambda self: self._fact("quantile_levels"))

    @property
    def accelerator(self) -> str | None:  # type: ignore[override]  # a per-instance fact (see System)
        """The device the real system runs on, as its worker resolves it (never initialising CUDA here)."""
        return self.hello()["facts"]["accelerator"]

    @property
    def batch_size(self) -> int | None:  # type: ignore[override]  # a per-instance fact (see System)
        return self.hello()["facts"]["batch_size"]

    def sources(self) -> tuple[Path, ...]:
        """The real system's (read from the same settings and folder)."""
        return self.inner.sources(self)

    def identity(self) -> dict[str, Any]:
        """The real system's identity plus the environment's Python and package versions (and relaxed pins)."""
        if self._identity is None:
            hello, inner = self.hello(), self.request({"op": "identity"})[0]["identity"]
            environment = {"python": hello["python"], "packages": hello["packages"], **self.recipe_facts()}
            self._identity = {**inner, "environment": environment}
        return self._identity

    def recipe_facts(self) -> dict[str, list[str]]:
        """How a managed environment departs from its packages' pins (`Recipe.facts`); {} for any other environment."""
        recipe = recipes().get(self.environment)
        return recipe.facts() if recipe is not None and (recipe.no_deps or recipe.relaxed) else {}

    def hello(self) -> dict[str, Any]:
        """The worker's handshake (starting one if none answered yet): its facts and package versions."""
        if self._hello is None:
            self._ensure_started()
        assert self._hello is not None  # set by the handshake
        return self._hello

    def check(self, dataset: Dataset) -> None:
        series = [{"id": s.id, "attributes": s.attributes} for s in dataset.series]
        arrays = {f"dates_{i}": s.dates for i, s in enumerate(dataset.series)}
        arrays |= {f"values_{i}": s.values for i, s in enumerate(dataset.series)}
        try:
            header = {"op": "check", "series": series, "source": dataset.source}
            self.request(header | {"frequency": dataset.frequency, "season": dataset.season}, arrays)
            self.identity()  # the main process needs it for the cache keys, then no worker of its own
        finally:
            self.close()  # forecasting workers start their own

    def forecast(self, batch: Batch) -> Prediction:
        images = batch.images or ()
        arrays = {
            "inputs": batch.inputs,
            "seeds": batch.seeds,
            "input_dates": batch.input_dates,
            "truth_dates": batch.truth_dates,
        } | {f"image_{i}": np.frombuffer(png, dtype=np.uint8) for i, png in enumerate(images)}
        header = {
            "op": "forecast",
            "horizon": batch.horizon,
            "frequency": batch.frequency,
            "season": batch.season,
            "attributes": list(batch.attributes),
            "images": None if batch.images is None else len(images),
        }
        reply, out = self.request(header, arrays)
        errors = reply["errors"]
        return Prediction(
            point=out["point"],
            samples=out.get("samples"),
            info=None if reply["info"] is None else tuple(reply["info"]),
            errors=None if errors is None else tuple(errors),
        )

    def call(self, function: Any, **kwargs: Any) -> Any:
        """function(system, **kwargs) run in the worker; numpy keyword arguments travel as arrays."""
        arrays = {k: v for k, v in kwargs.items() if isinstance(v, np.ndarray)}
        plain = {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items() if k not in arrays}
        header = {"op": "call", "module": function.__module__, "function": function.__name__, "kwargs": plain}
        return self.request(header, arrays)[0]["result"]

    def request(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> tuple[dict, dict]:
        """Send one request and wait for its reply; any interruption (timeout, crash) retires the worker."""
        process = self._ensure_started()
        assert process.stdin is not None and process.stdout is not None  # started with pipes
        try:
            write_message(process.stdin, header, arrays)
            reply, out = read_message(process.stdout)
        except (EOFError, BrokenPipeError):
            raise WorkerError(self._died()) from None
        except BaseException:
            self.close()  # its answer to this request must never be read as the next one's
            raise
        return _checked(reply, self.type_name), out

    def _ensure_started(self) -> subprocess.Popen:
        """The running worker, started (and greeted) if none runs."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        self.close()
        python = resolve(self.environment, base_dir=self.base_dir, system=self.type_name)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker; close() closes it
        self._owner = os.getpid()
        self._process = process = subprocess.Popen(
            [str(python), "-m", "causalrate.systems.envworker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=worker_environment(),
        )
        hello = {
            "op": "hello",
            "protocol": PROTOCOL,
            "module": self.inner.__module__,
            "type": self.type_name,
            "settings": self.settings.model_dump(mode="json"),
            "base_dir": str(self.base_dir),
        }
        try:
            reply = self.request(hello)[0]
            if reply.get("protocol") != PROTOCOL:
                theirs = reply.get("protocol")
                raise WorkerError(f"protocol version mismatch: the engine speaks {PROTOCOL}, the worker {theirs}")
        except WorkerError as exc:
            self.close()
            raise UserError(f"system type {self.type_name}: environment {self.environment!r}: {exc}") from None
        self._hello = reply
        return process

    def _died(self) -> str:
        """Why the worker stopped answering: its exit code and the end of its stderr."""
        process = self._process
        try:
            code = "none: it was stopped" if process is None else process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = "none: it closed its output"
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip()[-1500:]
        self.close()
        return f"the worker of environment {self.environment!r} died (exit code {code})" + (
            f"; its last output: {tail}" if tail else ""
        )

    def close(self) -> None:
        """Stop the worker (it also exits on its own when its input closes or this process dies)."""
        process, self._process = getattr(self, "_process", None), None
        if process is not None and self._owner == os.getpid():  # a forked copy leaves its parent's worker alone
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                stream.close()
        stderr, self._stderr = getattr(self, "_stderr", None), None
        if stderr is not None:
            stderr.close()


def _checked(reply: dict[str, Any], type_name: str) -> dict[str, Any]:
    if reply.get("ok"):
        return reply
    if "user_error" in reply:
        raise UserError(reply["user_error"])
    raise WorkerError(reply.get("error", "the worker answered without a result"))


def call_in_system(system: System, function: Any, **kwargs: Any) -> Any:
    """function(system, **kwargs), in the system's own environment when it has one."""
    if isinstance(system, EnvironmentSystem):
        return system.call(function, **kwargs)
    return function(system, **kwargs)
