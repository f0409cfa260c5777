"""``llmbench dashboard FOLDER``: a finished run or sweep served as --dashboard shows it when a
run ends (llmbench/report/dashboard/server.py's ``serve_folder``), until Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from llmbench.errors import UsageError
from llmbench.specs.dashboard import DashboardSpec


def perform_dashboard(spec: DashboardSpec, listening: Callable[[int], Any]) -> None:
    """Serve until Ctrl-C; ``listening(port)`` once the page answers."""
    from llmbench.report.dashboard.server import folder_html, serve_folder
    folder = Path(spec.folder)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder; give a run or sweep folder "
                         "(llmbench runs lists them)")
    text = folder_html(folder)
    try:
        serve_folder(folder, text, spec.host, spec.port, listening)
    except OSError as exc:
        raise UsageError(f"--host {spec.host} --port {spec.port}: cannot listen there "
                         f"({exc.strerror or exc}); choose a free port, or 0 for any")
