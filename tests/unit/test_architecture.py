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

Every module is read: all of ``llmbench/`` (the mock, ``llmbench/mock_server/``, included) and the
deprecated top-level shim ``mock_server/``, which sits above every layer (it may import
llmbench; nothing in llmbench may import it). ``python -m tests.unit.test_architecture`` prints
the counts (packages, modules, imports, upward imports, cycles).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.helpers import ROOT  # noqa: E402
PACKAGE = "llmbench"
# what the graph reads: the package, and the deprecated shim beside it (above every layer)
SHIM = "mock_server"
ROOTS = (PACKAGE, SHIM)

# lowest first. workload sits above client: the server tokenizer asks the server to count
# tokens and so needs the client's netconfig (proxy, TLS) like every other request. options (how
# an option is declared and checked) sits at the bottom, so the commands and the mock both use it.
# The mock (a server, not a stage of the load) sits under wire: it may read records (its fit) and
# options, never the client's side of the wire, so a client bug is not mirrored by the mock.
LAYERS = ("version", "errors", "options", "records", "mock_server", "wire", "client", "workload", "servers", "load",
          "workers", "results", "specs", "analysis", "report", "commands", "api", "__init__", "testing",
          "cli")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(p for r in ROOTS for p in (ROOT / r).rglob("*.py")):
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
    """module -> the modules it imports (a copy: a test may plant edges in it)."""
    return {m: set(deps) for m, deps in _graph().items()}


@functools.lru_cache(maxsize=1)
def _graph() -> dict[str, frozenset[str]]:
    """Parsed once per process: every test here reads the same source."""
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
                if t.split(".")[0] not in ROOTS:
                    continue
                dep = _resolve(t, modules)
                if dep is not None and dep != mod:
                    graph[mod].add(dep)
    return {m: frozenset(d) for m, d in graph.items()}


def package_of(module: str) -> str:
    """llmbench.load.session -> llmbench.load; llmbench.errors -> llmbench.errors; the shim's
    modules -> mock_server."""
    parts = module.split(".")
    return SHIM if parts[0] == SHIM else ".".join(parts[:2])


def layer_of(module: str) -> int:
    """The index in LAYERS of the top-level entry that holds ``module`` (the root: __init__);
    the shim is above them all."""
    parts = module.split(".")
    if parts[0] == SHIM:
        return len(LAYERS)
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
    # the stages, plus the few entries every stage may use (version, errors, options), the mock
    # and the pytest plugin (llmbench.testing: a public name, as the API's)
    assert len(entries) <= 20, f"the top of llmbench/ should list the stages, not {len(entries)} entries"


def test_no_cycle_between_modules():
    found = cycles(import_graph())
    assert not found, f"import cycles between modules: {found}"


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        p = package_of(mod)
        packages.setdefault(p, set()).update(package_of(d) for d in deps if package_of(d) != p)
    return packages


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{mod} -> {dep}" for mod, deps in graph.items()
                  for dep in deps if layer_of(dep) > layer_of(mod))


def test_no_cycle_between_packages():
    found = cycles(package_graph(import_graph()))
    assert not found, f"import cycles between packages: {found}"


def test_layers_only_import_downward():
    bad = upward(import_graph())
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


def test_every_module_is_read_the_mock_and_the_shim_included():
    g = import_graph()
    files = sorted(p for r in ROOTS for p in (ROOT / r).rglob("*.py"))
    assert len(g) == len(files) and len(files) > 120
    mock = {m for m in g if m.startswith("llmbench.mock_server")}
    assert {"llmbench.mock_server.engine", "llmbench.mock_server.cli",
            "llmbench.mock_server.server"} <= mock
    assert any("llmbench.mock_server.cli" in g[m] for m in g        # sweep's spec uses it
               if m.startswith("llmbench.specs"))
    assert "llmbench.options" in g["llmbench.mock_server.cli"]                # on the bottom layer
    assert not any(d.startswith("llmbench.commands") for m in mock for d in g[m])
    assert "llmbench.mock_server.__main__" in g["mock_server.__main__"]
    # nothing in llmbench leans on the deprecated shim
    assert not [m for m, deps in g.items() if m.startswith(PACKAGE) and SHIM in
                {package_of(d) for d in deps}]


def test_the_cycles_this_layout_broke_would_fail():
    """Plant the two cycles issue 38 found (the mock's options importing the commands' while the
    commands import the mock; embeddings and routes importing each other) and see each caught,
    the first twice over: as a package cycle and as an upward import."""
    g = {m: set(d) for m, d in import_graph().items()}
    assert not cycles(package_graph(g)) and not upward(g)
    g["llmbench.mock_server.cli"].add("llmbench.commands.options")
    assert ["llmbench.commands", "llmbench.mock_server"] in [
        [p for p in c if p in ("llmbench.commands", "llmbench.mock_server")]
        for c in cycles(package_graph(g))]
    assert "llmbench.mock_server.cli -> llmbench.commands.options" in upward(g)
    g = {m: set(d) for m, d in import_graph().items()}
    first, second = sorted(m for m in g if m.startswith("llmbench.mock_server."))[:2]
    g[first].add(second)
    g[second].add(first)
    assert any({first, second} <= set(c) for c in cycles(g))


def counts() -> dict[str, int]:
    g = import_graph()
    packages = package_graph(g)
    return {"packages": len(packages), "modules": len(g),
            "imports": sum(len(d) for d in g.values()), "upward imports": len(upward(g)),
            "module cycles": len(cycles(g)), "package cycles": len(cycles(packages))}


if __name__ == "__main__":
    for k, v in counts().items():
        print(f"{k:>16}: {v}")
