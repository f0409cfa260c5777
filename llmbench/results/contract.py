"""What every part of the result contract shares: a dataclass that is written as the JSON
object run.json holds, key for key, and read back from any folder written so far.

A part's fields are its keys, in order (``part(key=...)`` when the JSON name differs from the
field's). ``to_dict`` writes them, nested parts and lists and dicts of parts included, as JSON
values (NaN as null, infinities as "inf"/"-inf", as run.json has always held them); ``from_dict``
reads them, typed by the field's annotation. A new typed field is one line: ``telemetry:
Telemetry | None = part(omit="none")`` is written when set and read back when present, by the
code here, with nothing else to touch.

Two things make an old folder read back unchanged (``X.from_dict(d).to_dict() == d``, in d's
key order): keys this llmbench does not model are kept as they were read (``extra``), and a part
read from a file writes the keys the file had (``read_keys``), plus any field set since. A
part made by the pipeline writes each field by its rule: always (the default), ``omit="none"``
(left out when None), ``omit="empty"`` (left out when None or empty), or ``when=`` a predicate
on the part (a run's body exists only once it measured something).
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, TypeVar, Union

P = TypeVar("P", bound="Part")
V = TypeVar("V", bound="Value")

# A JSON value: what a loose part of run.json holds when nothing reads it by key (a config as
# the user gave it, the machine's description). Run time reads it as anything (the contract
# keeps what it reads); a type checker as the union it is.
if TYPE_CHECKING:
    from typing import TypeAlias
    JSONValue: TypeAlias = Union[None, bool, int, float, str, list["JSONValue"],
                                 dict[str, "JSONValue"]]
else:
    JSONValue = Any
JSONObject = dict[str, JSONValue]


def part(default: Any = MISSING, *, default_factory: Any = MISSING, key: str | None = None,
         omit: str | None = None, when: Callable[[Any], bool] | None = None,
         inline: bool = False, shared: bool = False) -> Any:
    """A field of the contract (``key``, ``omit`` and ``when``: the module's docstring).

    ``inline``: the field is a part whose keys are written among its owner's (run.json's
    ``kind`` and ``monitor`` are keys of the file, held by ``Run.state`` and ``Run.findings``);
    an inline part's ``when`` rules are asked of the outermost part. ``shared``: another field
    has the same key (a probe's steps and a ramp's): its ``when`` decides which one is written,
    for a part read from a file too, and the owner's ``from_dict`` reads it itself."""
    if omit not in (None, "none", "empty"):
        raise ValueError(f"omit={omit!r}: 'none' or 'empty'")
    return field(default=default, default_factory=default_factory,
                 metadata={"key": key, "omit": omit, "when": when, "inline": inline,
                           "shared": shared})


@dataclass(frozen=True)
class _Spec:
    """One field of a part as run.json writes it: key, type, when omitted, where it sits."""
    name: str
    key: str
    type: Any
    omit: str | None
    when: Callable[[Any], bool] | None
    default: Any
    path: tuple[str, ...]           # field names from the outermost part (inline parts)
    shared: bool


_SPECS: dict[type, tuple[_Spec, ...]] = {}
_HINTS: dict[type, dict[str, Any]] = {}
_BASE = ("extra", "read_keys")


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _hints(cls: type) -> dict[str, Any]:
    """A part class's field types, evaluated once a process (each class's own module names its
    types): typing evaluates every string annotation anew on each call, ~250 of them for a
    Run, a tenth of a small run's start-up CPU when asked on every build."""
    got = _HINTS.get(cls)
    if got is None:
        got = _HINTS[cls] = typing.get_type_hints(cls)
    return got


def specs(cls: type) -> tuple[_Spec, ...]:
    """The fields of a part class as the contract writes them (cached)."""
    got = _SPECS.get(cls)
    if got is None:
        hints = _hints(cls)
        out: list[_Spec] = []
        for f in fields(cls):
            if f.name in _BASE or f.metadata.get("internal"):
                continue
            if f.metadata.get("inline"):
                out.extend(_Spec(s.name, s.key, s.type, s.omit, s.when, s.default,
                                 (f.name, *s.path), s.shared) for s in specs(hints[f.name]))
                continue
            out.append(_Spec(f.name, f.metadata.get("key") or f.name, hints.get(f.name, Any),
                             f.metadata.get("omit"), f.metadata.get("when"), _default(f),
                             (f.name,), bool(f.metadata.get("shared"))))
        order = getattr(cls, "KEY_ORDER", None)
        if order:       # the file's one order, over the parts' grouping
            rank = {k: i for i, k in enumerate(order)}
            out.sort(key=lambda s: rank.get(s.key, len(rank)))
        got = tuple(out)
        _SPECS[cls] = got
    return got


def _get(owner: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        owner = getattr(owner, name)
    return owner


def _build(cls: type[P], values: dict[tuple[str, ...], Any], at: tuple[str, ...] = (),
           **base: Any) -> P:
    """``cls`` from the values read for its fields' paths, its inline parts built in turn."""
    hints = _hints(cls)
    kw: dict[str, Any] = {}
    for f in fields(cls):
        if f.metadata.get("inline"):
            kw[f.name] = _build(hints[f.name], values, (*at, f.name))
        elif (*at, f.name) in values:
            kw[f.name] = values[(*at, f.name)]
    return cls(**kw, **base)


def encode(v: Any) -> Any:
    """A value as run.json holds it: parts as their dicts, NaN null, infinities "inf"/"-inf"."""
    if isinstance(v, Part) or (hasattr(v, "to_dict") and hasattr(v, "__dataclass_fields__")):
        return v.to_dict()          # a part, or another typed value of the contract (a Metric)
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        if v != v:
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, Mapping):
        return {k: encode(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    return v


def _optional(tp: Any) -> Any:
    """T for ``T | None`` (and Optional[T]); tp itself otherwise."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return tp


class WrongType(ValueError):
    """A value in a result file of another kind than its key holds (edited by hand, cut by a
    crash): ``key`` the path to it (``summary.ttft``), ``what`` what it is and what was
    expected; the loader (``Run.from_dict``) says it in one line: nothing downstream meets it."""

    def __init__(self, key: str, what: str) -> None:
        super().__init__(f"{key}: {what}")
        self.key, self.what = key, what

    def under(self, parent: str) -> "WrongType":
        return WrongType(f"{parent}.{self.key}" if self.key else parent, self.what)


def kind_of(v: Any) -> str:
    """A JSON value's kind as a message says it, short (a 5,000-digit text is not quoted)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"the text {v!r}" if len(v) <= 24 else f"a text of {len(v):,} characters"
    if isinstance(v, (int, float)):
        return f"the number {v:g}" if isinstance(v, float) else (
            f"the number {v}" if len(str(v)) <= 24 else "a number too large")
    if isinstance(v, Mapping):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return type(v).__name__


_NUMBER_TEXTS = ("inf", "-inf")


def _nullable(tp: Any) -> bool:
    """``T | None``, Optional[T] or Any: null is one of its values."""
    if tp is Any:
        return True
    return (typing.get_origin(tp) in (typing.Union, types.UnionType)
            and type(None) in typing.get_args(tp))


def _want(tp: Any) -> str:
    """What a key of annotation ``tp`` holds, as a message says it."""
    got = mismatch(tp, object())
    return got.split(" where ")[1].removesuffix(" belongs") if got and " where " in got else "a value"


def mismatch(tp: Any, v: Any) -> str | None:
    """What is wrong with ``v`` as the annotation ``tp`` (None: nothing). Only what a reader
    would trip on: a text for a number, a list for an object, a number for a text; None is
    always allowed (a statistic with no data), a union of several kinds or ``Any`` anything."""
    if v is None or tp is Any:
        return None
    tp = _optional(tp)
    if tp is Any:
        return None
    origin = typing.get_origin(tp)
    want = None
    if origin is typing.Literal:
        return None if v in typing.get_args(tp) else (
            f"{kind_of(v)}, not one of " + ", ".join(repr(a) for a in typing.get_args(tp)))
    if origin in (list, tuple) or tp in (list, tuple):
        want = "a list" if not isinstance(v, list) else None
    elif origin is dict or tp is dict or (isinstance(tp, type) and (
            issubclass(tp, Part) or hasattr(tp, "from_dict"))):
        want = "an object" if not isinstance(v, Mapping) else None
    elif tp is bool:
        want = "true or false" if not isinstance(v, bool) else None
    elif tp is int:
        ok = isinstance(v, int) and not isinstance(v, bool) or (
            isinstance(v, float) and math.isfinite(v) and v == int(v))
        want = None if ok else "a whole number"
    elif tp is float:
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) or v in _NUMBER_TEXTS
        want = None if ok else "a number"
    elif tp is str:
        want = "a text" if not isinstance(v, str) else None
    return None if want is None else f"{kind_of(v)} where {want} belongs"


def decode(tp: Any, v: Any) -> Any:
    """A JSON value read as the annotation ``tp`` says: parts from their dicts, "inf" as a
    float. A value of another kind than its key holds is a WrongType naming the key."""
    if v is None:
        return None
    one = _optional(tp)
    if isinstance(one, type) and issubclass(one, Part) and isinstance(v, one):
        return v            # already read (a summary's flat() holds its parts as parts)
    wrong = mismatch(tp, v)
    if wrong is not None:
        raise WrongType("", wrong)
    tp = _optional(tp)
    origin = typing.get_origin(tp)
    if origin in (list, tuple) and isinstance(v, list):
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        out = [_at(i, decode, inner, x) for i, x in enumerate(v)]
        return tuple(out) if origin is tuple else out
    if origin is dict and isinstance(v, Mapping):
        args = typing.get_args(tp)
        inner = args[1] if len(args) == 2 else Any
        return {k: _at(k, decode, inner, x) for k, x in v.items()}
    if isinstance(tp, type) and (issubclass(tp, Part) or hasattr(tp, "from_dict")):
        return read_part(tp, v) if isinstance(v, Mapping) else v
    if tp is float and isinstance(v, str) and v in ("inf", "-inf"):
        return float(v)
    return v


def _at(where: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, a WrongType inside it named under ``where`` (a key or a list index)."""
    try:
        return fn(*args)
    except WrongType as exc:
        raise exc.under(str(where)) from None


def read_part(tp: Any, v: Mapping[str, Any]) -> Any:
    """``tp.from_dict(v)``: a part's own reader that trips on a value of the wrong kind (a
    TypeError, an OverflowError...) is a WrongType too, not a raw exception."""
    try:
        return tp.from_dict(v)
    except WrongType:
        raise
    except (TypeError, ValueError, AttributeError, OverflowError, KeyError, IndexError) as exc:
        raise WrongType("", f"cannot be read ({type(exc).__name__}: {str(exc)[:80]})") from None


class Value:
    """A frozen value of the contract (a session's figures, a machine's use over a window):
    written as every field (``asdict``), read back by its annotations, each key the dict
    holds (a missing one, or a null where the field holds no None, keeps its default);
    anything but a dict reads as None."""

    def to_dict(self) -> dict[str, Any]:
        return encode(asdict(self))   # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[V], d: Mapping[str, Any] | None) -> V | None:
        if not isinstance(d, Mapping):
            return None
        hints = _hints(cls)
        return cls(**{f.name: _at(f.name, decode, hints[f.name], d[f.name])
                      for f in fields(cls)    # type: ignore[arg-type]
                      if f.name in d and (d[f.name] is not None or _nullable(hints[f.name]))})


def _written(spec: _Spec, owner: "Part", value: Any) -> bool:
    """Whether a part the pipeline made writes this field (the rules above)."""
    if spec.when is not None and not spec.when(owner):
        return False
    if spec.omit == "none":
        return value is not None
    if spec.omit == "empty":
        return value is not None and not (isinstance(value, (list, tuple, dict, str))
                                          and not value)
    return True


def ordered(out: dict[str, Any], read_keys: tuple[str, ...] | None) -> dict[str, Any]:
    """``out`` in the order a file had its keys (keys new since at the end)."""
    if not read_keys:
        return out
    first = {k: out[k] for k in read_keys if k in out}
    first.update((k, v) for k, v in out.items() if k not in first)
    return first


@dataclass
class Part:
    """A piece of the result contract (see the module's docstring)."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False)
    # the keys of the object it was read from, in order (None: made by the pipeline)
    read_keys: tuple[str, ...] | None = field(default=None, kw_only=True, repr=False,
                                              compare=False)

    def derived(self) -> frozenset[str]:
        """Keys a part read from a file did not have and ``from_dict`` filled in (a step's
        state from its held): not written back."""
        return frozenset()

    def fields_out(self) -> Iterator[tuple[str, Any]]:
        """(key, value) of every field this part writes, in order."""
        loaded = self.read_keys
        derived = self.derived() if loaded is not None else frozenset()
        for s in specs(type(self)):
            v = _get(self, s.path)
            if s.shared and s.when is not None and not s.when(self):
                continue
            if loaded is not None:
                # read from a file: what it held, and what was set since
                if s.key not in loaded and (s.key in derived or s.default is MISSING
                                            or v == s.default):
                    continue
            elif not _written(s, self, v):
                continue
            yield s.key, v

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, as run.json holds it."""
        out = {k: encode(v) for k, v in self.fields_out()}
        for k, v in self.extra.items():
            if k not in out:
                out[k] = encode(v)
        return ordered(out, self.read_keys)

    @classmethod
    def from_dict(cls: type[P], data: Mapping[str, Any]) -> P:
        """A part from its JSON object (any folder written so far)."""
        kwargs: dict[tuple[str, ...], Any] = {}
        known = set()
        for s in specs(cls):
            known.add(s.key)
            if s.key in data and not s.shared:
                v = data[s.key]
                if v is None and s.default is not None and s.default is not MISSING \
                        and not _nullable(s.type):
                    # null where the part always holds a value (a config, a status)
                    raise WrongType(s.key, f"null where {_want(s.type)} belongs")
                kwargs[s.path] = _at(s.key, decode, s.type, v)
        extra = {k: v for k, v in data.items() if k not in known}
        return _build(cls, kwargs, extra=extra, read_keys=tuple(data))

    @property
    def data(self) -> dict[str, Any]:
        """The JSON object (``to_dict()``), for callers that read run.json's names."""
        return self.to_dict()
