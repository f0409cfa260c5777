#!/usr/bin/env python3
"""Write docs/cli.md, the command line reference, from the commands' specs: every command, its
options by help panel, each with its flags, the Python field and type the API takes, its default
and its help, exactly as the command line declares them.

    python scripts/gen_cli_docs.py            # rewrite docs/cli.md
    python scripts/gen_cli_docs.py --check    # exit 1 when docs/cli.md is not what it would write

tests/unit/test_cli_docs.py fails when docs/cli.md is stale.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "cli.md"

# the spec modules' type aliases, spelled out
ALIASES = {"Seconds": "float | timedelta | str", "Tokens": "int | tuple[int, int] | str",
           "Span": "tuple[float, float] | float | timedelta | str",
           "Workers": 'int | Literal["auto"] | str'}
API = {"run": "run", "ramp": "ramp", "sweep": "sweep", "probe": "probe", "report": "report",
       "compare": "compare", "mock": "mock"}


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;") \
        .replace("\n", " ")


def _type(t: Any) -> str:
    text = t if isinstance(t, str) else t.__name__ if isinstance(t, type) else str(t)
    for alias, full in ALIASES.items():
        text = text.replace(alias, full)
    return text.replace("typing.", "").replace("pathlib.", "")


def _default(v: Any) -> str:
    from llmbench.specs.options import REQUIRED
    if v is REQUIRED or v is Ellipsis:
        return "required"
    if v is None:
        return ""
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _flags(name: str, decls: tuple[str, ...], argument: bool, metavar: str | None) -> str:
    if argument:
        return f"`{metavar or name.upper()}`"
    flags = [d for decl in decls for d in decl.split("/")] or ["--" + name.replace("_", "-")]
    shown = ", ".join(f"`{f}`" for f in flags)
    return f"{shown} `{metavar}`" if metavar else shown


def rows_of(entry: Any) -> list[tuple[str | None, str, str, str, str]]:
    """(panel, flags, python, default, help) of each option of a command."""
    from llmbench.specs.options import SAME, opt_of
    out = []
    for f in dataclasses.fields(entry):
        o = opt_of(f)
        default = f.default if o.cli_default is SAME else o.cli_default
        out.append((o.panel if not o.argument else "Arguments",
                    _flags(f.name, o.decls, o.argument, o.metavar),
                    f"`{f.name}: {_type(f.type)}`", _default(default), o.help))
    return out


def render() -> str:
    from llmbench.cli.app import commands
    lines = [
        "# The command line",
        "",
        "Every command and every option, generated from the commands' specs "
        "(`python scripts/gen_cli_docs.py`; `tests/unit/test_cli_docs.py` fails when this page "
        "is stale). The same options are the Python API's (`llmbench.run(llmbench.RunSpec(...))` "
        "or `llmbench.run(**fields)`): the *Python* column is the spec's field and the types "
        "it takes; a field also takes the command line's text (`\"2m\"` for a duration). "
        "`--config FILE` (run, ramp, sweep, probe, mock, report, compare) reads the options "
        "from a file, `--json` (run, ramp) prints the result as JSON: see the "
        "[README](../README.md#scripting---config-and---json).",
        "",
    ]
    table = commands()
    lines += ["Commands: " + ", ".join(f"[`{n}`](#llmbench-{n.replace(' ', '-')})"
                                       for n in table), ""]
    for name, (spec, fn, config, json_out) in table.items():
        lines += [f"## llmbench {name}", ""]
        summary = (fn.__doc__ or "").strip()
        lines += [summary, ""]
        doc = spec.__doc__ if name != "mock" else None
        if name in API:
            how = (f"`llmbench.{API[name]}({spec.__name__}(...))` or "
                   f"`llmbench.{API[name]}(**fields)`" if name != "mock" else
                   "`with llmbench.mock(**fields) as url:` (the fields of "
                   "`llmbench.mock_server.cli.MockOptions`)")
            lines += [f"Python: {how}.", ""]
        if doc and name in API:
            lines += [" ".join(doc.split()).replace("``", "`"), ""]
        extra = [x for x, on in (("`--config FILE`", config), ("`--json`", json_out)) if on]
        if extra:
            lines += ["Also: " + ", ".join(extra) + ".", ""]
        panels: dict[str, list[tuple[str, str, str, str]]] = {}
        for panel, flags, py, default, help_ in rows_of(spec):
            panels.setdefault(panel or "Options", []).append((flags, py, default, help_))
        for panel, rows in panels.items():
            lines += [f"### {name}: {panel}", "",
                      "| Option | Python | Default | What it does |", "|---|---|---|---|"]
            lines += [f"| {_cell(flags)} | {_cell(py)} | {_cell(default)} | {_cell(help_)} |"
                      for flags, py, default, help_ in rows]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python scripts/gen_cli_docs.py")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
