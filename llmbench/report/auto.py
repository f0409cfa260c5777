"""The report written at the end of every run: never at the cost of the run's own results."""

from __future__ import annotations

import sys
from pathlib import Path


def write_report(run_dir: Path) -> Path | None:
    try:
        from llmbench.report.html import write
        return write(run_dir)
    except Exception as exc:  # noqa: BLE001 - the measurements are safe on disk already
        print(f"warning: could not write report.html ({type(exc).__name__}: {exc}); "
              f"run 'llmbench report {run_dir}' to retry", file=sys.stderr)
        return None
