"""Systems in their own Python environment: the worker protocol, failures, timeouts, determinism.

The protocol tests run a `python` system under an existing interpreter (this one, named by path),
so they need no build; the MOMENT tests use the managed environment `causalrate env create moment`
builds (.ci/run builds it once; elsewhere they skip unless CAUSALRATE_REQUIRE_ENVS=1).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from causalrate.errors import UserError
from causalrate.forecast.runner import Job, run_job
from causalrate.systems import envsystem
from causalrate.systems.base import Batch
from causalrate.systems.environments import create, recipes
from causalrate.systems.spec import SystemSpec, build_system
from tests.conftest import make_synthetic_study

FUNCTIONS = '''
import os, sys, time
import numpy as np

def last(inputs, horizon):
    return np.repeat(inputs[:, -1:], horizon, axis=1)

def where_am_i(inputs, horizon):
    """Forecasts the worker's process id: proves the call ran in another process."""
    return np.full((len(inputs), horizon), float(os.getpid()))

def crash(inputs, horizon):
    print("about to crash", file=sys.stderr)
    os._exit(7)

def hang_on_negative(inputs, horizon):
    if (inputs < 0).any():
        time.sleep(60)
    return last(inputs, horizon)

def refuse_big(inputs, horizon):
    if (inputs > 500).any():
        raise ValueError("too big")
    return last(inputs, horizon)
'''


def python_system(folder: Path, function: str, environment: str | None = sys.executable):
    (folder / "envfunctions.py").write_text(FUNCTIONS)
    spec = {"name": function, "type": "python", "function": f"envfunctions.py:{function}"}
    if environment is not None:
        spec["environment"] = environment
    return build_system(SystemSpec.model_validate(spec), base_dir=folder)


def job(system, inputs: np.ndarray, *, timeout: float = 60.0) -> Job:
    b, n = inputs.shape
    dates = np.tile(np.arange(n).astype("datetime64[D]"), (b, 1))
    batch = Batch(
        inputs=inputs,
        horizon=2,
        seeds=np.arange(b, dtype=np.uint64),
        attributes=tuple({"industry": "Alpha"} for _ in range(b)),
        input_dates=dates,
        truth_dates=dates[:, :2],
    )
    spec = {"name": "s", "type": "python", **system.settings.model_dump(), "environment": system.environment}
    return Job("s", "P0", np.arange(b), spec, system.base_dir, timeout, batch)


def test_adapter_modules_import_with_numpy_and_pydantic_only():
    """The worker imports causalrate's adapters without the engine's heavy packages (they are not in its env)."""
    blocked = ["pandas", "scipy", "sklearn", "dowhy", "statsmodels", "matplotlib", "yaml", "tqdm", "torch"]
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {blocked!r}:
                    raise ImportError("blocked " + name)
        sys.meta_path.insert(0, Block())
        import causalrate.systems.envworker, causalrate.systems.foundation, causalrate.systems
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_forecasts_travel_through_the_worker(tmp_path):
    system = python_system(tmp_path, "where_am_i")
    inputs = np.arange(12.0).reshape(3, 4)
    outcome = run_job(job(system, inputs))
    assert outcome.errors == [None] * 3
    pid = outcome.forecasts[0, 0]
    assert pid != os.getpid() and (outcome.forecasts == pid).all()
    identity = system.identity()
    assert identity["type"] == "PythonFunction" and "source" in identity  # the adapter's own identity
    assert identity["environment"]["packages"]["numpy"] == np.__version__  # plus the environment's versions
    last = run_job(job(python_system(tmp_path, "last"), inputs))
    np.testing.assert_array_equal(last.forecasts, np.repeat(inputs[:, -1:], 2, axis=1))


def test_a_row_error_fails_only_that_row_with_the_reason(tmp_path):
    inputs = np.array([[1.0, 2.0], [600.0, 700.0], [3.0, 4.0]])
    outcome = run_job(job(python_system(tmp_path, "refuse_big"), inputs))
    assert outcome.errors[0] is None and outcome.errors[2] is None
    assert "ValueError: too big" in outcome.errors[1]
    assert np.isnan(outcome.forecasts[1]).all() and np.isfinite(outcome.forecasts[[0, 2]]).all()


def test_a_crashing_worker_fails_the_rows_with_its_exit_code_and_output(tmp_path):
    started = time.monotonic()
    outcome = run_job(job(python_system(tmp_path, "crash"), np.ones((2, 3))))
    assert time.monotonic() - started < 60  # no hang
    for error in outcome.errors:
        assert "died (exit code 7)" in error and "about to crash" in error


def test_the_timeout_is_honoured_and_the_next_batch_gets_a_fresh_worker(tmp_path):
    system = python_system(tmp_path, "hang_on_negative")
    started = time.monotonic()
    outcome = run_job(job(system, -np.ones((2, 3)), timeout=2))
    assert time.monotonic() - started < 30
    assert outcome.errors == ["timeout: no forecast within 2 s"] * 2
    again = run_job(job(system, np.ones((2, 3)), timeout=30))  # same process, same (cached) system
    assert again.errors == [None, None]


def test_a_protocol_version_mismatch_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(envsystem, "PROTOCOL", 99)
    system = python_system(tmp_path, "last")
    with pytest.raises(UserError, match="protocol version mismatch: the engine speaks 99, this worker 1"):
        system.identity()


def test_a_bad_environment_is_a_user_error(tmp_path, cli):
    with pytest.raises(UserError, match="neither a managed environment"):
        python_system(tmp_path, "last", environment="no/such/venv").identity()
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'no numpy here' >&2\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(UserError, match=r"died \(exit code 3\).*no numpy here"):
        python_system(tmp_path, "last", environment=str(broken)).identity()
    study = make_synthetic_study(tmp_path, "- {name: naive, type: naive, environment: [a, b]}")
    code, _, err = cli("assess", study, "--out", tmp_path / "run", "--no-cards")
    assert code == 2 and "environment: expected a managed environment's name" in err


def test_a_missing_managed_environment_says_how_to_create_it(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("CAUSALRATE_ENVS_DIR", str(tmp_path / "no-envs"))
    (tmp_path / "moment").mkdir()
    study = make_synthetic_study(
        tmp_path,
        """
        - {name: naive, type: naive}
        - {name: moment, type: moment, model: moment, untrained_head: true}
        """,
    )
    code, _, err = cli("assess", study, "--out", tmp_path / "run", "--no-cards")
    assert code == 2
    assert "environment 'moment' is not built here" in err and "causalrate env create moment" in err


def assess_twice(study: Path, folder: Path, monkeypatch, cli) -> list[bytes]:
    """ratings.json of two runs of `study`, each forecasting afresh (its own forecast cache)."""
    docs = []
    for run in ("a", "b"):
        monkeypatch.setenv("CAUSALRATE_CACHE_DIR", str(folder / f"cache-{run}"))
        code, _, err = cli("assess", study, "--out", folder / run, "--no-cards", "--workers", "2")
        assert code == 0, err
        docs.append((folder / run / "ratings.json").read_bytes())
    return docs


def test_a_mixed_study_is_byte_identical_on_rerun(tmp_path, monkeypatch, cli):
    """Engine-environment and own-environment systems in one study; two fresh runs, same ratings.json."""
    (tmp_path / "envfunctions.py").write_text(FUNCTIONS)
    study = make_synthetic_study(
        tmp_path,
        f"""
        - {{name: naive, type: naive}}
        - {{name: median, type: python, function: "planted.py:window_median"}}
        - {{name: last, type: python, function: "envfunctions.py:last", environment: {sys.executable}}}
        """,
        draws=4,
        stride=4,
    )
    first, second = assess_twice(study, tmp_path, monkeypatch, cli)
    assert first == second
    assert b'"environment"' in first  # the study's own record of where the system ran


# --- the managed MOMENT environment ---------------------------------------------------------------


def test_env_create_is_idempotent(moment_python, cli):
    marker = recipes()["moment"].folder / "causalrate-env.json"
    before = marker.stat().st_mtime_ns
    _, built = create("moment", log=print)
    assert not built and marker.stat().st_mtime_ns == before
    code, out, _ = cli("env", "create", "moment")
    assert code == 0 and "already built" in out
    code, out, _ = cli("env", "list")
    assert "built at" in out and "momentfm==0.1.4" in out and "numpy==1.25.2" in out
    code, _, err = cli("env", "create", "no-such-env")
    assert code == 2 and "unknown environment 'no-such-env'" in err


def test_moment_runs_on_its_pins_beside_the_cores_numpy_2(moment_python, tmp_path):
    """momentfm's pins hold in its environment, and the cache key carries those versions."""
    from tests import tiny_models

    tiny_models.build_moment_in(moment_python, tmp_path / "moment", horizon=2)
    spec = {"name": "m", "type": "moment", "model": "moment", "untrained_head": True, "seq_len": 64}
    system = build_system(SystemSpec.model_validate(spec), base_dir=tmp_path)
    packages = system.identity()["environment"]["packages"]
    assert packages["numpy"] == "1.25.2" and packages["transformers"] == "4.33.3" and packages["momentfm"] == "0.1.4"
    assert np.__version__.startswith("2.")
    assert system.identity()["libraries"]["momentfm"] == "0.1.4"


def test_a_study_with_moment_in_its_environment_is_byte_identical_on_rerun(moment_python, tmp_path, monkeypatch, cli):
    from tests import tiny_models

    tiny_models.build_moment_in(moment_python, tmp_path / "moment", horizon=10)
    study = make_synthetic_study(
        tmp_path,
        """
        - {name: naive, type: naive}
        - {name: moment, type: moment, model: moment, head: moment-head.safetensors, seq_len: 64}
        """,
        draws=4,
        stride=8,
    )
    first, second = assess_twice(study, tmp_path, monkeypatch, cli)
    assert first == second
    with sqlite3.connect(tmp_path / "a" / "forecasts.sqlite") as conn:
        errors = [e for (e,) in conn.execute("SELECT error FROM forecasts WHERE system = 'moment'")]
    assert errors and all(e is None for e in errors)


def test_a_recipe_that_relaxes_pins_is_keyed_by_them_and_a_plain_one_keeps_its_folder():
    """--no-deps packages and relaxed pins enter the key; a recipe without them hashes as before they existed."""
    import hashlib
    import json
    import sys

    from causalrate.systems.environments import ENGINE_REQUIREMENTS, Recipe

    plain = Recipe("x", ("a==1",))
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    text = json.dumps({"python": python, "requirements": [*ENGINE_REQUIREMENTS, "a==1"]})
    assert plain.key == hashlib.sha256(text.encode()).hexdigest()[:12]
    no_deps = Recipe("x", ("a==1",), no_deps=("b==2",))
    relaxed = Recipe("x", ("a==1",), no_deps=("b==2",), relaxed=("torch<2.5 → 2.13.0",))
    assert len({plain.key, no_deps.key, relaxed.key}) == 3
    assert relaxed.facts() == {"no_deps": ["b==2"], "pins_relaxed": ["torch<2.5 → 2.13.0"]}
