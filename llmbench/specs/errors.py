"""Our own input errors as the command line prints them: the command line (llmbench/cli/app.py)
and the Python API (llmbench/api.py) both ask ``translate`` what an exception is, so a bad
value is one line (and its exit code) whichever way the spec came."""

from __future__ import annotations

import sys

from llmbench.errors import EXIT_WRITE, LlmbenchError, UsageError, failure

# Our input errors, by module: looked up only in modules already imported (an error class
# whose module was never imported cannot have been raised), so the CLI does not import numpy
# (through results) just to print help or reject a flag.
_INPUT_ERRORS = {"llmbench.results.jsonfile": ("RunFolderError",), "llmbench.specs.thresholds": ("ThresholdError",),
                 "llmbench.analysis.compare": ("CompareError",),
                 "llmbench.client.target": ("TargetError",), "llmbench.client.netconfig": ("NetError",),
                 "llmbench.workload.files": ("DatasetError",),
                 "llmbench.workload.tokenizer": ("TokenizerError",)}


def _input_errors() -> tuple[type, ...]:
    out = []
    for module, names in _INPUT_ERRORS.items():
        mod = sys.modules.get(module)
        out += [getattr(mod, n) for n in names if mod is not None and hasattr(mod, n)]
    return tuple(out)


def translate(exc: BaseException) -> LlmbenchError | None:
    """Our own input errors (and a path that cannot be used) as the LlmbenchError they are,
    with the line the command line prints; None for anything else (a bug: let it show)."""
    if isinstance(exc, LlmbenchError):
        return exc
    if isinstance(exc, _input_errors()):
        return UsageError(str(exc))
    if isinstance(exc, OSError) and exc.filename is not None:
        from llmbench.results.folder import is_write_error, write_error_line
        if is_write_error(exc):
            # the disk, not the path: full, a file over its size limit, read-only
            return failure(write_error_line(exc), EXIT_WRITE)
        # a path the user gave (--out, --output, --html, --png, a dataset) is not usable
        return UsageError(f"{exc.filename}: {exc.strerror}; check the path you gave")
    return None
