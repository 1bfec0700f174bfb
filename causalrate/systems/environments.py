"""Python environments for systems whose packages cannot live beside the engine's.

A system runs in another environment when its spec names ``environment:`` (a managed
environment's name, a virtual-environment folder or a Python interpreter) or, without one, when
its type declares ``environment_requirements``: it then uses the managed environment named after
the type (or the one it names in ``environment_name``, another type's with the same recipe). A
managed environment is a virtual environment of this Python under envs_dir(), in a folder keyed
by a hash of its requirements and the Python version, built once by
``causalrate env create NAME``; changing a recipe makes a new folder, never a stale reuse.

A recipe may install packages ``--no-deps`` when their declared pins cannot be met here (the only
CPU torch at hand is newer than they allow): it then lists their runtime dependencies itself and
states each pin it relaxes; pip's own check of the result is recorded beside the resolved versions.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import causalrate
from causalrate.errors import UserError
from causalrate.paths import cache_root

ENGINE_REQUIREMENTS = ("numpy", "pydantic>=2.6")  # what the worker itself imports, besides the adapter's packages
MARKER = "causalrate-env.json"  # written last: a folder without it is an interrupted build


def envs_dir() -> Path:
    """$CAUSALRATE_ENVS_DIR, else the folder `envs` beside the forecast cache."""
    folder = os.environ.get("CAUSALRATE_ENVS_DIR")
    return Path(folder).expanduser() if folder else cache_root() / "envs"


@dataclass(frozen=True)
class Recipe:
    """A managed environment: its name (the system type's), what pip installs, and the pins it relaxes.

    `requirements` are installed with their dependencies, then `no_deps` without theirs;
    `relaxed` says which of the latter's declared pins do not hold ("torch<2.5 → 2.13.0").
    """

    name: str
    requirements: tuple[str, ...]
    no_deps: tuple[str, ...] = ()
    relaxed: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        python = f"{sys.version_info[0]}.{sys.version_info[1]}"
        recipe = {"python": python, "requirements": [*ENGINE_REQUIREMENTS, *self.requirements]}
        if self.no_deps or self.relaxed:  # absent otherwise, so the folders of unchanged recipes keep their names
            recipe |= {"no_deps": list(self.no_deps), "relaxed": list(self.relaxed)}
        return hashlib.sha256(json.dumps(recipe).encode()).hexdigest()[:12]

    def facts(self) -> dict[str, list[str]]:
        """What a forecast's cache key and a card record of how this environment departs from the packages' pins."""
        return {"no_deps": list(self.no_deps), "pins_relaxed": list(self.relaxed)}

    @property
    def folder(self) -> Path:
        return envs_dir() / f"{self.name}-{self.key}"

    @property
    def built(self) -> bool:
        return (self.folder / MARKER).is_file()

    def packages(self) -> dict[str, str]:
        """The resolved versions recorded when it was built."""
        return self.record().get("packages", {})

    def record(self) -> dict:
        """What was written when it was built: resolved versions and `pip check`'s complaints."""
        return json.loads((self.folder / MARKER).read_text()) if self.built else {}


def recipes() -> dict[str, Recipe]:
    """Every registered system type that declares its own environment."""
    from causalrate.systems import SYSTEMS

    return {
        name: Recipe(name, tuple(cls.environment_requirements), tuple(cls.environment_no_deps), tuple(cls.pins_relaxed))
        for name, cls in SYSTEMS.items()
        if cls.environment_requirements and cls.environment_name in (None, name)  # a shared one is listed once
    }


def python_of(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def resolve(environment: str, *, base_dir: Path, system: str) -> Path:
    """The Python interpreter of `environment`; UserError naming the command that builds a missing one."""
    known = recipes()
    if environment in known:
        recipe = known[environment]
        if not recipe.built:
            raise UserError(
                f"system {system}: environment {environment!r} is not built here (expected in {recipe.folder}); "
                f"create it with: causalrate env create {environment}"
            )
        return python_of(recipe.folder)
    path = (base_dir / environment).expanduser().absolute()  # not resolve(): a venv's python is a symlink
    if path.is_dir():
        path = python_of(path)
    if path.is_file() and os.access(path, os.X_OK):
        return path
    raise UserError(
        f"system {system}: environment: {environment!r} is neither a managed environment "
        f"({', '.join(known) or 'none registered'}) nor a Python interpreter or virtual-environment folder "
        f"(no interpreter at {path})"
    )


def engine_path() -> Path:
    """A folder holding only a link to the causalrate package: the worker's PYTHONPATH.

    Putting the engine's site-packages on the path instead would shadow the environment's own
    numpy, torch and transformers with the engine's.
    """
    package = Path(causalrate.__file__).parent
    folder = envs_dir() / ".engine" / hashlib.sha256(str(package).encode()).hexdigest()[:12]
    link = folder / "causalrate"
    if not link.is_symlink():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            link.symlink_to(package, target_is_directory=True)
    return folder


def worker_environment() -> dict[str, str]:
    """os.environ for a worker: causalrate alone on its path (not the working directory), this process as its parent."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(
        PYTHONPATH=str(engine_path()),
        PYTHONSAFEPATH="1",  # the working directory's packages would shadow the environment's
        PYTHONNOUSERSITE="1",
        CAUSALRATE_ENGINE_PID=str(os.getpid()),
    )
    return env


def create(name: str, *, log: Callable[[str], None] = print) -> tuple[Recipe, bool]:
    """Build managed environment `name` unless it is built; returns (recipe, whether it was built now).

    A venv of this Python, then one `pip install` of the engine's and the recipe's requirements
    (pip's own wheel cache is used; no byte-compiling), then one `pip install --no-deps` of the
    recipe's `no_deps`.
    A lock keeps two concurrent creations from racing.
    """
    known = recipes()
    if name not in known:
        raise UserError(f"causalrate env create: unknown environment {name!r}; known: {', '.join(known) or 'none'}")
    recipe = known[name]
    if recipe.built:
        return recipe, False
    recipe.folder.parent.mkdir(parents=True, exist_ok=True)
    with open(recipe.folder.with_name(recipe.folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if recipe.built:
            return recipe, False
        if recipe.folder.exists():
            shutil.rmtree(recipe.folder)  # an interrupted build
        log(f"creating environment {name} in {recipe.folder}")
        python = python_of(recipe.folder)
        pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
        _run(name, [sys.executable, "-m", "venv", str(recipe.folder)])
        _run(
            name,
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-compile",  # torch alone is thousands of modules; Python compiles what a worker imports
                *ENGINE_REQUIREMENTS,
                *recipe.requirements,
            ],
        )
        if recipe.no_deps:
            _run(name, [*pip, "install", "--no-compile", "--no-deps", *recipe.no_deps])
        complaints = _run(name, [*pip, "check"], check=False).splitlines()
        listing = _run(
            name,
            [
                str(python),
                "-c",
                "import json, causalrate.systems.envworker as w; print(json.dumps(w.installed_packages()))",
            ],
        )
        marker = {
            "name": name,
            "requirements": list(recipe.requirements),
            **recipe.facts(),
            "pip_check": [line for line in complaints if line.strip() and not line.startswith("No broken")],
            "packages": json.loads(listing),
        }
        (recipe.folder / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n")
    return recipe, True


def _run(name: str, command: list[str], *, check: bool = True) -> str:
    done = subprocess.run(command, capture_output=True, text=True, env=worker_environment())
    if check and done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-3000:]
        what = " ".join(command[:4])
        raise UserError(f"causalrate env create {name}: {what} … failed (exit {done.returncode}):\n{tail}")
    return done.stdout
