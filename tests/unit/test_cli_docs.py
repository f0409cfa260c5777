"""docs/cli.md is the command line as the specs declare it: regenerated, it is the same text
(scripts/gen_cli_docs.py), and it names every command and every option the command line has."""

import importlib.util

from tests.helpers import ROOT


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_cli_md_is_what_the_specs_make():
    want = _module("gen_cli_docs").render()
    got = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert got == want, "docs/cli.md is stale: run python scripts/gen_cli_docs.py"


def test_it_names_every_command_and_option():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    names = _module("cli_options").option_names()
    for command, flags in names.items():
        section = text.split(f"## llmbench {command}\n", 1)
        assert len(section) == 2, f"no section for {command}"
        body = section[1].split("\n## ", 1)[0]
        missing = [f for f in flags if f"`{f}`" not in body and f not in ("--config", "--json")]
        assert not missing, (command, missing)
