"""JSON and small files from outside llmbench, read with limits: a server's reply (a models
list, /slots, a tokenizer's answer) or a file a flag names (--tools, --response-format,
--config). What is refused is one ValueError (JsonLimitError) whose message is one line, never
a RecursionError, a MemoryError or a read without end.

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
