"""Writing and reading the result files' JSON: atomic writes (a crash never leaves a torn file),
NaN as null and infinities as "inf", and one clear error for a file that is not what llmbench
writes. The bottom of the results package: the contract (schema) and the folder both use it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class RunFolderError(ValueError):
    """A folder or file that is not a run llmbench can read: the message says what and where."""


def _default(o: Any) -> Any:
    if isinstance(o, (set, tuple)):
        return list(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "__dataclass_fields__"):
        from dataclasses import asdict
        return asdict(o)
    return str(o)


def write_json(path: str | Path, obj: Any) -> None:
    """Atomically: a crash mid-write never leaves a torn run.json. A write that fails (disk
    full, file too large, read-only) leaves the previous file as it was and raises the
    OSError with the file's name (``folder.write_error_line`` says it)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, default=_default, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        if exc.filename is None or str(exc.filename) == str(tmp):
            exc.filename = str(path)
        raise


def clean_nan(obj: Any) -> Any:
    """Valid JSON: NaN (no value) becomes null; +-inf becomes the string "inf"/"-inf" (as vLLM
    writes an infinite request rate), so an infinite p95 "incl. failures" is not read as missing."""
    if isinstance(obj, float):
        if obj != obj:
            return None
        if obj in (float("inf"), float("-inf")):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {k: clean_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_nan(v) for v in obj]
    return obj


# run.json holds summaries, steps and one monitor sample a second: an hour's run is under 1 MB
MAX_RUN_JSON_BYTES = 256 << 20


def read_object(f: Path, what: str = "run.json") -> dict[str, Any]:
    """A JSON object from ``f``, or one RunFolderError saying why it is not one llmbench wrote."""
    try:
        size = f.stat().st_size
    except OSError:
        size = 0                        # read_text says what is wrong with it
    if size > MAX_RUN_JSON_BYTES:       # read whole, a 3 GB one cost 6 GB and a minute
        raise RunFolderError(f"{f}: {size / 1e6:,.0f} MB, larger than any {what} llmbench "
                             f"writes (at most {MAX_RUN_JSON_BYTES >> 20} MB are read)")
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{f}:{exc.lineno}: {what} is not valid JSON ({exc.msg})")
    except RecursionError:
        raise RunFolderError(f"{f}: {what} is nested too deeply to be one llmbench wrote")
    except UnicodeDecodeError:
        raise RunFolderError(f"{f}: {what} is not UTF-8 text; give a run folder made by llmbench")
    if not isinstance(data, dict):
        raise RunFolderError(f"{f}: {what} holds a JSON {type(data).__name__}, not the object "
                             "llmbench writes; give a run folder made by llmbench run/ramp")
    return data
