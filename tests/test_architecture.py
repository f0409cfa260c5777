"""The layering of llmbench, checked from the source (ast, nothing imported).

1. No import cycle between modules, nor between packages (a package is a folder under
   llmbench/; a top-level module is its own node). Imports inside functions count too: a
   lazy import is still a dependency, only a later one.
2. The load layer never imports the analysis layer. The load layer is what runs while
   requests are in flight and decides when they go: ``llmbench.load`` (session, loop monitor,
   arrival schedules), ``llmbench.shapes`` (virtual user, dispatcher, fixed level, ramp,
   router A/B) and ``llmbench.harness`` (the engine). The analysis layer is everything that
   judges records: ``metrics``, ``stats``, ``slo`` (thresholds), ``verdict``, ``report``,
   ``compare``, ``timeline``, ``backends``, ``probe.router`` (the A/B statistics), and the
   layers above (``commands``, ``cli``). A ramp step is judged by a function handed in from
   the command, so the load layer needs none of them.

Modules are found by walking the tree, so a new module (a wire format under wire/, a server
adapter under probe/servers/) is checked without touching this file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "llmbench"

LOAD_LAYER = ("llmbench.load", "llmbench.shapes", "llmbench.harness", "llmbench.workers")
ANALYSIS = ("llmbench.metrics", "llmbench.stats", "llmbench.stepstats", "llmbench.slo",
            "llmbench.verdict", "llmbench.outages",
            "llmbench.report", "llmbench.compare", "llmbench.timeline", "llmbench.backends",
            "llmbench.probe.router", "llmbench.commands", "llmbench.cli")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` starts with (``a.b.func`` -> ``a.b``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod if is_pkg else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    stem = f"{base}.{node.module}" if node.module else base
                else:
                    stem = node.module or ""
                # "from pkg import sub" imports the submodule when there is one
                targets = [f"{stem}.{a.name}" for a in node.names] or [stem]
            for t in targets:
                if not t.startswith(PACKAGE):
                    continue
                dep = _resolve(t, modules)
                if dep is not None and dep != mod:
                    graph[mod].add(dep)
    return graph


def package_of(module: str) -> str:
    """llmbench.load.session -> llmbench.load; llmbench.cli -> llmbench.cli."""
    parts = module.split(".")
    return ".".join(parts[:2])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_graph_is_read_from_the_source():
    g = import_graph()
    assert "llmbench.harness" in g and "llmbench.shapes.ramp" in g
    assert "llmbench.load.session" in g["llmbench.shapes.user"]
    assert "llmbench.harness" in g["llmbench.commands.run"]


def test_no_cycle_between_modules():
    found = cycles(import_graph())
    assert not found, f"import cycles between modules: {found}"


def test_no_cycle_between_packages():
    packages: dict[str, set[str]] = {}
    for mod, deps in import_graph().items():
        p = package_of(mod)
        packages.setdefault(p, set()).update(package_of(d) for d in deps if package_of(d) != p)
    found = cycles(packages)
    assert not found, f"import cycles between packages: {found}"


def test_the_load_layer_never_imports_the_analysis_layer():
    bad = sorted((mod, dep) for mod, deps in import_graph().items() if _in(mod, LOAD_LAYER)
                 for dep in deps if _in(dep, ANALYSIS))
    assert not bad, f"the load layer imports analysis: {bad}"


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_cycle_finder(graph, expected):
    assert cycles(graph) == expected
