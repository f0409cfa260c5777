"""No module of llmbench imports a name at its top level that it never uses (a re-export says
so with ``# noqa`` or ``__all__``): a dead import hides what a module really depends on, and
the architecture test reads imports as dependencies."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import ROOT


def _names_in_strings(tree: ast.AST) -> set[str]:
    """Names inside string annotations ("RecordStore", "list[Record]")."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _ANNOTATION.match(node.value):
            out |= set(re.findall(r"[A-Za-z_]\w*", node.value))
    return out


_ANNOTATION = re.compile(r"[A-Za-z_][\w.]*(\[[\w., |\[\]]*\])?( \| [\w.\[\], ]+)*$")


def unused_imports(path: Path) -> list[str]:
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    lines = src.splitlines()
    imported: dict[str, int] = {}
    exported: set[str] = set()
    for node in tree.body:           # the module's own imports (a function's lazy ones are used)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            exported = {e.value for e in getattr(node.value, "elts", [])
                        if isinstance(e, ast.Constant)}
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if any("noqa" in lines[i] for i in range(node.lineno - 1, node.end_lineno or node.lineno)):
            continue                 # a re-export, said so
        for alias in node.names:
            imported[(alias.asname or alias.name).split(".")[0]] = node.lineno
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | _names_in_strings(tree)
    return [f"{path.relative_to(ROOT)}:{line}: {name}" for name, line in imported.items()
            if name not in used and name not in exported]


def test_no_module_imports_a_name_it_never_uses():
    found = [u for p in sorted((ROOT / "llmbench").rglob("*.py")) if p.name != "__init__.py"
             for u in unused_imports(p)]
    assert not found, "unused imports:\n" + "\n".join(found)


def test_an_unused_import_is_found(tmp_path, monkeypatch):
    import tests.unit.test_unused_imports as me
    monkeypatch.setattr(me, "ROOT", tmp_path)
    f = tmp_path / "m.py"
    f.write_text("from urllib.parse import parse_qsl, urlsplit\nimport os  # noqa: F401\n"
                 "from typing import Any\n\ndef f(u: 'Any'):\n    return urlsplit(u)\n")
    assert unused_imports(f) == ["m.py:1: parse_qsl"]
