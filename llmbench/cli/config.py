"""--config FILE on the command line: the file's options (llmbench.specs.config.read), each
checked against the command's own options and typed as the command line would type it, become
the command's defaults (click's default_map), so whatever the command line gives still wins.

A key the command does not take, or a value its option cannot take, is one line naming the
file, the key and what to do, and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmbench.errors import EXIT_USAGE, UsageError


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _options(command: Any) -> dict[str, tuple[Any, bool]]:
    """Every name a key may use -> (the parameter, whether it names the flag's off side)."""
    from llmbench.specs.config import normalize
    out: dict[str, tuple[Any, bool]] = {}
    for p in command.params:
        if p.name in ("config", "help") or not getattr(p, "expose_value", True):
            continue
        out[p.name] = (p, False)
        for o in p.opts:
            out.setdefault(normalize(o), (p, False))
        for o in getattr(p, "secondary_opts", ()):
            out.setdefault(normalize(o), (p, True))
    return out


def _cast(param: Any, ctx: Any, value: Any) -> Any:
    """The value as the option's type, as the command line would convert it (typer 0.2x has
    its own parameter classes; click's have type_cast_value)."""
    if isinstance(value, bool) and getattr(param, "is_flag", False):
        return value
    if hasattr(param, "type_cast_value"):
        return param.type_cast_value(ctx, value)
    if hasattr(param, "get_runtime_param"):
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)
    return value


def defaults_from(ctx: Any, path: Path) -> dict[str, Any]:
    """{parameter name: value} from the file, every key and value checked."""
    from llmbench.specs.config import read
    try:
        doc = read(path)
    except UsageError as exc:
        raise _fail(str(exc))
    cmd = ctx.command_path
    known = _options(ctx.command)
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key not in known:
            raise _fail(f"--config {path}: unknown key {key!r}: not an option of '{cmd}'; "
                        f"remove it or see '{cmd} --help'")
        param, off = known[key]
        if value is None:
            continue
        if off:                                   # no_stream = true -> stream = false
            if not isinstance(value, bool):
                raise _fail(f"--config {path}: {key} = {value!r}: expected true or false; "
                            "fix the value")
            value = not value
        if getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1:
            if isinstance(value, dict):
                value = [f"{k}={v}" for k, v in value.items()]
            value = [str(v) if not isinstance(v, str) else v
                     for v in (value if isinstance(value, list) else [value])]
        elif isinstance(value, dict):
            raise _fail(f"--config {path}: {key}: a table is not a value of this option; "
                        f"write it as {key} = VALUE at the top level")
        elif isinstance(value, list):
            value = ",".join(str(v) for v in value)      # users = [1, 2, 4] -> '1,2,4'
        elif getattr(param, "is_flag", False) and not isinstance(value, bool):
            raise _fail(f"--config {path}: {key} = {value!r}: expected true or false; "
                        "fix the value")
        try:
            out[param.name] = _cast(param, ctx, value)
        except Exception as exc:  # noqa: BLE001 - click's BadParameter, typer's own
            why = getattr(exc, "message", None) or str(exc)
            raise _fail(f"--config {path}: {key} = {value!r}: {' '.join(str(why).split())}; "
                        "fix the value")
    return out
