"""Paths a user takes that once went quietly wrong: same-named model files, card files, tall cards."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from causalrate import plugins
from causalrate.systems import SYSTEMS
from causalrate.systems.base import NoSettings
from causalrate.systems.python_system import PythonFunction
from tests.test_cards import browser_or_skip

MODEL = "import numpy as np\n\ndef predict(inputs, horizon):\n    return np.full((len(inputs), horizon), {value})\n"


def test_two_model_files_with_one_stem_are_two_systems(tmp_path, monkeypatch):
    """a/model.py and b/model.py are different modules with different cache identities; an edit runs the edited
    code even when a byte-code cache of the old one is there and the file's size and mtime (whole seconds, all
    Python's cache checks) did not change."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's Python: __pycache__ files are written
    for folder, value in (("a", 1.0), ("b", 2.0)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.py").write_text(MODEL.format(value=value))
    systems = [
        PythonFunction(PythonFunction.Settings(function=f"{folder}/model.py:predict"), base_dir=tmp_path)
        for folder in ("a", "b")
    ]
    inputs = np.ones((2, 5))
    assert [float(s.function(inputs, 3)[0, 0]) for s in systems] == [1.0, 2.0]
    assert systems[0].identity()["source"] != systems[1].identity()["source"]
    before = (tmp_path / "a" / "model.py").stat()
    (tmp_path / "a" / "model.py").write_text(MODEL.format(value=3.0))  # an edit is a new module and identity
    os.utime(tmp_path / "a" / "model.py", ns=(before.st_atime_ns, before.st_mtime_ns))  # within the same second
    edited = PythonFunction(PythonFunction.Settings(function="a/model.py:predict"), base_dir=tmp_path)
    assert float(edited.function(inputs, 3)[0, 0]) == 3.0
    assert edited.identity()["source"] not in {s.identity()["source"] for s in systems}


NEIGHBOUR = (
    "import numpy as np\nfrom helper import VALUE\n\n\ndef predict(inputs, horizon):\n"
    "    return np.full((len(inputs), horizon), VALUE)\n"
)
IMPORT_IT = (
    "import numpy as np, sys; from pathlib import Path; from causalrate.systems.python_system import load_callable; "
    "print(float(load_callable('model.py:predict', base_dir=Path(sys.argv[1]))(np.ones((1, 3)), 2)[0, 0]))"
)


def test_a_neighbour_module_edited_within_a_second_runs_its_edited_code_in_the_next_process(tmp_path):
    """model.py imports helper.py beside it. Python would read helper's __pycache__ file, valid by its source's
    mtime in whole seconds and size, so an edit of the same size within a second ran the old code in the next
    worker (while the forecast cache, keyed by the files' content, said new). Each process compiles it afresh."""
    import subprocess

    (tmp_path / "model.py").write_text(NEIGHBOUR)
    (tmp_path / "helper.py").write_text("VALUE = 1.0\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # a user's Python: caches written

    def forecast() -> str:
        command = [sys.executable, "-c", IMPORT_IT, str(tmp_path)]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout.strip()

    assert forecast() == "1.0"
    before = (tmp_path / "helper.py").stat()
    (tmp_path / "helper.py").write_text("VALUE = 2.0\n")  # the same size, its mtime put back: one second's edit
    os.utime(tmp_path / "helper.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert forecast() == "2.0"
    assert not list(tmp_path.glob("__pycache__/helper*"))  # nothing of its folder is cached


PLUGIN_SYSTEM = """import numpy as np
from causalrate.systems import SYSTEMS, System

@SYSTEMS.register("planted-constant")
class Constant(System):
    def forecast(self, batch):
        return np.full((len(batch.inputs), batch.horizon), {value})
"""


@pytest.fixture
def systems_as_they_were():
    """A plugin registered here leaves with its test (entries and modules)."""
    saved, modules = dict(SYSTEMS._entries), set(sys.modules)
    yield
    SYSTEMS._entries = saved
    for name in set(sys.modules) - modules:
        if name.startswith(plugins.MODULE_PREFIX):
            del sys.modules[name]


def load_afresh(plugin: Path, text: str) -> type:
    """Write `text` to the plugin file as an edit of the same size within the same second (Python's byte-code
    cache cannot tell it), then import it as a new process would; the system class it registers."""
    before = plugin.stat() if plugin.exists() else None
    plugin.write_text(text)
    if before is not None:
        assert plugin.stat().st_size == before.st_size
        os.utime(plugin, ns=(before.st_atime_ns, before.st_mtime_ns))
    SYSTEMS._entries.pop("planted-constant", None)  # a new process: nothing registered, nothing imported
    sys.modules.pop(plugins.module_name(str(plugin)), None)
    plugins.load([str(plugin)])
    return SYSTEMS.get("planted-constant")


def test_an_edited_plugin_file_runs_its_edited_code_and_is_a_new_cache_identity(
    tmp_path, monkeypatch, systems_as_they_were
):
    """As model files: a plugin file runs the bytes on disk, never an older __pycache__ file of the same size and
    whole-second mtime; and a system it registers has its file's content in its forecast-cache identity, so an
    edited plugin system never reuses the forecasts of its old code from the shared cache."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's Python: __pycache__ files are written
    plugin = tmp_path / "my_plugin.py"
    batch = SimpleNamespace(inputs=np.ones((2, 5)), horizon=3)  # all the planted system reads
    made = []
    for value in ("1.0", "2.0"):
        system = load_afresh(plugin, PLUGIN_SYSTEM.format(value=value))(NoSettings(), base_dir=tmp_path)
        made.append((float(system.forecast(batch)[0, 0]), json.dumps(system.identity(), sort_keys=True)))
    assert [forecast for forecast, _ in made] == [1.0, 2.0]  # the edit ran
    assert made[0][1] != made[1][1]  # and is another cache identity
    assert not (tmp_path / "__pycache__").exists()


def test_a_built_in_systems_cache_identity_names_no_plugin():
    """Built-in systems keep their identity (the shared cache's and the published forecasts' keys)."""
    identity = SYSTEMS.get("naive")(NoSettings(), base_dir=Path("."))
    assert set(identity.identity()) == {"type", "version", "settings", "libraries"}


def test_card_files_never_collide_and_overwrite_leaves_no_stale_card(synthetic_study, cli, tmp_path):
    both = synthetic_study("- {name: naive, type: naive}\n- {name: naive-ape, type: random}\n", draws=2, stride=10)
    run = tmp_path / "run"
    assert cli("assess", both, "--out", run, "--workers", "1", "--no-cards")[0] == 0
    code, _, err = cli("card", run, "--format", "html,md")
    assert code == 0, err
    cards = run / "cards"
    for slug in ("naive", "naive-ape"):
        linked = re.findall(r"\]\(([^)]+\.svg)\)", (cards / f"{slug}.md").read_text())
        assert linked and all(name.startswith(f"{slug}.") for name in linked), linked
        assert all((cards / name).is_file() for name in linked)
    naive_figures = {p.name for p in cards.glob("naive.*.svg")}
    other_figures = {p.name for p in cards.glob("naive-ape.*.svg")}
    assert naive_figures and other_figures and not naive_figures & other_figures
    assert (cards / "naive.ape.svg").read_bytes() != (cards / "naive-ape.ape.svg").read_bytes()

    one = Path(str(both).replace("study.yaml", "one.yaml"))
    one.write_text(both.read_text().replace("  - {name: naive-ape, type: random}\n", ""))
    assert cli("assess", one, "--out", run, "--workers", "1", "--overwrite", "--no-cards")[0] == 0
    assert not list(cards.glob("naive-ape*")), "a card of a system no longer in the run is stale"


def test_a_tall_card_is_not_cut(tmp_path):
    from PIL import Image

    from causalrate.report.render import Session

    browser = browser_or_skip()
    page = tmp_path / "tall.html"
    page.write_text(
        "<html><body style='margin:0;background:#fff'><div style='height:11000px;background:#fff'></div>"
        "<div style='height:200px;background:#000'>end</div><div style='height:60px'></div></body></html>"
    )
    with Session(browser) as session, Image.open(session.png(page, tmp_path / "tall.png")) as image:
        rgb = np.asarray(image.convert("RGB"))
    assert rgb.shape[0] >= 11200, rgb.shape  # the black block at the bottom is in the picture
    assert (rgb[11050:11150] < 20).all()
