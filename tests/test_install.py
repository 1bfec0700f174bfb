"""A regular (non-editable) install runs a study from any folder, and the sdist ships the method document.

The package is built from a copy of the checkout (sdist and wheel through setuptools' PEP 517 hooks,
without build isolation, so nothing is downloaded), the wheel is installed into a fresh virtual
environment that sees this environment's dependencies through a .pth file (not its own copy of the
package), and `causalrate assess` runs from a temporary folder that holds only the study YAML.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STUDY = ROOT / "tests" / "fixtures" / "small-study.yaml"  # four series, a few windows


def _copy_checkout(dest: Path) -> None:
    """The files a user's clone holds: tracked and untracked-but-not-ignored ones."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file() and not name.startswith("ratings/quickstart/"):  # the reference run is not needed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(src.read_bytes())


def _build(source: Path, dist: Path, hook: str) -> Path:
    """Run one PEP 517 hook of setuptools (each in its own process, as a build frontend does)."""
    code = f"import sys; from setuptools import build_meta as b; print('BUILT', b.{hook}(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", code, str(dist)], cwd=source, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return dist / out.stdout.rsplit("BUILT", 1)[1].strip()


def _dependency_paths() -> list[str]:
    """This interpreter's import path minus anything that holds the causalrate source (a venv inside the
    checkout, as CI's, stays: its site-packages holds the dependencies, not causalrate)."""
    keep = []
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if path.is_dir() and not (path / "causalrate").exists() and path != ROOT:
            keep.append(str(path))
    return keep


@pytest.mark.e2e
def test_wheel_installs_and_runs_a_study_from_another_folder(tmp_path):
    source, dist, work = tmp_path / "src", tmp_path / "dist", tmp_path / "work"
    for folder in (source, dist, work):
        folder.mkdir()
    _copy_checkout(source)
    sdist, wheel = _build(source, dist, "build_sdist"), _build(source, dist, "build_wheel")
    with tarfile.open(sdist) as tar:
        shipped = {Path(*Path(n).parts[1:]).as_posix() for n in tar.getnames()}
    assert {"docs/method.md", "README.md", "perturbations/paper.yaml"} <= shipped
    with zipfile.ZipFile(wheel) as whl:  # the published reference forecasts are package data
        assert {"causalrate/forecast/published/quickstart.npz"} <= set(whl.namelist())

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    Path(site, "_causalrate_test_deps.pth").write_text("\n".join(_dependency_paths()) + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"]
    done = subprocess.run([*install, str(wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    env = {**os.environ, "CAUSALRATE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": ""}
    where = subprocess.run(
        [python, "-c", "import causalrate; print(causalrate.__file__)"],
        cwd=work, env=env, check=True, capture_output=True, text=True,
    ).stdout
    assert where.startswith(site), f"imported {where} instead of the installed wheel in {site}"

    (work / "study.yaml").write_text(STUDY.read_text())
    run = subprocess.run(
        [venv / "bin" / "causalrate", "assess", "study.yaml", "--no-cards", "--workers", "1"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert (work / "runs" / "installed" / "ratings.json").is_file()


def test_every_python_package_is_in_the_wheel():
    """Each folder of causalrate/ with an __init__.py is listed in pyproject's packages: a new stage package left
    out installs fine in editable mode and fails only from a regular install (as causalrate.uncertainty once did)."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "causalrate").rglob("__init__.py")}
    assert found - listed == set(), f"add to [tool.setuptools] packages in pyproject.toml: {sorted(found - listed)}"

