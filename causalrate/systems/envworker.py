"""The worker that runs one system inside its own Python environment: the child side of the protocol.

EnvironmentSystem starts it as ``<env python> -m causalrate.systems.envworker`` with causalrate on
PYTHONPATH (not installed there). It needs only numpy, pydantic and the adapter's own packages: it
imports the adapter's module and causalrate's light core modules (systems, errors, data.dataset),
never pandas, dowhy or the engine.

Protocol (version PROTOCOL, checked on the first message): each message is a little-endian
(uint32 header length, uint64 payload length), a JSON header, then the payload, an uncompressed npz
of the message's arrays (empty when there are none). The engine sends one request at a time and
reads one reply; replies carry ``ok`` and, on failure, ``error`` (an exception) or ``user_error``.

    hello    {protocol, module, type, settings, base_dir} → {protocol, facts, packages, python}
    identity {} → {identity} (asked after check: a system's identity may need what check verifies)
    check    {series: [{id, attributes}], source, frequency, season} + arrays dates_i, values_i → {}
    forecast {horizon, frequency, season, attributes, images} + inputs, seeds, input_dates, truth_dates, image_i
             → point, samples
    call     {module, function, kwargs} + arrays (extra keyword arguments) → {result}
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
from typing import IO, TYPE_CHECKING, Any, cast

import numpy as np

if TYPE_CHECKING:
    from causalrate.systems.base import System

PROTOCOL = 1
_FRAME = struct.Struct("<IQ")
_FACTS = (
    "accepts_nan",
    "accelerator",
    "batch_size",
    "wants_context",
    "stochastic",
    "seasonal",
    "quantile_levels",
    "modality",
    "family",
    "architecture",
)
_SKIPPED = {"pip", "setuptools", "wheel"}  # packaging tools never change a forecast


def write_message(stream: IO[bytes], header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    payload = b""
    if arrays:
        buffer = io.BytesIO()
        np.savez(buffer, **cast(dict[str, Any], arrays))  # names → arrays
        payload = buffer.getvalue()
    head = json.dumps(header).encode()
    stream.write(_FRAME.pack(len(head), len(payload)) + head + payload)
    stream.flush()


def read_message(stream: IO[bytes]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One message; EOFError when the other side closed the stream."""
    head_size, payload_size = _FRAME.unpack(_read_exactly(stream, _FRAME.size))
    header = json.loads(_read_exactly(stream, head_size))
    arrays = {}
    if payload_size:
        with np.load(io.BytesIO(_read_exactly(stream, payload_size)), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    return header, arrays


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the stream closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def installed_packages() -> dict[str, str]:
    """Every distribution of this environment with its version (the cache key's environment part)."""
    from importlib.metadata import distributions

    found = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in distributions() if d.metadata["Name"]}
    return {name: found[name] for name in sorted(found) if name not in _SKIPPED}


class Worker:
    """Holds the one system this process runs and answers the engine's requests."""

    def __init__(self) -> None:
        self.system: System | None = None

    def hello(self, header: dict, arrays: dict) -> tuple[dict, None]:
        if header.get("protocol") != PROTOCOL:
            raise RuntimeError(
                f"protocol version mismatch: the engine speaks {header.get('protocol')}, this worker {PROTOCOL}; "
                "use the same causalrate on both sides"
            )
        import importlib
        from pathlib import Path

        from causalrate.systems.base import SYSTEMS

        importlib.import_module(header["module"])
        cls = SYSTEMS.get(header["type"])
        self.system = cls(cls.Settings.model_validate(header["settings"]), base_dir=Path(header["base_dir"]))
        facts = {name: getattr(self.system, name) for name in _FACTS}
        python = ".".join(map(str, sys.version_info[:3]))
        return {
            "protocol": PROTOCOL,
            "facts": facts,
            "packages": installed_packages(),
            "python": python,
        }, None

    def identity(self, header: dict, arrays: dict) -> tuple[dict, None]:
        return {"identity": self.loaded().identity()}, None

    def check(self, header: dict, arrays: dict) -> tuple[dict, None]:
        from causalrate.data.dataset import Dataset, Series

        series = tuple(
            Series(id=s["id"], dates=arrays[f"dates_{i}"], values=arrays[f"values_{i}"], attributes=s["attributes"])
            for i, s in enumerate(header["series"])
        )
        self.loaded().check(
            Dataset(series=series, source=header["source"], frequency=header["frequency"], season=header["season"])
        )
        return {}, None

    def loaded(self) -> System:
        """The system the `load` request built (a request before it is the engine's bug)."""
        if self.system is None:
            raise RuntimeError("no system loaded: the engine sends load first")
        return self.system

    def forecast(self, header: dict, arrays: dict) -> tuple[dict, dict]:
        from causalrate.systems.base import Batch, Prediction

        count = header["images"]
        images = None if count is None else tuple(arrays[f"image_{i}"].tobytes() for i in range(count))
        batch = Batch(
            inputs=arrays["inputs"],
            horizon=header["horizon"],
            frequency=header["frequency"],
            season=header["season"],
            seeds=arrays["seeds"],
            attributes=tuple(header["attributes"]),
            input_dates=arrays["input_dates"],
            truth_dates=arrays["truth_dates"],
            images=images,
        )
        out = Prediction.of(self.loaded().forecast(batch), rows=batch.inputs.shape[0], horizon=batch.horizon)
        reply = {"info": out.info, "errors": out.errors}
        return reply, {"point": out.point} | ({} if out.samples is None else {"samples": out.samples})

    def call(self, header: dict, arrays: dict) -> tuple[dict, None]:
        import importlib

        function = getattr(importlib.import_module(header["module"]), header["function"])
        return {"result": function(self.system, **header["kwargs"], **arrays)}, None

    def answer(self, header: dict, arrays: dict) -> tuple[dict, dict | None]:
        from causalrate.errors import UserError

        op = header.get("op")
        if op not in ("hello", "identity", "check", "forecast", "call") or (op != "hello" and self.system is None):
            return {"ok": False, "error": f"RuntimeError: unexpected request {op!r}"}, None
        try:
            reply, out = getattr(self, op)(header, arrays)
        except UserError as exc:
            return {"ok": False, "user_error": str(exc)}, None
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:4000]}, None
        return {"ok": True, **reply}, out


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the engine process that started it dies."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if str(os.getppid()) != os.environ.get("CAUSALRATE_ENGINE_PID", str(os.getppid())):
        sys.exit(1)  # the engine died before prctl took effect


def main() -> None:
    _die_with_parent()
    channel = os.fdopen(os.dup(1), "wb")  # the protocol's; stray prints of the model's libraries go to stderr
    os.dup2(2, 1)
    worker = Worker()
    while True:
        try:
            header, arrays = read_message(sys.stdin.buffer)
        except EOFError:
            return
        write_message(channel, *worker.answer(header, arrays))


if __name__ == "__main__":
    main()
