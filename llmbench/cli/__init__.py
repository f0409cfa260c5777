"""The command line: Typer only, flags -> plans -> commands. ``llmbench`` is ``app.main``."""

from llmbench.cli.app import app, main

__all__ = ["app", "main"]
