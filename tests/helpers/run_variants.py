"""Hostile run folders (issue 49): a real run.json with one key, at the top or one level down,
set to a value of the wrong kind. What a folder edited by hand, cut by a crash or written by
another tool may hold; every reader must load it, or refuse it in one line, never raise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

# the values each key is set to: nothing, a word, empty containers, the largest float, a
# negative count, a boolean, lists nested deep, a number of 5,000 digits as text
VALUES: tuple[tuple[str, Any], ...] = (
    ("None", None), ("x", "x"), ("[]", []), ("{}", {}), ("1e308", 1e308), ("-1", -1),
    ("true", True), ("deep", [[[[[[[[[[1]]]]]]]]]]), ("digits", "9" * 5000),
)


def variants(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, run.json) for every key two levels deep, each set to each of VALUES."""
    def with_value(path: tuple[str, ...], v: Any) -> dict[str, Any]:
        out = json.loads(json.dumps(doc))
        node = out
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = v
        return out
    for k, v in doc.items():
        paths = [(k,)]
        if isinstance(v, dict):
            paths += [(k, k2) for k2 in v]
        for path in paths:
            for name, value in VALUES:
                yield ".".join(path) + "=" + name, with_value(path, value)


def write(folder: Path, doc: dict[str, Any], requests: Path | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(doc))
    if requests is not None and requests.exists():
        (folder / "requests.jsonl").write_bytes(requests.read_bytes())
    return folder
