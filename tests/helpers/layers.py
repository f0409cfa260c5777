"""llmbench's layer order as tests/unit/test_architecture.py declares it (``LAYERS``), for the
tests that check the docs against it (tests/unit/test_docs.py), read from that file's source
(ast, nothing imported): a test file is never imported by another. One declaration, one reader;
moving LAYERS itself here is a change to test_architecture.py left for after the open branches
merge (they edit it)."""

from __future__ import annotations

import ast

from tests.helpers import ROOT

__all__ = ["LAYERS", "PACKAGE"]

PACKAGE = "llmbench"


def _declared(name: str) -> tuple[str, ...]:
    # wherever tests/unit/'s files live (scripts/mirror_unit_tests.py may move them)
    for path in sorted((ROOT / "tests" / "unit").rglob("test_architecture.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
                return tuple(ast.literal_eval(node.value))
    raise LookupError(f"no {name} = (...) in tests/unit/**/test_architecture.py")


LAYERS: tuple[str, ...] = _declared("LAYERS")
