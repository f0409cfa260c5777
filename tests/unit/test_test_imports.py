"""No test file is imported by another file (issue 38 §5): what tests share lives in
tests/helpers/ (and the fixtures in tests/conftest.py), so a test file can move (tests/unit/
mirrors llmbench/'s packages: scripts/mirror_unit_tests.py) or go without breaking another.
Read from the source (ast): every import in tests/ and scripts/, lazy ones inside functions
included, and importlib.import_module("...") of a constant name; a file importing itself (to
monkeypatch its own globals) is no coupling."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

# what may be imported from tests/: the helpers and the fixtures' module
SHARED = ("tests.helpers", "tests.conftest")


def _module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) for each module of tests/ that ``path`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = _module_of(path, root).split(".")
    is_pkg = path.name == "__init__.py"
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:                       # relative: from .test_x import y
                base = here if is_pkg else here[:-1]
                base = base[:len(base) - node.level + 1] if node.level > 1 else base
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            # from tests.unit import test_x: the names may be modules
            out += [(node.lineno, mod)] + [(node.lineno, f"{mod}.{a.name}") for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
    return [(n, m) for n, m in out if m == "tests" or m.startswith("tests.")]


def violations(files: list[Path], root: Path) -> list[str]:
    """Each import of a test file (anything under tests/ but the helpers and conftest)."""
    tests = {_module_of(p, root) for p in (root / "tests").rglob("*.py")}
    bad = []
    for path in files:
        me = _module_of(path, root)          # a file may import itself (to monkeypatch itself)
        for line, mod in imported(path, root):
            if mod in tests and mod != me and not mod.startswith(SHARED) and mod != "tests" \
                    and mod.rsplit(".", 1)[-1].startswith("test_"):
                bad.append(f"{path.relative_to(root)}:{line}: imports {mod}, a test file; "
                           "move what it shares to tests/helpers/")
    return sorted(set(bad))


def _sources(root: Path) -> list[Path]:
    return sorted(p for d in ("tests", "scripts") for p in (root / d).rglob("*.py"))


def test_no_file_imports_a_test_file():
    bad = violations(_sources(ROOT), ROOT)
    assert not bad, "\n".join(bad)


def test_an_import_of_a_test_file_is_found(tmp_path):
    # a small tree with each way to import a test file, and the allowed ones
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "helpers").mkdir()
    (tmp_path / "scripts").mkdir()
    for f in ("tests/__init__.py", "tests/unit/__init__.py", "tests/helpers/__init__.py",
              "tests/conftest.py", "tests/unit/test_a.py", "tests/helpers/data.py"):
        (tmp_path / f).write_text("X = 1\n")
    (tmp_path / "tests" / "unit" / "test_b.py").write_text(
        "from tests.helpers.data import X\n"          # allowed
        "from tests.conftest import X as Y\n"         # allowed
        "from tests.unit.test_a import X as Z\n"      # line 3
        "def f():\n"
        "    from .test_a import X\n"                 # line 5: relative, lazy
        "    from tests.unit import test_a\n"         # line 6
        "    import importlib\n"
        "    importlib.import_module('tests.unit.test_a')\n")   # line 8
    (tmp_path / "scripts" / "s.py").write_text("import tests.unit.test_a\n")
    (tmp_path / "tests" / "unit" / "test_c.py").write_text("import tests.unit.test_c as me\n")
    bad = violations(_sources(tmp_path), tmp_path)
    assert [b.split(": imports")[0] for b in bad] == [
        "scripts/s.py:1", "tests/unit/test_b.py:3", "tests/unit/test_b.py:5",
        "tests/unit/test_b.py:6", "tests/unit/test_b.py:8"], bad
    assert all("tests.unit.test_a" in b for b in bad)
