"""What model-backed systems share: where a checkpoint lives, what it is, which device and dtype run it.

Model-backed systems are cheap to construct (the main process builds every system to
validate the study); weights are loaded lazily, once per worker process, on first forecast.
"""

from __future__ import annotations

import hashlib
import os
from functools import cached_property, lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from causalrate.data.dataset import Dataset
from causalrate.errors import UserError
from causalrate.systems.base import SYSTEMS, System

BIG_FILE = 64 * 2**20  # files above this size are fingerprinted by size, head and tail only
BATCH = {"accelerator": 256, "cpu": 32}  # default rows per forward pass: a GPU is only busy with full batches
HOW_IT_RUNS = ("device", "dtype", "batch_size")  # settings replaced in the cache key by what they resolve to


class CheckpointSettings(BaseModel):
    """Settings every model-backed system has."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model: str = Field(description="a local checkpoint folder (relative to the YAML file) or a Hugging Face id")
    device: str = Field("auto", pattern=r"^(auto|cpu|mps|cuda(:\d+)?)$", description="auto: CUDA when present")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto: bfloat16 on CUDA, float32 elsewhere"
    )
    batch_size: int | None = Field(
        None, ge=1, description="rows per forward pass; null: 256 on a GPU, 32 on the CPU (independent of the run's)"
    )


def require(module: str, extra: str, *, system: str, how: str | None = None) -> None:
    """UserError (exit 2) naming the extra to install when an optional library is missing."""
    if not installed(module):
        raise UserError(
            f"system type {system} needs the Python package {module!r}: "
            + (how or f"pip install 'causalrate[{extra}]'")
        )


def installed(module: str) -> bool:
    """Whether `module` can be imported; a dotted name whose parent package is absent is not (no raise)."""
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def locate(model: str, *, base_dir: Path, system: str, download: bool) -> Path:
    """The checkpoint's local folder: a folder relative to the YAML file, or a Hugging Face id in the hub cache.

    The main process may download (download=True, once, before forecasting); workers never do.
    """
    local = (base_dir / model).expanduser()
    if local.is_dir():
        return local.resolve()
    if local.exists() or model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise UserError(f"system type {system}: model: {local} is not a checkpoint folder")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=model, local_files_only=not download or _offline()))
    except Exception as exc:
        hint = "" if download and not _offline() else " (offline: put the checkpoint in a local folder)"
        raise UserError(
            f"system type {system}: model: no checkpoint folder {local}, and {model!r} is not a "
            f"downloadable Hugging Face id{hint} ({type(exc).__name__})"
        ) from None


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false")


def folder_digest(folder: Path) -> str:
    """A content hash of a folder (a checkpoint, a trained model): cached forecasts are reused only for the same
    weights.

    Small files are hashed whole; big weight files by their size, first and last MiB, which
    tells any two real checkpoints apart without reading gigabytes.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}|{size}|".encode())
        with path.open("rb") as handle:
            if size <= BIG_FILE:
                digest.update(handle.read())
            else:
                digest.update(handle.read(2**20))
                handle.seek(-(2**20), os.SEEK_END)
                digest.update(handle.read())
    return digest.hexdigest()


Stats = tuple[tuple[str, int, int], ...]  # (relative path, size, mtime_ns) per file


def file_stats(path: Path) -> Stats:
    """(relative path, size, mtime_ns) of a file, or of every file in a folder (the files `folder_digest` reads):
    cheap to take, and changed by any rewrite."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts)
    stats = [(f.relative_to(path).as_posix() if f != path else f.name, f.stat()) for f in files]
    return tuple((name, st.st_size, st.st_mtime_ns) for name, st in stats)


def fingerprint(folder: Path) -> str:
    """A checkpoint's `folder_digest`, hashed once per state of its files: weights rewritten in place (another
    size or mtime) are hashed again, in a long-lived worker too."""
    return _digest(folder.resolve(), file_stats(folder))


@lru_cache(maxsize=64)
def _digest(folder: Path, stats: Stats) -> str:
    """Keyed by the folder and its files' stats, which decide what folder_digest reads."""
    return folder_digest(folder)


def cuda_present() -> bool:
    """Whether a CUDA device is present, asked through NVML so this process does not initialise CUDA.

    A process that has initialised CUDA cannot hand it to forked children, and holds a context on
    the device for nothing; the main process only plans, the workers (spawned) run the models.
    """
    if find_spec("torch") is None:
        return False
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # torch then asks NVML, not the CUDA runtime
    import torch

    return torch.cuda.device_count() > 0


def torch_device(setting: str) -> str:
    """The device a `device:` setting resolves to (auto: CUDA, else Apple's MPS, else CPU), without touching CUDA."""
    if setting != "auto":
        return setting
    if cuda_present():
        return "cuda"
    import torch

    return "mps" if torch.backends.mps.is_available() else "cpu"


def dtype_name(setting: str, device: str) -> str:
    """The dtype a `dtype:` setting resolves to on `device` (auto: bfloat16 on CUDA, float32 elsewhere)."""
    if setting == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    return setting


class CheckpointSystem(System):
    """Base of systems backed by a checkpoint folder: validation, identity, lazy loading, device."""

    Settings: type[BaseModel] = CheckpointSettings
    settings: CheckpointSettings
    package: ClassVar[tuple[str, str]]  # (module to import, causalrate extra that installs it)
    # a property in a subclass that decides it per instance (zoo: `# type: ignore[override]`)
    install: ClassVar[str | None] = None  # how to install it, when `pip install 'causalrate[extra]'` is not enough
    t5_family: ClassVar[bool] = False  # T5 activations overflow float16: that dtype is refused
    horizon_shaped: ClassVar[bool] = False  # its model is loaded per horizon (`loaded(horizon)`)
    uses_cores = True

    def __init__(self, settings: CheckpointSettings, *, base_dir: Path) -> None:
        super().__init__(settings, base_dir=base_dir)
        self._models: dict[int | None, Any] = {}

    @property
    def type_name(self) -> str:
        return SYSTEMS.name_of(type(self))

    def check(self, dataset: Dataset) -> None:
        require(*self.package, system=self.type_name, how=self.install)
        if self.t5_family and self.settings.dtype == "float16":
            raise UserError(
                f"system type {self.type_name}: dtype: float16 overflows in T5-based models (its activations "
                "exceed float16's range and become inf/NaN); use bfloat16 or float32 (auto: bfloat16 on CUDA)"
            )
        locate(self.settings.model, base_dir=self.base_dir, system=self.type_name, download=True)

    def folder(self) -> Path:
        return locate(self.settings.model, base_dir=self.base_dir, system=self.type_name, download=False)

    @cached_property
    def device(self) -> str:
        return torch_device(self.settings.device)

    @cached_property
    def dtype(self) -> str:
        return dtype_name(self.settings.dtype, self.device)

    @property
    def batch_size(self) -> int:  # type: ignore[override]  # a per-instance fact (see System)
        """Rows per forward pass: the system's own, whatever the run's forecast.batch_size."""
        return self.settings.batch_size or BATCH["cpu" if self.accelerator is None else "accelerator"]

    def identity(self) -> dict[str, Any]:
        """The weights' hash and the resolved device type and dtype (a bfloat16 GPU forecast is not a float32 one).

        The batch size stays out: a row's forecast does not depend on the batch it is in.
        """
        identity = super().identity()
        settings = {k: v for k, v in identity["settings"].items() if k not in HOW_IT_RUNS}
        resolved = {"device_type": self.device.split(":")[0], "dtype": self.dtype}
        return {**identity, "settings": settings, "checkpoint": fingerprint(self.folder()), "resolved": resolved}

    @property
    def accelerator(self) -> str | None:  # type: ignore[override]  # a per-instance fact (see System)
        return None if self.device == "cpu" else self.device

    def loaded(self, horizon: int | None = None) -> Any:
        """The model (for this horizon, if its shape depends on it), loaded on first use in this process."""
        if horizon not in self._models:
            import torch

            dtype = getattr(torch, self.dtype)
            self._models[horizon] = self.load(self.folder(), device=self.device, dtype=dtype, horizon=horizon)
        return self._models[horizon]

    def sources(self) -> tuple[Path, ...]:
        local = (self.base_dir / self.settings.model).expanduser()  # a hub id's snapshot never changes
        return (local,) if local.is_dir() else ()

    def warm(self, horizon: int) -> None:
        self.loaded(horizon if self.horizon_shaped else None)

    def load(self, folder: Path, *, device: str, dtype: Any, horizon: int | None) -> Any:
        raise NotImplementedError
