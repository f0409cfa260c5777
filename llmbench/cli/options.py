"""A command's spec as typer options: the declarations live on the specs (llmbench/commands/,
llmbench/mock_server/cli.py; no Typer there, so the Python API reads the same ones).
``spec_command`` turns a spec's fields into a typer command's parameters, read from the fields'
metadata (no annotation is evaluated: building the command line stays cheap, on every Python),
and builds the spec from what typer parsed: the spec checks every value."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Callable

import typer

from llmbench.specs.options import REQUIRED, SAME, opt_of


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


# -- typer's coercion without pydantic ------------------------------------------------------
# typer 0.2x coerces every option's value (given or default) through a pydantic TypeAdapter
# built per parameter: importing pydantic and building ~100 adapters cost ~0.1 s of CPU on
# every `llmbench run`, a third of its start-up, for values the spec parses again anyway
# (options.Kind.parse). ``cheap_coercion`` gives each parameter a coercion that returns what
# typer's would for the plain values a command line gives and hands anything else to typer's
# own, built only then: so every odd value and every error message is still typer's, word for
# word (tests/unit/test_cli_coercion.py compares the two on every parameter of every command).
_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_FLOAT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?")

try:                                        # typer 0.2x; an older typer coerces with click
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:                         # pragma: no cover - the installed typer decides
    RuntimeParam = None                     # type: ignore[assignment,misc]


def _plain(annotation: Any, value: Any) -> tuple[bool, Any]:
    """(True, what typer's pydantic coercion makes of ``value``) when that is certain without
    it; (False, None) otherwise."""
    t = type(value)
    if annotation is str:
        return (True, value) if t is str else (False, None)
    if annotation is int:
        if t is int:
            return True, value
        return (True, int(value)) if t is str and _INT_TEXT.fullmatch(value) else (False, None)
    if annotation is float:
        if t is float or (t is int and abs(value) < 2 ** 53):
            return True, float(value)
        return (True, float(value)) if t is str and _FLOAT_TEXT.fullmatch(value) else (False, None)
    if annotation is Path:
        # the path's checks (exists, ...) are typer's own, on a Path as pydantic makes it
        plain = (t is str and value) or isinstance(value, Path)
        return (True, Path(value)) if plain else (False, None)
    return False, None


if RuntimeParam is not None:
    class _CheapParam(RuntimeParam):        # type: ignore[misc,valid-type]
        """typer's RuntimeParam for one parameter: plain values here, the rest typer's."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            ann = self.annotation
            item = _list_item(ann)
            if item is not None and isinstance(value, (list, tuple)):
                done = [_plain(item, v) for v in value]
                if all(ok for ok, _ in done):
                    return [self._path(v, param, ctx) if item is Path else v for _, v in done]
            elif item is None:
                ok, v = _plain(ann, value)
                if ok:
                    return self._path(v, param, ctx) if ann is Path else v
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param, ctx)

        def _path(self, value: Path, param: Any, ctx: Any) -> Any:
            return coerce_cli_path(value, self.parameter_info, path_type=Path, param=param,
                                   ctx=ctx)


def _list_item(annotation: Any) -> Any:
    """X for List[X] (a repeated option, several arguments); None for anything else."""
    if typing.get_origin(annotation) is list:
        args = typing.get_args(annotation)
        return args[0] if len(args) == 1 else None
    return None


def cheap_coercion(params: Any) -> None:
    """Give each of a click command's typer parameters the coercion above (a parameter with
    a parser, bounds or a non-Path path type keeps typer's)."""
    if RuntimeParam is None:
        return                              # pragma: no cover
    for p in params:
        desc = getattr(p, "type_descriptor", None)
        if desc is None or getattr(p, "_runtime_param", 0) is not None:
            continue
        info = desc.parameter_info
        ann = desc.annotation
        if (desc.file_annotation is not None or info.parser is not None or info.min is not None
                or info.max is not None or info.path_type is not None
                or (ann not in (str, int, float, Path, bool)
                    and _list_item(ann) not in (str, Path))):
            continue
        p._runtime_param = _CheapParam(annotation=ann, parameter_info=info)
