"""The run's memo of costly causal results: complete keys (a planted change of any input misses), and a
re-rate that reads it reproduces the assess's ratings.json byte for byte without refitting anything."""

import dataclasses
import hashlib
import json
import sqlite3
import sys

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel

from causalrate import plugins
from causalrate.memo import Memo, code_salt, fingerprint


@dataclasses.dataclass(frozen=True)
class Cell:
    name: str
    values: np.ndarray


class Settings(BaseModel):
    depth: int = 3


def digest(obj) -> str:
    h = hashlib.sha256()
    fingerprint(obj, h)
    return h.hexdigest()


BASE = {
    "array": np.array([1.0, 2.0, np.nan]),
    "frame": pd.DataFrame({"industry": ["Tech", "Health", None], "level": [1.0, 2.0, 3.0]}),
    "cell": Cell("a", np.array([True, False])),
    "settings": Settings(),
    "items": [1, "1", (2.5, None)],
}


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["array"].__setitem__(0, 1.0000000001),
        lambda d: d.__setitem__("array", d["array"].astype(np.float32)),
        lambda d: d["frame"].__setitem__("industry", ["Tech", "Health", "None"]),  # missing vs the text "None"
        lambda d: d.__setitem__("frame", d["frame"].rename(columns={"level": "price"})),
        lambda d: d.__setitem__("frame", d["frame"].set_axis([0, 1, 5])),
        lambda d: d.__setitem__("frame", d["frame"].astype({"level": "float32"})),
        lambda d: d.__setitem__("cell", Cell("b", d["cell"].values)),
        lambda d: d.__setitem__("cell", Cell("a", np.array([True, True]))),
        lambda d: d.__setitem__("settings", Settings(depth=4)),
        lambda d: d.__setitem__("items", [1, 1, (2.5, None)]),  # the int 1 is not the text "1"
        lambda d: d.__setitem__("items", [1, "1", [2.5, None]]),
    ],
)
def test_every_planted_change_of_an_input_changes_the_key(change):
    changed = {k: v.copy() if hasattr(v, "copy") else v for k, v in BASE.items()}
    changed["items"] = list(BASE["items"])
    change(changed)
    assert digest(changed) != digest(BASE)


def test_the_key_is_the_content_not_the_object():
    again = {k: v.copy() if hasattr(v, "copy") else v for k, v in BASE.items()}
    assert digest(again) == digest(BASE)


def test_what_cannot_be_hashed_completely_is_refused():
    with pytest.raises(TypeError, match="cannot fingerprint a object"):
        digest([object()])


def test_hit_miss_and_a_read_only_memo(tmp_path):
    store = tmp_path / "forecasts.sqlite"
    calls = []

    def compute(x):
        calls.append(x)
        return {"twice": np.float64(2 * x), "flag": np.bool_(True)}

    with Memo.open(store, writable=True) as memo:
        assert memo("double", (21,), lambda: compute(21)) == {"twice": 42.0, "flag": True}
        assert memo("double", (21,), lambda: compute(21))["twice"] == 42.0
        assert memo("double", (22,), lambda: compute(22))["twice"] == 44.0
        assert memo("triple", (21,), lambda: compute(21))["twice"] == 42.0  # another kind, another key
        assert (memo.hits, memo.misses) == (1, 3)
    assert calls == [21, 22, 21]
    before = store.read_bytes()
    with Memo.open(store, writable=False) as memo:
        assert memo("double", (21,), lambda: compute(0)) == {"twice": 42.0, "flag": True}
        memo("double", (23,), lambda: compute(23))  # computed, not stored
    assert calls == [21, 22, 21, 23] and store.read_bytes() == before
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM analysis_memo").fetchone() == (3,)


def test_a_store_without_a_memo_and_the_switched_off_memo_compute(tmp_path):
    store = tmp_path / "old.sqlite"
    sqlite3.connect(store).close()
    with Memo.open(store, writable=False) as memo:
        assert memo("k", (1,), lambda: 5) == 5 and memo.misses == 0  # nothing to read: computed directly
    assert Memo.off()("k", (1,), lambda: 6) == 6


def test_a_plugin_file_is_part_of_the_key(tmp_path, monkeypatch):
    """The key holds the plugin code that computes: the bytes the process ran, not the file as it is now."""
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text("VALUE = 1\n")
    plugins.load([str(plugin)])
    before = code_salt(())
    plugin.write_text("VALUE = 2\n")  # the scheme, score or system it registers changed
    assert code_salt(()) == before  # not in this process: it still runs VALUE = 1
    monkeypatch.delitem(sys.modules, plugins.module_name(str(plugin)))  # a new process (`rate`) imports the edit
    plugins.load([str(plugin)])
    assert sys.modules[plugins.module_name(str(plugin))].VALUE == 2
    assert code_salt(()) != before


def test_rerate_reads_the_memo_and_reproduces_the_run(synthetic_study, cli, tmp_path, monkeypatch):
    pytest.importorskip("causalml")
    systems = "- {name: naive, type: naive}\n- {name: median, type: python, function: 'planted.py:window_median'}\n"
    config = synthetic_study(systems, draws=2, stride=5)
    run = tmp_path / "run"
    assert cli("assess", config, "--out", run, "--no-cards")[0] == 0
    doc = json.loads((run / "ratings.json").read_text())
    assert doc["refutations"] and doc["heterogeneity"]  # the memoised parts are in the run
    with sqlite3.connect(run / "forecasts.sqlite") as db:
        kinds = dict(db.execute("SELECT kind, count(*) FROM analysis_memo GROUP BY kind").fetchall())
    # propensity: the logistic fits of the `level` scheme, whose design has a numeric confounder
    assert set(kinds) == {"identify", "characteristics", "fragility", "refute", "propensity"}

    def refit(*_, **__):
        raise AssertionError("refitted although the run's memo holds the result")

    from sklearn.linear_model import LogisticRegression

    from causalrate.causal import graph, heterogeneity
    from causalrate.uncertainty import rigor

    for module, name in [(graph, "identify"), (heterogeneity, "fragility_cell"), (rigor, "_refute")]:
        monkeypatch.setattr(module, name, refit)
    monkeypatch.setattr(LogisticRegression, "fit", refit)  # the propensities
    original = (run / "ratings.json").read_bytes()
    before = (run / "forecasts.sqlite").read_bytes()
    code, _, err = cli("rate", run, "--no-cards")
    assert code == 0, err
    assert (run / "ratings.json").read_bytes() == original
    assert (run / "forecasts.sqlite").read_bytes() == before  # read in place, never written
    code, _, err = cli("rate", run, "--systems", "median", "--levels", "2", "--out", tmp_path / "one", "--no-cards")
    assert code == 0, err  # a subset of systems hits the same per-system entries
