"""A command's spec as typer options: the declarations live on the specs (llmbench/commands/,
llmbench/mock_server/cli.py; no Typer there, so the Python API reads the same ones).
``spec_command`` turns a spec's fields into a typer command's parameters, read from the fields'
metadata (no annotation is evaluated: building the command line stays cheap, on every Python),
and builds the spec from what typer parsed: the spec checks every value."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Annotated, Any, Callable

import typer

from llmbench.specs.options import (  # noqa: F401  (re-exported)
    MAX_COUNT, MAX_DURATION_S, MAX_NUMBER, P_GATES, P_LOAD, P_NET, P_OUTPUT, P_REQUEST, P_STEPS,
    P_TARGET, P_VLLM, P_WORKLOAD, REQUIRED, SAME, Spec, UsageError, count, duration, number,
    opt_of, parse_labels, parse_think, seconds, whole)


def spec_parameters(spec: type) -> list[inspect.Parameter]:
    """A spec's fields as typer parameters: each field's command line type, flags, help, panel
    and the command line's default (``...``: required)."""
    out = []
    for f in dataclasses.fields(spec):
        o = opt_of(f)
        default = f.default if o.cli_default is SAME else o.cli_default
        default = ... if default is REQUIRED else default
        cli = typing.Optional[o.kind.cli] if default is None else o.kind.cli
        kw: dict[str, Any] = {"help": o.help}
        if o.metavar is not None:
            kw["metavar"] = o.metavar
        if o.argument:
            decl = typer.Argument(**kw)
        else:
            if o.panel is not None:
                kw["rich_help_panel"] = o.panel
            decl = typer.Option(*o.decls, **kw)
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                     annotation=Annotated[cli, decl]))
    return out


def spec_command(spec: type, fn: Callable[..., Any], *extra: inspect.Parameter) -> Callable[..., Any]:
    """A typer command whose options are ``spec``'s fields (then ``extra`` typer parameters,
    e.g. --json), calling ``fn(spec(**fields), **extra)``."""
    params = spec_parameters(spec) + list(extra)
    names = {p.name for p in extra}

    def wrapper(**kwargs: Any) -> Any:
        kwargs.pop("config", None)      # --config did its work as the options were read
        rest = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
        return fn(spec(**kwargs), **rest)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper
