"""JSON and small files from outside llmbench, read with limits: a server's reply (a models
list) or a file a flag names (--tools). What is refused is one ValueError (JsonLimitError)
whose message is one line, never a RecursionError, a MemoryError or a read without end. And
the check of a JSON schema's keywords (``schema_problem``), which the client (wire.agents) and
the mock (mock_server.generate) both apply: here, in the bottom package, because the mock (a
layer below the wire formats) imports it too.

- Nesting: json's decoder recurses once per level (a RecursionError past ~1000); a document is
  also walked after decoding (iteratively) and refused past MAX_DEPTH levels, which no real
  reply or schema comes near (the deepest seen: a JSON schema with $defs, ~15 levels) and
  which every later walk of it (a schema check, a str()) can take without recursing too deep.
- Files: only regular files (a device such as /dev/zero, or a pipe, never ends), at most a
  stated number of bytes (read that far and no further), UTF-8 (the byte and where, else).

The hot path's events are not walked (wire.events.loads: orjson refuses past 1024 levels, and
the decoder guards what is left); everything read once is.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

MAX_DEPTH = 64
# --tools / --response-format: a tool list or a schema is kilobytes; 16 MB is none
MAX_SPEC_BYTES = 16 << 20


class JsonLimitError(ValueError):
    """JSON or a file refused by a limit; the message is one line."""


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply ``value`` nests lists and objects (a scalar: 0), counted without recursion,
    up to ``limit + 1`` (the walk stops there)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        d += 1
        if d > deepest:
            deepest = d
            if d > limit:
                return d
        stack.extend((x, d) for x in v if isinstance(x, (dict, list)))
    return deepest


def loads(text: str | bytes, where: str, limit: int = MAX_DEPTH) -> Any:
    """One JSON document from outside; ``where`` names it in the message ("--tools t.json",
    "GET http://h/v1/models"). Invalid JSON stays json's ValueError (JSONDecodeError); too
    deep is a JsonLimitError."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonLimitError(f"{where}: JSON nested too deeply (over {limit} levels)") from None
    if depth(value, limit) > limit:
        raise JsonLimitError(f"{where}: JSON nested too deeply (over {limit} levels)")
    return value


def read_file(path: str | os.PathLike[str], flag: str, max_bytes: int = MAX_SPEC_BYTES,
              what: str = "file") -> str:
    """A small text file a flag names, whole: a regular file, at most ``max_bytes``, UTF-8
    (a BOM dropped). Each refusal is one line naming the flag and the file."""
    shown = f"{flag} {path}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise JsonLimitError(f"{shown}: no such file; check the path") from None
    except OSError as exc:
        raise JsonLimitError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise JsonLimitError(f"{shown}: is a folder; give a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise JsonLimitError(f"{shown}: not a regular file (a device, pipe or socket never "
                             f"ends); give a {what}")
    if st.st_size > max_bytes:
        raise JsonLimitError(f"{shown}: {st.st_size / 1e6:.1f} MB, larger than the "
                             f"{max_bytes >> 20} MB a {what} can be")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise JsonLimitError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:            # it grew since stat (or lied about its size)
        raise JsonLimitError(f"{shown}: larger than the {max_bytes >> 20} MB a {what} can be")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise JsonLimitError(f"{shown}:{line}: not UTF-8 text (byte {raw[exc.start]:#04x} at "
                             f"column {col}); save the file as UTF-8") from None


def kind_of(value: Any) -> str:
    """A JSON value's type in a sentence: 'a number (5)', 'a list', 'an object', 'null'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, (int, float)):
        return f"a number ({str(value)[:20]})"
    if isinstance(value, str):
        return f"a string ({value[:20]!r})"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "an object" if value else "an empty object"
    return type(value).__name__


# -- a JSON schema a user gives (--response-format, --tools parameters) -----------------------

_SCHEMA_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_NUMBERS = ("minimum", "maximum", "multipleOf")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SUBSCHEMAS = ("not", "if", "then", "else", "contains", "propertyNames")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def schema_problem(schema: Any, at: str = "") -> str | None:
    """What is wrong with a JSON schema's keywords, as one phrase naming the keyword and where
    (``"required" at properties.user: must be a list of property names, not a number (5)``),
    or None. The keywords read by this module's checker and by the mock's generator must have
    JSON Schema's types; a subschema may be true or false. Walked without recursion."""
    stack: list[tuple[Any, str]] = [(schema, at)]
    while stack:
        s, where = stack.pop()
        if isinstance(s, bool):
            continue
        here = f" at {where}" if where else ""
        if not isinstance(s, dict):
            return f"a schema{here} must be an object or true/false, not {kind_of(s)}"
        problem = _type_problem(s, here) or _value_problem(s, here)
        if problem is None:
            problem = _subschemas(s, where, here, stack)
        if problem is not None:
            return problem
    return None


def _bad(s: dict[str, Any], key: str, want: str, here: str) -> str:
    return f'"{key}"{here}: must be {want}, not {kind_of(s[key])}'


def _type_problem(s: dict[str, Any], here: str) -> str | None:
    kind = s.get("type")
    if kind is None:
        return None
    kinds = kind if isinstance(kind, list) else [kind]
    if not kinds or not all(isinstance(k, str) and k in _SCHEMA_TYPES for k in kinds):
        return (f'"type"{here}: must be one of {", ".join(_SCHEMA_TYPES)} (or a list of '
                f"them), not {kind_of(kind)}")
    return None


def _value_problem(s: dict[str, Any], here: str) -> str | None:
    """The keywords whose values are not schemas: required, enum, the counts and bounds,
    pattern, format, $ref."""
    if "required" in s and not (isinstance(s["required"], list)
                                and all(isinstance(r, str) for r in s["required"])):
        return _bad(s, "required", "a list of property names", here)
    if "enum" in s and not isinstance(s["enum"], list):
        return _bad(s, "enum", "a list of values", here)
    for key in _COUNTS:
        if key in s and not (isinstance(s[key], int) and not isinstance(s[key], bool)
                             and s[key] >= 0):
            return _bad(s, key, "a whole number >= 0", here)
    for key in _NUMBERS + ("exclusiveMinimum", "exclusiveMaximum"):
        # exclusive bounds were booleans in draft 4
        if key in s and not (_is_number(s[key]) or (key.startswith("exclusive")
                                                    and isinstance(s[key], bool))):
            return _bad(s, key, "a number", here)
    for lo, hi in (("minimum", "maximum"), ("minLength", "maxLength"),
                   ("minItems", "maxItems"), ("minProperties", "maxProperties")):
        if lo in s and hi in s and s[lo] > s[hi]:
            return f'"{lo}" {s[lo]} is over "{hi}" {s[hi]}{here}: no value can satisfy it'
    for key in ("pattern", "format", "$ref"):
        if key in s and not isinstance(s[key], str):
            return _bad(s, key, "a string", here)
    return None


def _subschemas(s: dict[str, Any], where: str, here: str,
                stack: list[tuple[Any, str]]) -> str | None:
    """Push the schema's subschemas (with where each is) on ``stack``; what is wrong with a
    keyword that should hold them, or None."""
    dot = f"{where}{'.' if where else ''}"
    for key in _SUBSCHEMA_LISTS:
        if key in s:
            if not isinstance(s[key], list) or (key != "prefixItems" and not s[key]):
                return _bad(s, key, "a non-empty list of schemas", here)
            stack.extend((sub, f"{dot}{key}[{i}]") for i, sub in enumerate(s[key]))
    for key in _SUBSCHEMA_MAPS:
        if key in s:
            if not isinstance(s[key], dict):
                return _bad(s, key, "an object of schemas", here)
            stack.extend((sub, f"{dot}{key}.{name}") for name, sub in s[key].items())
    for key in _SUBSCHEMAS + ("additionalProperties", "items"):
        if key in s:
            sub = s[key]
            if key == "items" and isinstance(sub, list):        # draft 4's tuple form
                stack.extend((x, f"{dot}items[{i}]") for i, x in enumerate(sub))
                continue
            if not isinstance(sub, (dict, bool)):
                return _bad(s, key, "a schema (an object, or true/false)", here)
            stack.append((sub, f"{dot}{key}"))
    return None
