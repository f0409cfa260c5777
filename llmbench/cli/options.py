"""The option groups as typer options: the declarations live in llmbench/commands/options.py
(on llmbench/options.py's machinery; no Typer there, so the Python API reads the same ones);
``with_groups`` turns each ``Opt`` into a ``typer.Option`` and spreads a group's fields into a
command's signature."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Annotated, Any, Callable

import typer

from llmbench.commands.options import (  # noqa: F401  (re-exported)
    MAX_COUNT, MAX_DURATION_S, MAX_NUMBER, P_GATES, P_LOAD, P_NET, P_OUTPUT, P_REQUEST, P_STEPS,
    P_TARGET, P_VLLM, P_WORKLOAD, GroupDefaults, Layout, Opt, OptionGroup, OutputOpts,
    RequestOpts, ServerOpts, TargetOpts, UsageError, WorkloadOpts, count, duration, hints,
    group_defaults, number, parse_labels, parse_think, seconds, whole)


_TYPER: dict[tuple[int, str | None], tuple[Any, Any]] = {}


def typer_annotation(ann: Any, extra_help: str | None = None) -> Any:
    """``Annotated[T, Opt(...)]`` -> ``Annotated[T, typer.Option(...)]`` (help text added);
    once per declaration and process: every command that takes a group shares its options, as
    they shared one module-level alias before (building Annotated types is most of the cost)."""
    got = _TYPER.get((id(ann), extra_help))
    if got is not None and got[0] is ann:
        return got[1]
    out = _typer_annotation(ann, extra_help)
    _TYPER[(id(ann), extra_help)] = (ann, out)
    return out


def _typer_annotation(ann: Any, extra_help: str | None) -> Any:
    args = typing.get_args(ann)
    if len(args) < 2 or not isinstance(args[1], Opt):
        return ann
    base, o = args[0], args[1]
    text = f"{o.help} {extra_help}" if extra_help else o.help
    kw: dict[str, Any] = {"help": text}
    if o.panel is not None:
        kw["rich_help_panel"] = o.panel
    if o.metavar is not None:
        kw["metavar"] = o.metavar
    return Annotated[base, typer.Option(*o.decls, **kw)]


def with_groups(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Spread every ``OptionGroup`` parameter of ``fn`` into typer options, and gather them
    back into one group value per call. A parameter's default may be ``group_defaults(...)``:
    other defaults for this command, help text added, or fields left out (``omit``)."""
    sig = inspect.signature(fn)
    fn_hints = typing.get_type_hints(fn, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[str], dict[str, Any]]] = {}
    for name, p in sig.parameters.items():
        cls = _group_class(fn_hints.get(name, p.annotation))
        if cls is not None:
            custom = p.default if isinstance(p.default, GroupDefaults) else GroupDefaults({})
            fields_hints = hints(cls)
            taken, fixed = [], {}
            for f in dataclasses.fields(cls):
                if f.name in custom.omit:
                    fixed[f.name] = custom.values.get(f.name, f.default)
                    continue
                ann = typer_annotation(fields_hints[f.name], custom.help.get(f.name))
                params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                                default=custom.values.get(f.name, f.default),
                                                annotation=ann))
                taken.append(f.name)
            groups[name] = (cls, taken, fixed)
        else:
            ann = typer_annotation(fn_hints.get(name, p.annotation))
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=ann))
    names = [p.name for p in params]
    if len(names) != len(set(names)):
        raise TypeError(f"{fn.__name__}: an option is declared twice: "
                        f"{sorted(n for n in names if names.count(n) > 1)}")

    def wrapper(**kwargs: Any) -> Any:
        for gname, (cls, taken, fixed) in groups.items():
            kwargs[gname] = cls(**{f: kwargs.pop(f) for f in taken}, **fixed)
        return fn(**kwargs)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def _group_class(ann: Any) -> type | None:
    """The ``OptionGroup`` subclass a parameter is annotated with, else None. Before Python
    3.11, ``get_type_hints`` turns ``group: G = None`` into ``Optional[G]`` (a Union), which
    once hid every group on 3.10: each was passed to typer as one option (issue 30)."""
    if typing.get_origin(ann) is typing.Union:
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        ann = args[0] if len(args) == 1 else None
    if isinstance(ann, type) and issubclass(ann, OptionGroup):
        return ann
    return None


def command_of(layout: Layout, fn: Callable[..., Any], *extra: inspect.Parameter) -> Callable[..., Any]:
    """A typer command whose options are ``layout``'s groups (then ``extra`` typer parameters,
    e.g. --json), calling ``fn(**groups, **extra)``."""
    params = [inspect.Parameter(g, inspect.Parameter.KEYWORD_ONLY, annotation=cls,
                                default=custom if custom is not None else None)
              for g, cls, custom in layout.groups] + list(extra)

    def wrapper(**kwargs: Any) -> Any:
        kwargs.pop("config", None)      # --config did its work as the options were read
        return fn(**kwargs)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return with_groups(wrapper)
