"""How every command's options (run, ramp, sweep, probe, report, compare ... and the mock) are
declared and checked: a command's options are a typed dataclass, its *spec* (``Spec``), whose
fields are declared with ``option``; every number a user types is finite and in its range, or
one line names the flag and what to type instead.

A field's annotation is what Python callers may pass (seconds as ``float`` or ``timedelta``,
percentiles as a tuple, users as a list), its ``Kind`` how the command line's text (or a Python
value) becomes the one value the spec holds (``__post_init__``), and back (``to_cli``:
config.toml, docs/cli.md). The command line (llmbench/cli/options.py) reads the declarations
from the fields' metadata, so building it evaluates no annotation; the Python API
(llmbench/api.py) takes a spec or its fields as keywords.

A bottom layer (no Typer): it imports only ``llmbench.errors``, so both the commands
(llmbench/commands/) and the mock (llmbench/mock_server/cli.py) build on it without importing
each other.

Why the checks: Typer turns "nan" and "inf" into floats without complaint, and a NaN compares
false with every bound, so `--duration nan` once ran forever. The line is a ``UsageError``: the
CLI prints it on stderr and exits 2, the API raises it (llmbench.UsageError).
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, ClassVar, List, Sequence

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
    """'90', '500ms', '1m30s' (see _PART) -> seconds; finite and >= 0 (> 0 unless zero_ok)."""
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
    """An integer flag in [lo, hi] (hi: MAX_COUNT unless given); None passes."""
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


# -- declarations ------------------------------------------------------------------------------
REQUIRED: Any = dataclasses.MISSING        # option(default=REQUIRED): it must be given
SAME: Any = type("Same", (), {"__repr__": lambda self: "SAME"})()   # the command line's default is the spec's


def _words(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _text(v: Any, flag: str) -> str:
    """A number or a path is its text (``rate=4`` is ``--rate 4``); anything else is refused."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float, Path)):
        raise UsageError(f"{flag} {v!r}: expected a text")
    return _words(v)


@dataclasses.dataclass(frozen=True)
class Kind:
    """How one option's values are read: ``cli`` is the type the command line parses (typer),
    ``parse(value, flag)`` makes the spec's value from a Python value or the command line's,
    ``to_cli(value)`` gives the command line's form back (None: not given)."""

    cli: Any
    parse: Callable[[Any, str], Any]
    to_cli: Callable[[Any], Any] = lambda v: v
    doc: str = ""                      # the Python type as docs/cli.md names it


def _number(cast: Callable[[Any], Any], what: str) -> Callable[[Any, str], Any]:
    """An int or a float, from a number or its text (an int from a whole float only)."""
    def parse(v: Any, flag: str) -> Any:
        if cast is int and isinstance(v, float) and math.isfinite(v) and v == int(v):
            v = int(v)
        if isinstance(v, (int, cast)) and not isinstance(v, bool):
            return cast(v)
        if isinstance(v, str):
            try:
                return cast(v.strip())
            except ValueError:
                pass
        raise UsageError(f"{flag} {v!r}: expected {what}")
    return parse


def _bool(v: Any, flag: str) -> bool:
    if isinstance(v, bool):
        return v
    raise UsageError(f"{flag} {v!r}: expected true or false")


def _path(v: Any, flag: str) -> Path:
    if isinstance(v, (str, Path)) or hasattr(v, "__fspath__"):
        return Path(v)
    raise UsageError(f"{flag} {v!r}: expected a path")


def _texts(v: Any, flag: str) -> list[str]:
    """A repeatable option: a text, a list of texts, or a mapping (``K=V`` each)."""
    if isinstance(v, dict):
        return [f"{k}={','.join(map(_words, x)) if isinstance(x, (list, tuple)) else _words(x)}"
                for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [_text(x, flag) for x in v]
    return [_text(v, flag)]


def _seconds(zero_ok: bool) -> Callable[[Any, str], float]:
    def parse(v: Any, flag: str) -> float:
        if isinstance(v, timedelta):
            v = v.total_seconds()
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = repr(float(v))           # the exact value, checked as the command line's
        return duration(_text(v, flag), flag, zero_ok=zero_ok)
    return parse


def _span(v: Any, flag: str) -> tuple[float, float]:
    """--think: '5s-10s', '3', 0, (5, 10), timedelta(s) -> (lo, hi) seconds."""
    if isinstance(v, (tuple, list)) and len(v) == 2:
        lo, hi = (_seconds(True)(x, flag) for x in v)
        if hi < lo:
            raise UsageError(f"{flag} {v!r}: need 0 <= LO <= HI, e.g. 5s-10s")
        return lo, hi
    if isinstance(v, timedelta) or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        s = _seconds(True)(v, flag)
        return s, s
    return parse_think(_text(v, flag), flag)


def _comma_list(v: Any, flag: str) -> str:
    """A list as the command line writes it: [1, 2, 4] -> '1,2,4', ["a", "b"] -> 'a,b'."""
    if isinstance(v, (list, tuple)):
        return ",".join(_text(x, flag) for x in v)
    return _text(v, flag)


def _names(v: Any, flag: str) -> tuple[str, ...]:
    return tuple(m.strip() for m in _comma_list(v, flag).split(",") if m.strip())


def _percentiles(v: Any, flag: str) -> tuple[float, ...]:
    text = _comma_list(v, flag)
    try:
        out = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected numbers like 50,90,99")
    if any(not 0 < p < 100 for p in out):
        raise UsageError(f"{flag} must lie between 0 and 100")
    return out


def _pairs(v: Any, flag: str) -> dict[str, str]:
    """K=V (repeatable) or a mapping -> {K: V}."""
    if isinstance(v, dict):
        return {str(k): _words(x) for k, x in v.items()}
    return parse_labels(_texts(v, flag), flag)


def _span_cli(v: tuple[float, float]) -> str:
    return f"{v[0]!r}" if v[0] == v[1] else f"{v[0]!r}-{v[1]!r}"


def _list_cli(v: Sequence[Any]) -> str:
    return ",".join(_words(x) for x in v)


# the kinds of option; the command line type is today's typer type of each
TEXT = Kind(str, lambda v, flag: ",".join(_text(x, flag) for x in v)    # models=["a", "b"]
            if isinstance(v, (list, tuple)) and v else _text(v, flag), doc="str")
INT = Kind(int, _number(int, "a whole number"), doc="int")
FLOAT = Kind(float, _number(float, "a number"), doc="float")
FLAG = Kind(bool, _bool, doc="bool")
PATH = Kind(Path, _path, doc="Path")
TEXTS = Kind(List[str], _texts, doc="list[str]")
SECONDS = Kind(str, _seconds(True), doc="float | timedelta (seconds)")
SECONDS_ABOVE_0 = Kind(str, _seconds(False), doc="float | timedelta (seconds)")
SPAN = Kind(str, _span, _span_cli, doc="tuple[float, float] (seconds)")
NAMES = Kind(str, _names, _list_cli, doc="tuple[str, ...]")
PERCENTILES = Kind(str, _percentiles, _list_cli, doc="tuple[float, ...]")
PAIRS = Kind(List[str], _pairs, lambda v: [f"{k}={x}" for k, x in v.items()],
             doc="dict[str, str]")


@dataclasses.dataclass(frozen=True)
class SpecOpt:
    """One option of a spec: the declaration the command line shows (help, panel, flags,
    metavar), its kind, whether it is the command's argument (``llmbench report RUN_DIR``),
    and, when the command line's default is not the spec's, the command line's."""

    help: str
    panel: str | None
    decls: tuple[str, ...]
    metavar: str | None
    kind: Kind
    argument: bool = False
    cli_default: Any = SAME

    def flag(self, name: str) -> str:
        """The flag the user types for field ``name`` (the first of ``decls``, else --name)."""
        if self.argument:
            return name.upper()
        return self.decls[0].split("/")[0] if self.decls else "--" + name.replace("_", "-")


def option(help: str, panel: str | None = None, *decls: str, kind: Kind = TEXT,
           default: Any = None, metavar: str | None = None, argument: bool = False,
           cli_default: Any = SAME) -> Any:
    """A spec field: ``name: TYPE = option("Help.", PANEL, "--flag", kind=..., default=...)``.
    ``default=REQUIRED``: the option must be given."""
    meta = {"opt": SpecOpt(help, panel, decls, metavar, kind, argument, cli_default)}
    return dataclasses.field(default=default, metadata=meta)


def opt_of(f: dataclasses.Field) -> SpecOpt:  # type: ignore[type-arg]
    return f.metadata["opt"]  # type: ignore[no-any-return]


class Spec:
    """The base of every command's spec (a ``@dataclasses.dataclass(kw_only=True)``): each field
    is made its one value by its kind, then ``check()`` (pure: no file, no network) lists what
    the options cannot mean together. Each option group and each spec states its own rules in
    ``_check`` (a generator of problem lines; a value helper that raises ``UsageError`` ends
    that group's rules), and ``check`` collects every group's, as k6's executor configs do:
    a user with three mistakes reads three lines, not one per attempt."""

    # the command's name, as the command line and errors say it
    command: ClassVar[str] = "llmbench"
    # keywords that are not a flag's spelling: {keyword: field} (sweep's settings=)
    aliases: ClassVar[dict[str, str]] = {}
    # the option groups a user may pass whole, as InitVars of the spec (``_spread``):
    # {keyword: group} (``RunSpec(target=Target(url=...), request=Request(temperature=0))``)
    groups: ClassVar[dict[str, type]] = {}

    def __post_init__(self, *aliases: Any) -> None:
        # the command line's other spellings, as InitVars (``max_tokens`` for ``output_tokens``,
        # ``no_stream=True`` for ``stream=False``): typed keywords like the fields
        if aliases:
            known = self.names()
            fields = {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]
            initvars = [n for n in self.__dataclass_fields__ if n not in fields]  # type: ignore[attr-defined]
            for alias, v in zip(initvars, aliases):
                if v is not None and alias in self.groups:
                    self._spread(alias, v)
                elif v is not None:
                    name, off = known[alias]
                    setattr(self, name, (not _bool(v, f"{alias}=")) if off else v)
        problems: list[str] = []
        self._refused: set[str] = set()     # the fields whose value was refused
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            o = f.metadata.get("opt")
            v = getattr(self, f.name)
            if o is None or v is None or v is REQUIRED:
                continue
            try:
                setattr(self, f.name, o.kind.parse(v, o.flag(f.name)))
            except UsageError as exc:
                problems.append(str(exc))
                self._refused.add(f.name)
                # the rules below read the default instead, so they do not trip on the text
                setattr(self, f.name, _parsed_default(f, o))
        problems += self.check(bad_values=bool(problems))
        if problems:
            raise Problems(problems)

    def _spread(self, keyword: str, group: Any) -> None:
        """A group passed whole: what it sets (its values other than its defaults) becomes
        this spec's; the same option given flat too, with another value, is a UsageError."""
        cls = self.groups[keyword]
        what = f"llmbench.{self.command}()"
        if not isinstance(group, cls):
            raise UsageError(f"{what}: {keyword}= takes a {cls.__name__}(...), not "
                             f"{type(group).__name__}")
        unset = _group_defaults(type(group))
        mine = {f.name: f for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for name, v in _values(group).items():
            if name not in mine or v == unset.get(name):
                continue
            now, default = getattr(self, name), mine[name].default
            if now is not default and now != default and now != v:
                raise UsageError(f"{what}: {name}= and {keyword}={cls.__name__}({name}=...) "
                                 "are the same option: give one")
            setattr(self, name, v)

    def check(self, bad_values: bool = False) -> list[str]:
        """Every problem of the options together, one line each naming the flag (empty: none).
        ``bad_values``: some values were refused already (replaced by their defaults), so a
        rule that fails on that state is not a bug to show."""
        out: list[str] = []
        for cls in reversed(type(self).__mro__):
            rules = cls.__dict__.get("_check")
            if rules is None:
                continue
            try:
                for line in rules(self) or ():
                    out.append(line)
            except UsageError as exc:
                out.append(str(exc))
            except AttributeError:
                # a group alone (Target(...), passed to a spec whole) checks its own options;
                # a rule that reads another group's is checked when the spec is made
                if type(self).command != Spec.command and not (bad_values or out):
                    raise
            except Exception:
                # a rule that trips on a value already refused is that problem, not a bug
                if not (bad_values or out):
                    raise
        seen: set[str] = set()
        return [x for x in out if not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]

    # -- keywords (the API's shortcut, --config files) ------------------------------------
    @classmethod
    def names(cls) -> dict[str, tuple[str, bool]]:
        """Every keyword this spec takes -> (its field, whether it is the negated side): the
        fields, and every long flag in snake_case (``max_tokens``; ``no_X`` for --X/--no-X)."""
        def normalize(key: str) -> str:        # as specs/config.normalize: --max-tokens
            return key.strip().lstrip("-").replace("-", "_")
        out: dict[str, tuple[str, bool]] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            o = opt_of(f)
            out[f.name] = (f.name, False)
            for d in o.decls:
                on, _, off = d.partition("/")
                if on.startswith("--"):
                    out.setdefault(normalize(on), (f.name, False))
                if off:
                    out.setdefault(normalize(off), (f.name, True))
        for alias, name in cls.aliases.items():
            out.setdefault(alias, (name, False))
        return out

    @classmethod
    def from_options(cls, options: dict[str, Any], what: str | None = None) -> Any:
        """The spec from keywords: field names or any other spelling ``names`` knows; an
        unknown name ("did you mean ...?"), a name given twice, a missing required option is
        a UsageError naming the option."""
        what = what or f"llmbench.{cls.command}()"
        known = cls.names()
        values: dict[str, Any] = {}
        given: dict[str, str] = {}
        for key, v in options.items():
            if key in cls.groups:               # a group passed whole (an InitVar)
                values[key], given[key] = v, key
                continue
            if key not in known:
                import difflib
                near = difflib.get_close_matches(key, list(known), 1)
                hint = f"did you mean {near[0]}?" if near else \
                    "the options are the command's, in snake_case"
                raise UsageError(f"{what}: unknown option {key!r} ({hint})")
            name, off = known[key]
            if name in values:
                raise UsageError(f"{what}: {given[name]}= and {key}= are the same option: "
                                 "give one")
            if off:
                v = not _bool(v, f"{what}: {key}=")
            values[name], given[name] = v, key
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.default is REQUIRED and f.default_factory is REQUIRED and f.name not in values:
                raise UsageError(f"{what}: {f.name}= is required ({opt_of(f).flag(f.name)} "
                                 "on the command line)")
        return cls(**values)

    def cli_values(self) -> dict[str, Any]:
        """The options as the command line would give them (config.toml replays them)."""
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = None if v is None else opt_of(f).kind.to_cli(v)
        return out

    @classmethod
    def cli_fields(cls) -> dict[str, Any]:
        """name -> a field with ``.flag`` (config.toml's secret and URL scrubbing reads it)."""
        return {f.name: _Flag(opt_of(f).flag(f.name)) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]


def problem(check: Callable[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """A value helper's refusal as a problem line (``Spec._check``: ``yield from problem(count,
    self.n, "--n")``), so that one bad value does not hide the next rule's problem."""
    try:
        check(*args, **kwargs)
    except UsageError as exc:
        return [str(exc)]
    return []


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _values(spec: Any) -> dict[str, Any]:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


def _group_defaults(cls: type) -> dict[str, Any]:
    """A group's values when nothing is given (its defaults, as its kinds make them)."""
    if cls not in _DEFAULTS:
        _DEFAULTS[cls] = _values(cls())
    return _DEFAULTS[cls]


class Problems(UsageError):
    """Every problem a spec's options have (``Spec.check``), one line each: ``problems``;
    its text is the lines, as the command line prints them (each after "error: ")."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _parsed_default(f: dataclasses.Field, o: SpecOpt) -> Any:  # type: ignore[type-arg]
    """A field's default as its kind makes it (None when it has none, or it is required)."""
    d = f.default
    if d is dataclasses.MISSING or d is None:
        return None
    try:
        return o.kind.parse(d, o.flag(f.name))
    except (UsageError, TypeError, ValueError):
        return d


@dataclasses.dataclass(frozen=True)
class _Flag:
    """A flag's spelling, for messages that name it."""
    flag: str

