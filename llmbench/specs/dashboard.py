"""``llmbench dashboard FOLDER``'s spec: a finished run or sweep served as --dashboard shows it
when a run ends (what it does: llmbench/commands/dashboard.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

from llmbench.specs.options import INT, PATH, REQUIRED, Spec, count, option, problem


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
