"""How an option is declared and checked, for every command line of llmbench (run, ramp, sweep,
probe and the mock): the declaration (``Opt`` in a dataclass field's annotation, ``OptionGroup``,
a command's ``Layout``), the coercion of a Python value to an option's type, and the checks for
the values a user types: every number finite and in its range, or one line.

A bottom layer: it imports only ``llmbench.errors``, so both the commands (llmbench/commands/,
whose options.py declares their groups with it) and the mock (llmbench/mock_server/cli.py) build on it
without importing each other. No Typer here: llmbench/cli/options.py turns each declaration into
a typer option, the Python API (llmbench/api.py) takes each as a keyword argument.

Typer turns "nan" and "inf" into floats without complaint, and a NaN compares false with every
bound, so `--duration nan` once ran forever. Each helper here raises ``UsageError`` with the flag
name and what to type instead; the CLI turns it into one line on stderr and exit 2, the API
raises it (llmbench.UsageError).
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from pathlib import Path
from typing import Any, List

from llmbench.errors import UsageError  # noqa: F401  (re-exported: opt.UsageError)

# one number and its unit; a duration is one or more of them: 90, 90s, 500ms, 1m30s, 1h2m
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}

# Ceilings for what a person can wait for (issue 23): `--duration 1e308` once ran forever. Any
# single duration is at most 30 days; a count at most 10^8 (at 1,000 requests/s, 28 hours); a
# plain number (ms, users, goodput, temperature) at most 10^9 unless its flag sets its own bound.
MAX_DURATION_S = 30 * 86400.0
MAX_COUNT = 100_000_000
MAX_NUMBER = 1e9
_LIMIT = "at most 30 days (720h)"


def duration(text: str, flag: str, *, zero_ok: bool = True) -> float:
    """'90', '90s', '500ms', '2m', '1m30s', '1h2m3.5s' -> seconds; finite and >= 0 (> 0 unless zero_ok)."""
    t = str(text).strip().lower().replace(" ", "")
    hint = "expected a duration such as 30s, 500ms, 2m or 1m30s"
    if t.startswith("-"):
        raise UsageError(f"{flag} {text!r}: must not be negative; {hint}")
    seconds: float | None = None
    try:
        seconds = float(t)               # a bare number is seconds
    except ValueError:
        pos, total = 0, 0.0
        for m in _PART.finditer(t):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT_S[m.group(2)]
            pos = m.end()
        if pos == len(t) and pos > 0:
            seconds = total
    if seconds is None or not math.isfinite(seconds):
        raise UsageError(f"{flag} {text!r}: {hint}")
    if seconds < 0:
        raise UsageError(f"{flag} {text!r}: must not be negative; {hint}")
    if not zero_ok and seconds == 0:
        raise UsageError(f"{flag} {text!r}: must be above 0; {hint}")
    if seconds > MAX_DURATION_S:
        raise UsageError(f"{flag} {text!r}: {_LIMIT}, so that a run ends; {hint}")
    return seconds


def seconds(value: float, flag: str, *, zero_ok: bool = False) -> float:
    """A float flag in seconds (the timeouts): finite, positive (or >= 0 when zero_ok)."""
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        need = ">= 0" if zero_ok else "above 0"
        raise UsageError(f"{flag} {value:g}: must be a finite number of seconds {need}, e.g. 30")
    if value > MAX_DURATION_S:
        raise UsageError(f"{flag} {value:g}: {_LIMIT} = {MAX_DURATION_S:.0f} seconds, e.g. 30")
    return value


def number(value: float | None, flag: str, *, lo: float | None = None, hi: float | None = None,
           lo_open: bool = False, hi_open: bool = False) -> float | None:
    """A float flag: finite, and within [lo, hi] (open ends when asked; hi at most MAX_NUMBER
    unless given). None passes."""
    if value is None:
        return None
    hi = MAX_NUMBER if hi is None else hi      # 1e308 ms of TTFT is a mock that never answers
    bad = not math.isfinite(value)
    if lo is not None:
        bad = bad or value < lo or (lo_open and value == lo)
    if hi is not None:
        bad = bad or value > hi or (hi_open and value == hi)
    if bad:
        parts = []
        if lo is not None:
            parts.append(f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None:
            parts.append(f"{'<' if hi_open else '<='} {hi:g}")
        rng = (" " + " and ".join(parts)) if parts else ""
        raise UsageError(f"{flag} {value:g}: must be a finite number{rng}")
    return value


def count(value: int | None, flag: str, *, lo: int = 1, hi: int | None = None) -> int | None:
    """An integer flag at least ``lo`` and at most ``hi`` (MAX_COUNT unless given). None
    passes."""
    if value is None:
        return None
    top = MAX_COUNT if hi is None else hi      # 10^12 requests is a schedule that never ends
    if value < lo or value > top:
        rng = f"at least {lo}" if hi is None and value < lo else f"between {lo} and {top}"
        raise UsageError(f"{flag} {value}: must be {rng}")
    return value


def whole(value: float, flag: str) -> int:
    """A float that must be a whole number (users)."""
    if not math.isfinite(value) or value != int(value):
        raise UsageError(f"{flag} {value:g}: users come in whole numbers, e.g. 1,2,4,8")
    return int(value)


# -- declarations ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Opt:
    """One option's declaration, without Typer: its help, its help panel, its flag names when
    they are not the field's name (``--api-key``, ``--stream/--no-stream``) and its metavar.
    A field annotated ``Annotated[T, Opt(...)]`` is an option of every command that takes the
    field's group."""

    help: str
    panel: str | None = None
    decls: tuple[str, ...] = ()
    metavar: str | None = None

    def flag(self, name: str) -> str:
        """The flag the user types for field ``name`` (the first of ``decls``, else --name)."""
        return self.decls[0].split("/")[0] if self.decls else "--" + name.replace("_", "-")


def _opt(help: str, panel: str | None, *decls: str, metavar: str | None = None) -> Opt:
    return Opt(help, panel, decls, metavar)


class OptionGroup:
    """A set of options declared once. Subclasses are dataclasses whose fields are annotated
    ``Annotated[T, Opt(...)]``; the CLI's ``with_groups`` spreads their fields into a command's
    signature and gathers them back into one value, the API fills them from keywords."""


def parse_think(text: str, flag: str = "--think") -> tuple[float, float]:
    """'5s-10s', '3', '0' -> (lo, hi) seconds."""
    if "-" in text.strip().lstrip("-"):
        lo, hi = text.split("-", 1)
        a, b = duration(lo, flag), duration(hi, flag)
    else:
        a = b = duration(text, flag)
    if a < 0 or b < a:
        raise UsageError(f"{flag} {text!r}: need 0 <= LO <= HI, e.g. 5s-10s")
    return a, b


def parse_labels(items: list[str] | None, flag: str = "--label") -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"{flag} {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@dataclasses.dataclass
class GroupDefaults:
    """A command's own defaults for a group's options (the declaration stays the group's):
    other values, help text added, or fields the command does not take (``omit``)."""

    values: dict[str, Any]
    help: dict[str, str] = dataclasses.field(default_factory=dict)
    omit: tuple[str, ...] = ()


def group_defaults(*, help: dict[str, str] | None = None, omit: tuple[str, ...] = (),
                   **values: Any) -> Any:
    """A command's own defaults for a group's options (the declaration stays the group's)."""
    return GroupDefaults(values, help or {}, omit)


# -- a command's options as data: the groups it takes, in the order its help shows them -----

@dataclasses.dataclass(frozen=True)
class Field:
    """One option of a command: its field in a group, its type, its declaration, its default."""

    name: str
    group: str
    cls: type
    type: Any
    opt: Opt
    default: Any

    @property
    def flag(self) -> str:
        return self.opt.flag(self.name)


_HINTS: dict[type, dict[str, Any]] = {}


def hints(cls: type) -> dict[str, Any]:
    """A group's field annotations, evaluated once per process (every command that takes the
    group reads them; evaluating them is most of what building the command line costs)."""
    got = _HINTS.get(cls)
    if got is None:
        got = _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    return got


@dataclasses.dataclass(frozen=True)
class Layout:
    """A command's options: (parameter name, group class, that command's GroupDefaults or None)
    in the order of its help. The CLI builds the command's signature from it, the API its
    keywords; both get the same names, defaults and checks."""

    groups: tuple[tuple[str, type, Any], ...]

    def fields(self) -> dict[str, Field]:
        out: dict[str, Field] = {}
        for gname, cls, custom in self.groups:
            custom = custom or GroupDefaults({})
            hinted = hints(cls)
            for f in dataclasses.fields(cls):
                if f.name in custom.omit:
                    continue
                base, opt = typing.get_args(hinted[f.name])[:2]
                default = custom.values.get(f.name, f.default)
                if f.name in out:
                    raise TypeError(f"option {f.name} is declared twice")
                out[f.name] = Field(f.name, gname, cls, base, opt, default)
        return out

    def build(self, values: dict[str, Any], what: str = "llmbench") -> dict[str, Any]:
        """Keyword arguments (option names, snake_case) -> one group value per group; a name
        the command does not take, a missing required option or a value of the wrong type is
        a UsageError naming the option."""
        fields = self.fields()
        unknown = sorted(set(values) - set(fields))
        if unknown:
            import difflib
            near = difflib.get_close_matches(unknown[0], list(fields), 1)
            hint = f"did you mean {near[0]}?" if near else "the options are the command's, in snake_case"
            raise UsageError(f"{what}: unknown option {unknown[0]!r} ({hint})")
        per: dict[str, dict[str, Any]] = {g: {} for g, _, _ in self.groups}
        for gname, cls, custom in self.groups:
            custom = custom or GroupDefaults({})
            for f in dataclasses.fields(cls):
                if f.name in custom.omit:
                    per[gname][f.name] = custom.values.get(f.name, f.default)
        for name, f in fields.items():
            v = values[name] if name in values else f.default
            if v is Ellipsis:
                raise UsageError(f"{what}: {name}= is required ({f.flag} on the command line)")
            per[f.group][name] = coerce(v, f.type, f.flag) if name in values else v
        return {gname: cls(**per[gname]) for gname, cls, _ in self.groups}

    def values(self, groups: dict[str, Any]) -> dict[str, Any]:
        """The options' values back from the group values (what config.toml replays)."""
        return {name: getattr(groups[f.group], name) for name, f in self.fields().items()}


def _strip_optional(t: Any) -> tuple[Any, bool]:
    if typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return (args[0] if len(args) == 1 else t), True
    return t, False


def _words(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def coerce(value: Any, t: Any, flag: str) -> Any:
    """A Python value (an API keyword, a --config file's value) as the option's type, the way
    the command line would have read it: 4 for a text option is '4', [1, 2, 4] is '1,2,4', a
    mapping for a repeatable K=V option is ['K=V', ...], a str for a path is a Path. Anything
    else is a UsageError naming the flag."""
    base, optional = _strip_optional(t)
    if value is None:
        return None
    origin = typing.get_origin(base)
    if origin in (list, List):
        if isinstance(value, dict):
            return [f"{k}={','.join(map(_words, v)) if isinstance(v, (list, tuple)) else _words(v)}"
                    for k, v in value.items()]
        if isinstance(value, (str, int, float, Path)) and not isinstance(value, bool):
            return [_words(value)]
        if isinstance(value, (list, tuple)) and all(
                isinstance(x, (str, int, float, Path)) and not isinstance(x, bool) for x in value):
            return [_words(x) for x in value]
        raise UsageError(f"{flag} {value!r}: expected a text or a list of texts")
    if base is bool:
        if isinstance(value, bool):
            return value
        raise UsageError(f"{flag} {value!r}: expected true or false")
    if base is int:
        if isinstance(value, bool):
            raise UsageError(f"{flag} {value!r}: expected a whole number")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise UsageError(f"{flag} {value!r}: expected a whole number")
    if base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise UsageError(f"{flag} {value!r}: expected a number")
    if base is Path:
        if isinstance(value, (str, Path)) or hasattr(value, "__fspath__"):
            return Path(value)
        raise UsageError(f"{flag} {value!r}: expected a path")
    if base is str:
        if isinstance(value, bool):
            raise UsageError(f"{flag} {value!r}: expected a text")
        if isinstance(value, (str, int, float, Path)):
            return _words(value)
        if isinstance(value, (list, tuple)) and value and all(
                isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value):
            return ",".join(_words(x) for x in value)      # users=[1, 2, 4] -> '1,2,4'
        raise UsageError(f"{flag} {value!r}: expected a text")
    return value
