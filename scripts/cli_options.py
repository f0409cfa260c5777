#!/usr/bin/env python3
"""Every llmbench command and the option names it accepts, as JSON: what typer built from the
declarations, so an interpreter that builds them differently shows up as a different list.

    python scripts/cli_options.py            # print {"run": ["--api", ...], ...}
    python scripts/cli_options.py --write    # refresh tests/fixtures/cli_options.json
    python scripts/cli_options.py --check    # exit 1 with the differences when they disagree

tests/unit/test_cli_options.py compares the main interpreter's list with the fixture, and
scripts/check_pythons.py runs ``--check`` with every other interpreter the machine has (the
lists once differed on Python 3.10: issue 30).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cli_options.json"


def option_names() -> dict[str, list[str]]:
    import typer

    from llmbench.cli.app import app

    out: dict[str, list[str]] = {}

    def walk(cmd, prefix: str) -> None:     # typer may vendor its own click: duck-typed
        if hasattr(cmd, "commands"):
            for name, sub in sorted(cmd.commands.items()):
                walk(sub, f"{prefix} {name}".strip())
            return
        out[prefix] = sorted(o for p in cmd.params for o in (*p.opts, *p.secondary_opts)
                             if o.startswith("-"))
    walk(typer.main.get_command(app), "")
    return out


def differences(got: dict[str, list[str]], want: dict[str, list[str]]) -> list[str]:
    lines = []
    for cmd in sorted(set(got) | set(want)):
        g, w = set(got.get(cmd, [])), set(want.get(cmd, []))
        if cmd not in got or cmd not in want:
            lines.append(f"{cmd}: command {'missing' if cmd not in got else 'not expected'}")
        elif g != w:
            lines.append(f"{cmd}: missing {sorted(w - g)}, unexpected {sorted(g - w)}")
    return lines


def main(argv: list[str]) -> int:
    got = option_names()
    if "--write" in argv:
        FIXTURE.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {FIXTURE}")
        return 0
    if "--check" in argv:
        diff = differences(got, json.loads(FIXTURE.read_text()))
        for line in diff:
            print(line)
        return 1 if diff else 0
    print(json.dumps(got, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
