"""Every dataclass llmbench defines has a docstring. Not only for the reader: @dataclass gives a
class without one the text of ``inspect.signature(cls)``, computed as the class is made,
~0.2 ms each; the ~50 a run imported without one were ~10 ms of its start-up (issue 50 §2)."""

import ast
from pathlib import Path

import llmbench

PACKAGE = Path(llmbench.__file__).parent


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def test_every_dataclass_has_a_docstring() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node) \
                    and ast.get_docstring(node) is None:
                missing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert not missing, "dataclasses without a docstring:\n" + "\n".join(missing)
