"""``llmbench dashboard FOLDER``'s spec: a finished run or sweep served as --dashboard shows it
when a run ends (llmbench/report/dashboard/server.py's ``serve_folder``), until Ctrl-C."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator, Any, Callable

from llmbench.commands.options import INT, PATH, REQUIRED, Spec, UsageError, count, option, problem


@dataclasses.dataclass
class DashboardSpec(Spec):
    """``llmbench dashboard FOLDER``: a finished run or sweep on a page, to look at later or to
    share on a LAN (``host="0.0.0.0"`` only when asked)."""

    command = "dashboard"

    folder: Path | str = option("A run or sweep folder (results/<date>-<kind>...).", kind=PATH, argument=True, default=REQUIRED)
    host: str = option("The address to listen on (0.0.0.0: every interface, to share the page on a LAN).", default="127.0.0.1", metavar="ADDR")
    port: int = option("The port (0: any free one, printed).", kind=INT, default=0)

    def _check(self) -> Iterator[str]:
        yield from problem(count, self.port, "--port", lo=0, hi=65535)

    def perform(self, listening: Callable[[int], Any]) -> None:
        """Serve until Ctrl-C; ``listening(port)`` once the page answers."""
        from llmbench.report.dashboard.server import folder_html, serve_folder
        folder = Path(self.folder)
        if not folder.is_dir():
            raise UsageError(f"{folder}: no such folder; give a run or sweep folder "
                             "(llmbench runs lists them)")
        text = folder_html(folder)
        try:
            serve_folder(folder, text, self.host, self.port, listening)
        except OSError as exc:
            raise UsageError(f"--host {self.host} --port {self.port}: cannot listen there "
                             f"({exc.strerror or exc}); choose a free port, or 0 for any")
