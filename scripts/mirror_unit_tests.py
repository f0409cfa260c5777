"""Where each tests/unit/test_X.py goes so tests/unit/ mirrors llmbench/'s packages (issue 38 §5),
and the move itself with --apply.

    python scripts/mirror_unit_tests.py            # print the plan: each move, what stays, why
    python scripts/mirror_unit_tests.py --apply    # git mv, __init__.py files, references fixed

A test file goes to tests/unit/<package>/ when it is named after a module of exactly one package
that it uses (test_decoder.py -> client/, for client/decoder.py), else when most of its use of
llmbench (ast: each imported name, counted at its import and at each use, lazy imports included)
is one package of llmbench/ (records, analysis, wire ...; the share is --share, 0.6 by default).
It stays at the top when it tests several packages, only the top-level modules (api.py,
options.py, errors.py: they are not packages) or nothing it imports (it reads the source or the
docs: test_architecture, test_docs); the plan says which and why. --apply also:

- gives each new folder an ``__init__.py``, so two test files of one name in different folders
  (tests/unit/servers/test_telemetry.py, tests/integration/test_telemetry.py) are distinct
  modules (tests.unit.servers.test_telemetry) under pytest's default import mode, as the folders
  of tests/ are packages today;
- moves what a file finds beside itself one level deeper: ``Path(__file__).parent`` becomes
  ``.parent.parent`` and ``parents[N]`` ``parents[N+1]`` (tests/unit/data/ stays where it is);
- rewrites every mention of a moved file, as a path (tests/unit/test_X.py) or a module
  (tests.unit.test_X), in the tracked text files (docs, scripts, comments, subprocess code).

Run it after the last branch that adds tests/unit/ files merges; then run the suite.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "llmbench"


def packages(root: Path) -> set[str]:
    """The packages at the top of llmbench/ (folders with an __init__.py)."""
    return {p.name for p in (root / PACKAGE).iterdir() if (p / "__init__.py").is_file()}


def usage(path: Path, pkgs: set[str]) -> Counter[str]:
    """How much the file uses each package of llmbench: each name it imports from llmbench
    counts once for its import and once for each use in the file (``metrics.summarize(...)``
    three times: 4 for analysis), so the data a test builds (a Record here and there) weighs
    less than what it tests. Lazy imports inside functions count too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    alias: dict[str, str] = {}                       # local name -> package (or "(top)")

    def pkg_of(module: str, name: str | None = None) -> str:
        parts = module.split(".")[1:] + ([name] if name else [])
        return parts[0] if parts and parts[0] in pkgs else "(top-level modules)"

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == PACKAGE:
                    alias[a.asname or a.name.split(".")[0]] = pkg_of(a.name)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] == PACKAGE:
            for a in node.names:
                alias[a.asname or a.name] = pkg_of(node.module,
                                                   a.name if node.module == PACKAGE else None)
    by: Counter[str] = Counter(alias.values())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == PACKAGE and PACKAGE in alias:
            by[node.attr if node.attr in pkgs else "(top-level modules)"] += 1   # llmbench.x
        elif isinstance(node, ast.Name) and node.id in alias and node.id != PACKAGE:
            by[alias[node.id]] += 1
    return by


def named_module(path: Path, root: Path, pkgs: set[str]) -> str | None:
    """The one package holding the module the file is named after (test_decoder.py ->
    client, for client/decoder.py), if exactly one does."""
    stem = path.stem.removeprefix("test_")
    hits = [p for p in pkgs if (root / PACKAGE / p / f"{stem}.py").is_file()
            or (root / PACKAGE / p / stem / "__init__.py").is_file()]
    return hits[0] if len(hits) == 1 else None


def place(path: Path, root: Path, pkgs: set[str], share: float) -> tuple[str | None, str]:
    """(the package folder it goes to, or None to stay; why)."""
    by = usage(path, pkgs)
    if not by:
        return None, "imports nothing from llmbench (it reads the source, the docs or files)"
    spread = ", ".join(f"{k} {v}" for k, v in by.most_common())
    if sum(by.values()) < 4:             # a helper or two: the file reads files
        return None, f"uses llmbench little (uses {spread}): it reads files"
    named = named_module(path, root, pkgs)
    if named and by[named]:
        return named, f"named after llmbench/{named}/{path.stem.removeprefix('test_')}; uses {spread}"
    (top, n), total = by.most_common(1)[0], sum(by.values())
    if top == "(top-level modules)":
        return None, f"mostly the top-level modules, not a package (uses {spread})"
    if n / total < share:
        return None, f"tests several packages (uses {spread})"
    return top, f"uses {spread}"


def plan(root: Path, share: float) -> tuple[list[tuple[Path, Path, str]], list[tuple[Path, str]]]:
    pkgs = packages(root)
    moves, stays = [], []
    for path in sorted((root / "tests" / "unit").glob("test_*.py")):
        pkg, why = place(path, root, pkgs, share)
        if pkg is None:
            stays.append((path, why))
        else:
            moves.append((path, path.parent / pkg / path.name, why))
    return moves, stays


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout


def deeper(text: str) -> tuple[str, int]:
    """A moved file's own ``__file__`` paths, one folder deeper."""
    n = 0

    def parents(m: re.Match) -> str:
        nonlocal n
        n += 1
        return f"{m.group(1)}parents[{int(m.group(2)) + 1}]"
    text = re.sub(r"(Path\(__file__\)(?:\.resolve\(\))?\.)parents\[(\d+)\]", parents, text)
    text, k = re.subn(r"(Path\(__file__\)(?:\.resolve\(\))?\.parent)(?![\w.]*parent)(?=\W)",
                      r"\1.parent", text)
    return text, n + k


def apply(root: Path, moves: list[tuple[Path, Path, str]]) -> None:
    for src, dst, _ in moves:
        dst.parent.mkdir(exist_ok=True)
        init = dst.parent / "__init__.py"
        if not init.exists():
            init.write_text("")
            _git(root, "add", str(init.relative_to(root)))
        _git(root, "mv", str(src.relative_to(root)), str(dst.relative_to(root)))
        text, n = deeper(dst.read_text(encoding="utf-8"))
        if n:
            dst.write_text(text, encoding="utf-8")
            print(f"  {dst.relative_to(root)}: {n} __file__ path(s) one level deeper")
    # every mention of a moved file, as a path or as a module, in the tracked text files
    subs = []
    for src, dst, _ in moves:
        a, b = src.relative_to(root).with_suffix(""), dst.relative_to(root).with_suffix("")
        subs.append((re.compile(re.escape(a.as_posix()) + r"(?=\.py\b|\b)(?!/)"), b.as_posix()))
        subs.append((re.compile(re.escape(".".join(a.parts)) + r"\b(?!\.py)"), ".".join(b.parts)))
    for rel in _git(root, "ls-files").splitlines():
        f = root / rel
        if f.suffix not in (".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".sh",
                            ".json", "") or not f.is_file():
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        new = text
        for pat, repl in subs:
            new = pat.sub(repl, new)
        if new != text:
            f.write_text(new, encoding="utf-8")
            print(f"  {rel}: mentions of moved files rewritten")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apply", action="store_true", help="git mv the files and fix references")
    ap.add_argument("--share", type=float, default=0.6,
                    help="the share of a file's llmbench imports one package must have (0.6)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    a = ap.parse_args()
    root = a.root.resolve()
    moves, stays = plan(root, a.share)
    print(f"{len(moves)} of {len(moves) + len(stays)} files in tests/unit/ move:")
    for src, dst, why in moves:
        print(f"  {src.relative_to(root)} -> {dst.relative_to(root)}   ({why})")
    print(f"{len(stays)} stay at the top:")
    for src, why in stays:
        print(f"  {src.relative_to(root)}: {why}")
    if a.apply:
        apply(root, moves)
        print("applied: run the suite, then commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
