"""No import circles among causalrate's modules, counting imports inside functions too.

The graph has an edge A → B for every `import B` / `from B import x` anywhere in A (module level or
inside a function; `if TYPE_CHECKING:` blocks never run and are left out). Importing `a.b.c` runs
the packages `a` and `a.b` first, so those are edges too, except A's own enclosing packages (a
package's __init__ importing its submodules is how registration works, not a circle).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path, top: Path) -> str:
    parts = path.relative_to(top.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def _imported(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """Every module name `tree` imports, with relative imports resolved."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            nodes = node.orelse  # the body only runs for type checkers
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            return
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: None if is_package else -1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)
            return
        else:
            nodes = ast.iter_child_nodes(node)
        for child in nodes:
            visit(child)

    visit(tree)
    return found


def import_graph(top: Path) -> dict[str, set[str]]:
    """module → the package's modules it imports (directly, or by running their packages' __init__)."""
    files = {_module_name(p, top): p for p in sorted(top.rglob("*.py"))}
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in _imported(ast.parse(path.read_text(encoding="utf-8")), module, path.stem == "__init__", set(files)):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in files and not (module == target or module.startswith(target + ".")):
                    targets.add(target)
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_causalrate_has_no_import_circles():
    graph = import_graph(ROOT / "causalrate")
    assert {"causalrate.config", "causalrate.systems.spec", "causalrate.forecast.runner"} <= set(graph)
    assert circles(graph) == []


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to causalrate's top-level packages and modules (`causalrate.<name>`)."""
    top = {module: ".".join(module.split(".")[:2]) for module in graph}
    packages: dict[str, set[str]] = {name: set() for name in top.values()}
    for module, targets in graph.items():
        packages[top[module]].update(top[t] for t in targets if top[t] != top[module])
    return packages


def test_causalrate_has_no_package_circles():
    """Stage packages import one way (issue 32): no circle among causalrate's packages, function-level imports
    included — e.g. score may use causal's resampler only while causal never imports score."""
    packages = package_graph(import_graph(ROOT / "causalrate"))
    assert {"causalrate.causal", "causalrate.score", "causalrate.uncertainty", "causalrate.config"} <= set(packages)
    assert circles(packages) == []


def test_the_stages_import_downstream_to_upstream():
    """Each stage imports only the stages that run before it: data → perturb → forecast → analyze (causal,
    then score) → uncertainty → rate → report."""
    order = ["data", "perturb", "forecast", "causal", "score", "uncertainty", "rate", "report"]
    packages = package_graph(import_graph(ROOT / "causalrate"))
    for i, stage in enumerate(order):
        later = {f"causalrate.{s}" for s in order[i + 1 :]}
        assert not packages[f"causalrate.{stage}"] & later, stage


def test_a_package_circle_is_found():
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": {"p.c"}, "p.c": {"p.a"}, "p.a": set()}
    assert circles(package_graph(graph)) == [["p.a", "p.b", "p.c"]]


def test_the_layers_point_one_way():
    """config composes the stages' entry shapes; systems never import config, the engine or the pipeline."""
    graph = import_graph(ROOT / "causalrate")
    assert "causalrate.systems.spec" in graph["causalrate.config"]
    for module, targets in graph.items():
        if module.startswith("causalrate.systems"):
            assert not {t for t in targets if t.split(".")[1] in ("config", "study", "pipeline", "cli")}, module


def test_a_circle_through_a_function_level_import_and_a_package_init_is_found(tmp_path):
    """Planted: pkg.a imports pkg.sub.b inside a function; pkg/sub/__init__ imports pkg.a; pkg.c is typing-only."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "def f():\n    from pkg.sub.b import x\n    return x\n",
        "pkg/sub/__init__.py": "from pkg import a\n",
        "pkg/sub/b.py": "from . import d\nx = 1\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n",
        "pkg/sub/d.py": "import pkg.c\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    graph = import_graph(tmp_path / "pkg")
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.sub.d"} and graph["pkg.c"] == set()
    assert circles(graph) == [["pkg.a", "pkg.sub"]]


def test_loading_the_rating_path_imports_no_heavy_library():
    """`causalrate rate` from a run's memo must start in well under its 2 s (issue 17): the modules it loads
    import scipy.stats, scikit-learn, networkx and dowhy only inside the functions that fit or identify."""
    heavy = ("scipy.stats", "sklearn", "networkx", "dowhy", "statsmodels", "torch", "matplotlib")
    code = (
        "import sys, causalrate.cli, causalrate.rerate, causalrate.pipeline, causalrate.report.outputs; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    assert loaded.strip() == "[]"
