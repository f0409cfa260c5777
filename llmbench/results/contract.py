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
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Callable, Iterator, Mapping, TypeVar

P = TypeVar("P", bound="Part")


def part(default: Any = MISSING, *, default_factory: Any = MISSING, key: str | None = None,
         omit: str | None = None, when: Callable[[Any], bool] | None = None) -> Any:
    """A field of the contract: ``key`` its JSON name (default: the field's name), ``omit``
    ("none" or "empty") and ``when`` its rule for being written by a part the pipeline made."""
    if omit not in (None, "none", "empty"):
        raise ValueError(f"omit={omit!r}: 'none' or 'empty'")
    return field(default=default, default_factory=default_factory,
                 metadata={"key": key, "omit": omit, "when": when})


@dataclass(frozen=True)
class _Spec:
    name: str
    key: str
    type: Any
    omit: str | None
    when: Callable[[Any], bool] | None
    default: Any


_SPECS: dict[type, tuple[_Spec, ...]] = {}
_BASE = ("extra", "read_keys")


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def specs(cls: type) -> tuple[_Spec, ...]:
    """The fields of a part class as the contract writes them (cached)."""
    got = _SPECS.get(cls)
    if got is None:
        hints = typing.get_type_hints(cls)       # each class's own module names its types
        got = tuple(_Spec(f.name, f.metadata.get("key") or f.name, hints.get(f.name, Any),
                          f.metadata.get("omit"), f.metadata.get("when"), _default(f))
                    for f in fields(cls)
                    if f.name not in _BASE and not f.metadata.get("internal"))
        _SPECS[cls] = got
    return got


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


def decode(tp: Any, v: Any) -> Any:
    """A JSON value read as the annotation ``tp`` says: parts from their dicts, "inf" as a
    float. A value of another shape than expected (a folder edited by hand) is kept as it is."""
    if v is None:
        return None
    tp = _optional(tp)
    origin = typing.get_origin(tp)
    if origin in (list, tuple) and isinstance(v, list):
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        out = [decode(inner, x) for x in v]
        return tuple(out) if origin is tuple else out
    if origin is dict and isinstance(v, Mapping):
        args = typing.get_args(tp)
        inner = args[1] if len(args) == 2 else Any
        return {k: decode(inner, x) for k, x in v.items()}
    if isinstance(tp, type) and (issubclass(tp, Part) or hasattr(tp, "from_dict")):
        return tp.from_dict(v) if isinstance(v, Mapping) else v
    if tp is float and isinstance(v, str) and v in ("inf", "-inf"):
        return float(v)
    return v


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

    # keys of the JSON object this llmbench does not model, kept as read
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
            v = getattr(self, s.name)
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
        kwargs: dict[str, Any] = {}
        known = set()
        for s in specs(cls):
            known.add(s.key)
            if s.key in data:
                kwargs[s.name] = decode(s.type, data[s.key])
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs, extra=extra, read_keys=tuple(data))

    @property
    def data(self) -> dict[str, Any]:
        """The JSON object (``to_dict()``), for callers that read run.json's names."""
        return self.to_dict()
