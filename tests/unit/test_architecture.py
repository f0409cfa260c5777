"""The layering of llmbench, checked from the source (ast, nothing imported).

The layers are the packages (and the few modules) at the top of ``llmbench/``, in the order
below: a module may import its own package and any package before it, never one after it. So
``load`` (what runs while requests are in flight) cannot reach ``analysis`` (what judges the
records), and a ramp step is judged by a function handed down from the command. A module's
layer is read from its path, so a new module (a wire format under wire/, a server adapter under
servers/) is checked without touching this file; a new top-level package fails until it is
placed in LAYERS (and in ARCHITECTURE.md's map, tests/test_docs.py).

1. No import cycle between modules, nor between packages. Imports inside functions count
   too: a lazy import is still a dependency, only a later one.
2. No upward import between layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT  # noqa: E402
PACKAGE = "llmbench"

# lowest first. workload sits above client: the server tokenizer asks the server to count
# tokens and so needs the client's netconfig (proxy, TLS) like every other request. options (how
# an option is declared and checked) sits at the bottom, so the commands and the mock both use it.
LAYERS = ("version", "errors", "options", "records", "wire", "client", "workload", "servers", "load",
          "workers", "results", "analysis", "report", "commands", "api", "__init__", "cli")


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
    """llmbench.load.session -> llmbench.load; llmbench.errors -> llmbench.errors."""
    parts = module.split(".")
    return ".".join(parts[:2])


def layer_of(module: str) -> int:
    """The index in LAYERS of the top-level entry that holds ``module`` (the root: __init__)."""
    parts = module.split(".")
    return LAYERS.index(parts[1] if len(parts) > 1 else "__init__")


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


def test_the_graph_is_read_from_the_source():
    g = import_graph()
    assert "llmbench.load.harness" in g and "llmbench.load.shapes.ramp" in g
    assert "llmbench.load.session" in g["llmbench.load.shapes.user"]
    assert "llmbench.load.harness" in g["llmbench.commands.run"]


def test_every_top_level_entry_has_a_layer():
    entries = {p.stem if p.suffix == ".py" else p.name for p in (ROOT / PACKAGE).iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert entries <= set(LAYERS), f"place these in LAYERS: {sorted(entries - set(LAYERS))}"
    # the stages, plus the few entries every stage may use (version, errors, options)
    assert len(entries) <= 17, f"the top of llmbench/ should list the stages, not {len(entries)} entries"


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


def test_layers_only_import_downward():
    bad = sorted(f"{mod} -> {dep}" for mod, deps in import_graph().items()
                 for dep in deps if layer_of(dep) > layer_of(mod))
    assert not bad, "upward imports (a layer may import only the layers before it in LAYERS):\n" + \
        "\n".join(bad)


def test_an_upward_import_is_caught():
    """The check itself: load importing analysis is upward, analysis importing load is not."""
    assert layer_of("llmbench.analysis.metrics") > layer_of("llmbench.load.harness")
    assert layer_of("llmbench.cli") > layer_of("llmbench.commands.run") > layer_of("llmbench.records.record")
    assert layer_of("llmbench") > layer_of("llmbench.api")


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_cycle_finder(graph, expected):
    assert cycles(graph) == expected
