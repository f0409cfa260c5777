"""Every `llmbench ...` command the README and docs/*.md show uses options that command has.

Stale text is how a README misleads: a renamed or removed flag in an example fails for the
newcomer who copies it. Commands are taken from code blocks (continued lines joined) and from
inline code; each option is looked up in that command's declared options (what typer
accepts, the same list tests/unit/test_cli_options.py checks against its fixture).
"""

import importlib.util
import re
import shlex
from pathlib import Path

from tests.helpers import ROOT  # noqa: E402


def _options():
    spec = importlib.util.spec_from_file_location("cli_options", ROOT / "scripts" / "cli_options.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.option_names()


def readme_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) of every llmbench command in code blocks and inline code."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    in_block = output = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = not in_block
            # ```text: a command's output, as printed (its words are not commands)
            output = in_block and line.strip() == "```text"
            i += 1
            continue
        if in_block and output:
            i += 1
            continue
        if in_block:
            m = re.search(r"(?:^|[\s&;(]|/bin/)(llmbench\s.*)$", line)
            start = i
            if m and not line.lstrip().startswith("#"):
                cmd = m.group(1)
                while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
                out.append((start + 1, cmd))
        else:
            for m in re.finditer(r"`(llmbench\s[^`]+)`", line):
                out.append((i + 1, m.group(1)))
        i += 1
    return out


def _split(cmd: str) -> list[str]:
    cmd = re.sub(r"\s#.*$", "", cmd)                    # a trailing comment
    cmd = re.split(r"\s(?:&&|\||;|>)\s", cmd)[0]        # the first command of a pipeline
    try:
        return shlex.split(cmd)
    except ValueError:                                  # an unbalanced quote in prose
        return cmd.split()


def check_commands(name: str, text: str, names: dict) -> tuple[list[tuple[int, str]], int, list[str]]:
    """(the commands found, how many were checked, the problems) for one Markdown file."""
    groups = {c.split()[0] for c in names if " " in c}
    commands = readme_commands(text)
    checked, problems = 0, []
    for lineno, cmd in commands:
        words = _split(cmd)[1:]
        if not words or words[0].startswith("-"):
            continue                                     # `llmbench --version`, --help
        command = words[0]
        rest = words[1:]
        if command in groups and rest:
            command, rest = f"{command} {rest[0]}", rest[1:]
        if command not in names:
            if re.fullmatch(r"[a-z]+", command):
                problems.append(f"{name}:{lineno}: no command {command!r}: {cmd}")
            continue                                     # a placeholder such as COMMAND
        checked += 1
        for prev, w in zip(["", *rest], rest):
            if prev == "--mock-options":                 # the mock's own options, quoted
                problems += [f"{name}:{lineno}: mock has no {f}: {cmd}" for f in shlex.split(w)
                             if f.startswith("--") and f.split("=", 1)[0] not in names["mock"]]
                continue
            if not w.startswith("-") or w in ("-", "--") or re.fullmatch(r"-\d.*", w) or " " in w:
                continue
            flag = w.split("=", 1)[0]
            if flag not in names[command] and flag not in ("--help",):
                problems.append(f"{name}:{lineno}: {command} has no {flag}: {cmd}")
    return commands, checked, problems


def test_every_option_in_the_readme_exists_on_its_command():
    names = _options()
    commands, checked, problems = check_commands("README.md", (ROOT / "README.md").read_text(), names)
    assert not problems, "\n".join(problems)
    # the README shows every command at least once, and enough of them to be worth checking
    shown = {(_split(c)[1:2] or [""])[0] for _, c in commands}
    assert {"run", "ramp", "sweep", "probe", "mock", "report", "compare", "runs"} <= shown
    # 50 when written (issue 31); 55 when docs/ began (issue 25); 30 when the commands' examples
    # moved to docs/commands.md and the README kept a one-screen tour (issue 38)
    assert checked >= 25, checked


def test_every_option_in_the_docs_exists_on_its_command():
    """docs/*.md took the README's reference material (issue 25): its commands are checked too."""
    names = _options()
    total, problems = 0, []
    for path in sorted((ROOT / "docs").glob("*.md")):
        _, checked, found = check_commands(f"docs/{path.name}", path.read_text(), names)
        total += checked
        problems += found
    assert not problems, "\n".join(problems)
    assert total >= 40, total              # 15 when written (issue 25); 60 with docs/commands.md (issue 38)


def test_the_extractor_finds_continued_and_inline_commands():
    text = ("Run `llmbench run --requests 6` here.\n```sh\n"
            "llmbench ramp --url U \\\n    --users 1,2   # comment\n"
            ".venv/bin/llmbench compare a b\n# llmbench not this\n```\n")
    got = [c for _, c in readme_commands(text)]
    assert got == ["llmbench run --requests 6", "llmbench ramp --url U  --users 1,2   # comment",
                   "llmbench compare a b"]
