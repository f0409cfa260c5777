"""The command line: Typer only, flags -> plans -> commands. ``llmbench`` is ``app.main``."""

import os

# numpy's OpenBLAS starts a thread per core as numpy is imported, and those threads spin on the
# cores left idle waiting for work llmbench never gives them (no matrix algebra here): ~0.1 s
# of CPU in every process's first second, competing with the event loop on a machine with a
# core to spare (issue 50 §2: a 1-request run's 0.42 s CPU was 0.13 s of it). One BLAS thread,
# unless the user chose; set here, by the command line that owns its process (worker
# processes inherit it), not by ``import llmbench`` in someone else's.
if "OPENBLAS_NUM_THREADS" not in os.environ:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    # marked as llmbench's: a server it starts (sweep --serve, --before) gets the user's
    # environment back, not this (servers/managed.their_environ)
    os.environ["LLMBENCH_SET_OPENBLAS"] = "1"

from llmbench.cli import dataclass_code  # noqa: E402

dataclass_code.install()                 # before the imports whose dataclasses it keeps

from llmbench.cli.app import app, main  # noqa: E402

__all__ = ["app", "main"]
