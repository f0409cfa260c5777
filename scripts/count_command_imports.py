"""How many names the command modules import from the analysis and results layers (issue 44
§2: "the modules in commands/ import at most 12 names from analysis/ and results/ together";
78 on main before the one assembler).

  python scripts/count_command_imports.py          # the total
  python scripts/count_command_imports.py --list   # ... and each name, module by module

A name is one (command module, imported thing) pair, counted once per command module however
often it is imported there: ``from llmbench.analysis import checks, slo`` is two names,
``from llmbench.results.schema import Run`` one, ``import llmbench.analysis.x`` one. Imports
inside functions count the same as those at the top (a command that reaches into analysis
lazily still depends on it); a second line gives the top level alone (summed over the modules,
and distinct over commands/). Every module under llmbench/commands/ is read, the option and
spec modules included.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("llmbench.analysis", "llmbench.results")


def _below(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in LAYERS)


def names_of(path: Path, top_only: bool = False) -> set[str]:
    """The analysis/results names one module imports, as 'module.name' (``top_only``: those
    of the module's own top level, not the lazy ones inside functions)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in (tree.body if top_only else ast.walk(tree)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and _below(node.module):
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if _below(a.name))
    return found


def count(root: Path = ROOT, top_only: bool = False) -> dict[str, set[str]]:
    """Each command module (relative path) with the names it imports, those with any."""
    out = {}
    for path in sorted((root / "llmbench" / "commands").rglob("*.py")):
        names = names_of(path, top_only)
        if names:
            out[str(path.relative_to(root))] = names
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="each name, module by module")
    args = ap.parse_args()
    found = count()
    total = sum(len(v) for v in found.values())
    if args.list:
        for mod, names in found.items():
            print(f"{mod}: {len(names)}")
            for n in sorted(names):
                print(f"  {n}")
    print(f"{total} names imported from llmbench.analysis and llmbench.results by "
          f"{len(found)} command modules "
          f"({len({n.rsplit('.', 1)[0] for v in found.values() for n in v})} modules imported)")
    # the same at the modules' top level only (lazy imports left out), summed over the
    # modules, and as distinct names over the whole of commands/
    top = count(top_only=True)
    print(f"top level only: {sum(len(v) for v in top.values())} names summed over "
          f"{len(top)} modules, {len(set().union(*top.values()))} distinct")


if __name__ == "__main__":
    main()
