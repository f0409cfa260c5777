"""The command line: Typer only, flags -> plans -> commands. ``llmbench`` is ``app.main``."""

from llmbench.cli import dataclass_code

dataclass_code.install()                 # before the imports whose dataclasses it keeps

from llmbench.cli.app import app, main  # noqa: E402

__all__ = ["app", "main"]
