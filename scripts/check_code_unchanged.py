"""Is a change prose only? Compares every Python file under llmbench/ that changed between two
revisions with its docstrings and comments left out: prints each file whose code differs, and
each file whose docstrings run time reads (the command line's help, the API's signatures)
that changed; exits 1 if any, else prints the lines the prose lost or gained.

    python scripts/check_code_unchanged.py BASE [HEAD]     # HEAD: the working tree if left out

Why: a change that only says things better can be verified by this alone, without the suite
(the suite and the identity scripts still run at merge).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

# docstrings these files hold are printed by --help or shown by help(llmbench.run)
DOCS_READ_AT_RUN_TIME = ("llmbench/cli/", "llmbench/api.py", "llmbench/__init__.py")


def _source(rev: str | None, path: str) -> str | None:
    if rev is None:
        p = Path(path)
        return p.read_text() if p.exists() else None
    got = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return got.stdout if got.returncode == 0 else None


def _without_docstrings(tree: ast.AST) -> tuple[str, list[str]]:
    """The tree's dump with every docstring removed, and the docstrings in order."""
    docs: list[str] = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            docs.append(body[0].value.value)
            node.body = body[1:] or [ast.Pass()]        # type: ignore[attr-defined]
    return ast.dump(tree, include_attributes=False), docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("head", nargs="?")
    a = ap.parse_args()
    names = subprocess.run(["git", "diff", "--name-only", a.base, *([a.head] if a.head else []),
                            "--", "llmbench"], capture_output=True, text=True,
                           check=True).stdout.split()
    bad = 0
    for path in (n for n in names if n.endswith(".py")):
        before, after = _source(a.base, path), _source(a.head, path)
        if before is None or after is None:
            print(f"{path}: added or removed")
            bad += 1
            continue
        try:
            code_b, docs_b = _without_docstrings(ast.parse(before))
            code_a, docs_a = _without_docstrings(ast.parse(after))
        except SyntaxError as exc:
            print(f"{path}: does not parse (line {exc.lineno}: {exc.msg})")
            bad += 1
            continue
        if code_b != code_a:
            print(f"{path}: the code differs, not only its prose")
            bad += 1
        elif docs_b != docs_a and path.startswith(DOCS_READ_AT_RUN_TIME):
            print(f"{path}: a docstring run time reads changed (--help, help())")
            bad += 1
    stat = subprocess.run(["git", "diff", "--shortstat", a.base, *([a.head] if a.head else []),
                           "--", "llmbench"], capture_output=True, text=True).stdout.strip()
    print(f"{len(names)} files changed ({stat or 'nothing'}); "
          + (f"{bad} not prose only" if bad else "the code is unchanged"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
