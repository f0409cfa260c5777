"""Every run folder loads and writes back byte-identical: run.json (sweep.json) read with
``load_result`` and saved again is the same bytes, for results/examples, tests/fixtures and
../shared/real-runs (or the folders given). Prints one line per folder and a total; exits 1
when any differs (the first differing key is named).

    python scripts/check_folders_identical.py
    python scripts/check_folders_identical.py path/to/run-folder ...
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmbench.results.schema import load_result  # noqa: E402

PLACES = (ROOT / "results" / "examples", ROOT / "tests" / "fixtures",
          ROOT.parent / "shared" / "real-runs")


def folders(given: list[str]) -> list[Path]:
    if given:
        return [Path(g) for g in given]
    found = {p.parent for place in PLACES if place.is_dir()
             for name in ("run.json", "sweep.json") for p in place.rglob(name)}
    return sorted(found)


def first_difference(a: object, b: object, at: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{at or '.'}: keys {list(a)} != {list(b)}"
        for k in a:
            got = first_difference(a[k], b[k], f"{at}.{k}")
            if got:
                return got
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{at}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            got = first_difference(x, y, f"{at}[{i}]")
            if got:
                return got
        return ""
    return "" if a == b else f"{at}: {a!r} != {b!r}"


def main() -> int:
    bad = 0
    todo = folders(sys.argv[1:])
    for folder in todo:
        name = "run.json" if (folder / "run.json").is_file() else "sweep.json"
        raw = (folder / name).read_text(encoding="utf-8")
        with tempfile.TemporaryDirectory() as tmp:
            load_result(folder).save(tmp)
            again = (Path(tmp) / name).read_text(encoding="utf-8")
        if again == raw:
            print(f"{folder}: identical ({len(raw):,} bytes)")
            continue
        bad += 1
        why = first_difference(json.loads(raw), json.loads(again)) or "same JSON, other bytes"
        print(f"{folder}: DIFFERS at {why}")
    print(f"{len(todo)} folders, {len(todo) - bad} byte-identical, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
