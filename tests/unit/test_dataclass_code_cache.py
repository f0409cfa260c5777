"""llmbench/cli/dataclass_code.py keeps the code @dataclass compiles for llmbench's classes beside the
bytecode (issue 50 §2: compiling it was a quarter of a run's start-up CPU). A process that
reads the kept code must make the same classes as one that compiles it: the same methods,
bytecode for bytecode, and the same behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import dataclasses, importlib, json, re, sys
import llmbench.cli
mods = ["llmbench.results.schema", "llmbench.specs.run", "llmbench.records.record",
        "llmbench.load.harness", "llmbench.options"]
out = {}
for name in mods:
    m = importlib.import_module(name)
    for cname, cls in sorted(vars(m).items()):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            continue
        for meth in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
            f = cls.__dict__.get(meth)
            code = getattr(f, "__code__", None)
            if code is not None:
                out[f"{cls.__module__}.{cname}.{meth}"] = [
                    code.co_code.hex(), list(code.co_names), list(code.co_varnames),
                    repr(code.co_consts), repr(getattr(f, "__defaults__", None)),
                    repr(getattr(f, "__kwdefaults__", None)), repr(f.__annotations__)]
from llmbench.records.record import Record
r = Record("x", 1.5)
out["behaviour"] = [repr(r), r == Record("x", 1.5), r == Record("y", 1.5)]
# objects' addresses differ between processes: not what is compared
print(re.sub(r" at 0x[0-9a-f]+", "", json.dumps({"classes": out})))
"""


def _probe(env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_kept_code_makes_the_same_classes_as_compiling(tmp_path):
    # bytecode (and the kept code) under a prefix of the test's own: the checkout is untouched
    keep = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    no_write = {**keep, "PYTHONDONTWRITEBYTECODE": "1"}
    fresh = _probe(no_write)                            # nothing kept: compiled
    assert not list((tmp_path / "pyc").rglob("dataclasses.*.marshal"))
    first = _probe({**keep, "PYTHONDONTWRITEBYTECODE": ""})    # compiled, then kept
    kept = list((tmp_path / "pyc").rglob("dataclasses.*.marshal"))
    assert len(kept) == 1 and kept[0].stat().st_size > 10_000
    second = _probe(no_write)                           # read from what was kept
    assert len(fresh["classes"]) > 100
    assert second["classes"] == fresh["classes"] == first["classes"]


def test_a_kept_file_from_another_python_or_broken_is_ignored(tmp_path):
    keep = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pyc"), "PYTHONDONTWRITEBYTECODE": ""}
    good = _probe(keep)
    (path,) = (tmp_path / "pyc").rglob("dataclasses.*.marshal")
    path.write_bytes(b"\0\0\0\0not marshal")
    assert _probe(keep)["classes"] == good["classes"]
    path.write_bytes(path.read_bytes()[:4] + b"garbage")
    assert _probe(keep)["classes"] == good["classes"]


def test_a_library_user_finds_dataclasses_unchanged():
    """Only the command line keeps the code: ``import llmbench`` and its API leave the
    ``exec`` that dataclasses.py calls alone; the command line's package installs it."""
    probe = ("import dataclasses, llmbench, llmbench.api, llmbench.results.schema\n"
             "print(getattr(dataclasses, 'exec', None) is None)\n"
             "import llmbench.cli\n"
             "print(getattr(dataclasses, 'exec', None) is not None)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]


def test_an_earlier_files_code_objects_are_dropped_and_the_file_rewritten(tmp_path):
    # stop 54 kept code objects; this llmbench keeps each class's code marshalled apart (read
    # when its class is made): the old entries would be read at every start-up for nothing
    import marshal
    from importlib.util import MAGIC_NUMBER
    keep = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pyc"), "PYTHONDONTWRITEBYTECODE": ""}
    good = _probe(keep)
    (path,) = (tmp_path / "pyc").rglob("dataclasses.*.marshal")
    kept = marshal.loads(path.read_bytes()[len(MAGIC_NUMBER):])
    assert kept and all(type(v) is bytes for v in kept.values())
    old = {k: marshal.loads(v) for k, v in kept.items()}         # the earlier format
    path.write_bytes(MAGIC_NUMBER + marshal.dumps(old))
    assert _probe(keep)["classes"] == good["classes"]
    again = marshal.loads(path.read_bytes()[len(MAGIC_NUMBER):])
    assert again and all(type(v) is bytes for v in again.values())
