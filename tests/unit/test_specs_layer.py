"""Specs are data, below analysis (issue 44 §1): every command's spec is a class of
llmbench/specs/ that does not perform itself; what a command does with its spec is a function of
its command module (``perform_spec``, ``perform_report`` ...). Read from the source (ast)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT


def _classes(folder: Path) -> dict[str, list[ast.ClassDef]]:
    out = {}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        out[str(path.relative_to(ROOT))] = [n for n in ast.walk(tree)
                                            if isinstance(n, ast.ClassDef)]
    return out


def test_no_spec_is_declared_in_the_commands():
    specs = [f"{mod}: {c.name}" for mod, cs in _classes(ROOT / "llmbench" / "commands").items()
             for c in cs if c.name.endswith(("Spec", "Opts"))]
    assert specs == [], "a command's spec and its option groups belong in llmbench/specs/"


def test_no_spec_performs_itself():
    performing = [f"{mod}: {c.name}.{f.name}"
                  for mod, cs in _classes(ROOT / "llmbench" / "specs").items() for c in cs
                  for f in c.body if isinstance(f, ast.FunctionDef)
                  and f.name.startswith("perform")]
    assert performing == [], "perform is the command's (llmbench/commands/), not its spec's"


def test_every_command_line_spec_is_in_the_specs_layer():
    from llmbench.cli.app import _TABLE
    where = {name: row[0] for name, row in _TABLE.items()}
    assert where.pop("mock") == "llmbench.mock_server.cli"    # the mock's own options
    assert {n: m for n, m in where.items() if not m.startswith("llmbench.specs.")} == {}
    # and each names a class there that makes a spec of its command
    import importlib
    for name, (module, cls, *_) in _TABLE.items():
        assert getattr(importlib.import_module(module), cls).command == name


def test_the_check_sees_a_spec_that_performs(tmp_path, monkeypatch):
    # the check itself: a spec with a perform method, planted in a copy of the layer, is caught
    import tests.unit.test_specs_layer as me
    specs = tmp_path / "llmbench" / "specs"
    specs.mkdir(parents=True)
    (specs / "bad.py").write_text("class BadSpec:\n    def perform(self):\n        pass\n")
    monkeypatch.setattr(me, "ROOT", tmp_path)
    try:
        test_no_spec_performs_itself()
    except AssertionError as exc:
        assert "BadSpec.perform" in str(exc)
    else:
        raise AssertionError("a spec's perform was not seen")
