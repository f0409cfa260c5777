"""The code @dataclass compiles for llmbench's classes, kept between command-line processes.

Installed by the command line only (llmbench/cli/__init__.py), before it imports the rest:
it replaces the ``exec`` that dataclasses.py calls, which a library user's process should
not find changed by ``import llmbench``."""

from __future__ import annotations


def install() -> None:
    """Compile llmbench's dataclasses' generated methods once, not in every process.
    @dataclass writes each class's __init__, __repr__, __eq__ ... as source text and execs it
    (dataclasses.py's ``exec(txt, globals, ns)``): compiling that text for the ~270 classes a
    run imports was a quarter of its start-up CPU (~0.08 s of ~0.4 s, issue 50 §2). The code
    compiled from each text is kept beside llmbench's bytecode (as Python keeps .pyc files,
    and not written under PYTHONDONTWRITEBYTECODE) and exec'd as it was: the same text makes
    the same code, so the classes are the same. Other modules' dataclasses are left alone."""
    import builtins
    import dataclasses
    import hashlib
    import marshal
    import os
    import sys
    from importlib.util import MAGIC_NUMBER, cache_from_source

    if getattr(dataclasses, "exec", None) is not None:
        return                                      # installed already (a reload)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(os.path.dirname(cache_from_source(os.path.join(package, "__init__.py"))),
                        "dataclasses." + (sys.implementation.cache_tag or "py") + ".marshal")
    # {hash of the text: its code, marshalled}: each class's code is unmarshalled when its
    # class is made, so a run pays for the ~200 classes it imports, not for all ~800 the file
    # holds (every command's; unmarshalling them all was ~15 ms of a run's start-up)
    codes: dict[bytes, bytes] = {}
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:len(MAGIC_NUMBER)] == MAGIC_NUMBER:
            # loads from bytes: marshal.load(file) reads in small pieces, 10 times slower
            loaded = marshal.loads(memoryview(data)[len(MAGIC_NUMBER):])
            if type(loaded) is dict:
                codes = loaded
    except (OSError, EOFError, ValueError, TypeError):
        pass                                        # none yet, or not one this Python wrote
    new: list[bytes] = []
    stale = [k for k, v in codes.items() if type(v) is not bytes]
    for k in stale:                     # an earlier llmbench's entries (code objects): dropped,
        del codes[k]                    # and the file written again without them

    def exec_(source: object, globals: dict | None = None, locals: dict | None = None) -> None:
        if type(source) is str and globals is not None and \
                str(globals.get("__name__", "")).startswith("llmbench."):
            key = hashlib.blake2b(source.encode(), digest_size=16).digest()
            code = None
            kept = codes.get(key)
            if type(kept) is bytes:
                try:
                    code = marshal.loads(kept)
                except (EOFError, ValueError, TypeError):
                    code = None                     # broken: compiled again, and kept anew
            if code is None:
                # dont_inherit: compiled as dataclasses.py's exec compiles it (no __future__)
                code = compile(source, "<string>", "exec", dont_inherit=True)
                codes[key] = marshal.dumps(code)
                new.append(key)
            source = code
        builtins.exec(source, globals, locals)  # type: ignore[arg-type]

    def save() -> None:
        if not (new or stale) or sys.dont_write_bytecode:
            return
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(MAGIC_NUMBER)
                # a few thousand texts at most: a cache grown past that by edits starts over
                marshal.dump(codes if len(codes) < 4000 else {k: codes[k] for k in new}, f)
            os.replace(tmp, path)
        except OSError:
            pass                                    # a read-only install: compiled each time

    dataclasses.exec = exec_                        # type: ignore[attr-defined]
    import atexit
    atexit.register(save)
