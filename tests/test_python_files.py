"""Issue 42 item 4: one mechanism for the files a python system's forecasts depend on (`files:`), `depends_on`
read as its old name with a note; the same files decide a worker's rebuild (System.sources)."""

from __future__ import annotations

import logging
import time

import pytest

from causalrate.systems.python_system import PythonFunction, PythonSettings


def _system(tmp_path, **settings) -> PythonFunction:
    (tmp_path / "model.py").write_text("def f(inputs, horizon, files=None):\n    return inputs[:, -horizon:]\n")
    if not (tmp_path / "trained").exists():  # the model's files, written once
        (tmp_path / "w.json").write_text("1")
        (tmp_path / "trained").mkdir()
        (tmp_path / "trained" / "a.bin").write_text("a")
    return PythonFunction(PythonSettings(function="model.py:f", **settings), base_dir=tmp_path)


def test_files_as_a_list_or_a_mapping_enter_the_key_and_only_the_mapping_reaches_the_function(tmp_path):
    listed = _system(tmp_path, files=["w.json"])
    named = _system(tmp_path, files={"model": "trained"})
    assert listed.files == {} and named.files == {"model": (tmp_path / "trained").resolve()}
    assert set(listed.sources()) == {tmp_path / "model.py", (tmp_path / "w.json").resolve()}
    assert set(named.sources()) == {tmp_path / "model.py", (tmp_path / "trained").resolve()}
    before = (listed.identity()["depends_on"], named.identity()["files"])
    (tmp_path / "w.json").write_text("2")  # retrained
    (tmp_path / "trained" / "a.bin").write_text("b")
    after = (_system(tmp_path, files=["w.json"]).identity()["depends_on"], named.identity()["files"])
    assert before[0] != after[0] and before[1] != after[1]


def test_depends_on_is_read_as_files_with_a_deprecation_note(tmp_path, caplog):
    old = _system(tmp_path, depends_on=["w.json"])
    new = _system(tmp_path, files=["w.json"])
    assert old.sources() == new.sources() and old.identity()["depends_on"] == new.identity()["depends_on"]
    note = "depends_on is the old name of files:"
    with pytest.warns(DeprecationWarning, match=note), caplog.at_level(logging.WARNING):
        old.check(None)
    assert "write files: instead" in caplog.text
    with pytest.warns(DeprecationWarning, match=note):
        assert "files: no such file or folder" in _refusal(_system(tmp_path, depends_on=["gone.pkl"]))
    assert "files: no such file or folder" in _refusal(_system(tmp_path, files=["gone.pkl"]))


def _refusal(system: PythonFunction) -> str:
    from causalrate.errors import UserError

    try:
        system.check(None)
    except UserError as exc:
        return str(exc)
    return ""


def test_a_worker_builds_the_system_again_when_a_file_it_declares_changes(tmp_path):
    import numpy as np

    from causalrate.forecast import worker
    from causalrate.forecast.jobs import Job

    _system(tmp_path)
    spec = {"name": "m", "type": "python", "function": "model.py:f", "files": ["w.json"]}
    job = Job("m", "P0", np.arange(1), spec, tmp_path, 10.0, None)  # type: ignore[arg-type]  # _system reads no batch
    first = worker._system(job)
    assert worker._system(job) is first
    time.sleep(0.01)
    (tmp_path / "w.json").write_text("22")  # another size: rebuilt
    assert worker._system(job) is not first
