#!/usr/bin/env python3
"""Every Python the package claims runs the README's commands (issue 30).

For each interpreter from ``requires-python`` up to 3.13 other than the one running this
script (the full test suite runs there): a fresh venv, ``pip install .`` (the package's pure
wheel, built once by this interpreter, with its dependencies), then in an empty
folder the README's first command in a short form, ``run`` twice, ``report`` and ``compare`` on
the results, and every command's ``--help`` listing the same option names as the main
interpreter (tests/fixtures/cli_options.json, which tests/unit/test_cli_options.py checks there).
An interpreter that is not on the machine is named in one line and skipped; any failure
exits 1 with what failed. The interpreters are checked at once; each step prints a line as it
ends (the interpreter, the step, its seconds, and the seconds since the start).

    python scripts/check_pythons.py                 # every other claimed interpreter found
    python scripts/check_pythons.py --only 3.10     # one of them
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "cli_options.json"
NEWEST = (3, 13)
# a step that has printed nothing and changed nothing for this long is stuck
STALL_S = 300


def claimed() -> list[tuple[int, int]]:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'requires-python\s*=\s*">=\s*3\.(\d+)"', text)
    low = int(m.group(1)) if m else 10
    return [(3, minor) for minor in range(low, NEWEST[1] + 1)]


def find(version: tuple[int, int]) -> str | None:
    name = f"python{version[0]}.{version[1]}"
    pyenv = os.path.expanduser(os.environ.get("PYENV_ROOT", "~/.pyenv"))
    for cand in sorted(glob.glob(f"{pyenv}/versions/{version[0]}.{version[1]}.*/bin/{name}"),
                       reverse=True):
        return cand
    found = shutil.which(name)
    if found and "/shims/" not in found:      # a pyenv shim for a version it lacks fails late
        return found
    return None


class Failed(Exception):
    pass


_PRINT = threading.Lock()
_T0 = time.monotonic()


def say(line: str) -> None:
    """One progress line, as it happens (the interpreters are checked at once: each line
    names its interpreter), with the seconds since the script started."""
    with _PRINT:
        print(f"[{time.monotonic() - _T0:5.0f} s] {line}", flush=True)


def step(name: str, what: str, cmd: list[str], cwd: Path, ok_codes=(0,), env=None,
         progress=None) -> str:
    """Run one step; its line once it ends. It fails when it has made no progress for
    STALL_S: no output, and (``progress``: a function of what it has done so far, e.g. the
    entries of a venv's site-packages) no change there either. Not a fixed timeout: on a busy
    2-core machine ``pip install`` took over 600 s while it kept going (issue 49)."""
    t = time.monotonic()
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out_f, stderr=err_f, text=True,
                                env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
        seen, moved = None, time.monotonic()
        while proc.poll() is None:
            time.sleep(0.2 if time.monotonic() - t < 5 else 2.0)
            now = (out_f.tell(), err_f.tell(), progress() if progress else None)
            if now != seen:
                seen, moved = now, time.monotonic()
            elif time.monotonic() - moved > STALL_S:
                proc.kill()
                proc.wait()
                raise Failed(f"{what}: no progress for {STALL_S} s (after "
                             f"{time.monotonic() - t:.0f} s); stopped")
        out_f.seek(0)
        err_f.seek(0)
        stdout, stderr = out_f.read(), err_f.read()
    out = stdout + stderr
    if proc.returncode not in ok_codes or "Traceback (most recent call last)" in out:
        tail = "\n    ".join(out.strip().splitlines()[-12:])
        raise Failed(f"{what}: exit {proc.returncode}\n    {tail}")
    say(f"{name}: ok  {what} ({time.monotonic() - t:.1f} s)")
    return stdout


def entries(folder: Path):
    """How many names a step has written so far into ``folder``'s site-packages,
    a cheap sign of progress for ``step``."""
    def look() -> int:
        try:
            return sum(1 for p in folder.glob("lib/python*/site-packages/*"))
        except OSError:
            return -1
    return look


def build_wheel(work: Path) -> Path:
    """The package's wheel, built once by this interpreter: it is pure Python (py3-none-any),
    the same file each interpreter's ``pip install .`` would build, so each venv installs it
    (with its dependencies) instead of building it again."""
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--disable-pip-version-check", "-w", str(work), str(ROOT)],
                       capture_output=True, text=True, timeout=STALL_S * 4,
                       stdin=subprocess.DEVNULL)
    wheels = sorted(work.glob("llmbench-*.whl"))
    if r.returncode != 0 or not wheels:
        raise Failed(f"pip wheel .: exit {r.returncode}\n    " +
                     "\n    ".join((r.stdout + r.stderr).strip().splitlines()[-12:]))
    if not wheels[0].name.endswith("-py3-none-any.whl"):
        raise Failed(f"pip wheel .: {wheels[0].name} is not pure Python: build it per version")
    say(f"built {wheels[0].name} ({time.monotonic() - t:.1f} s)")
    return wheels[0]


def newest_run(folder: Path) -> Path:
    runs = sorted(p for p in folder.iterdir() if (p / "run.json").exists())
    if not runs:
        raise Failed(f"no run folder in {folder}")
    return runs[-1]


def check(python: str, version: tuple[int, int], wheel: Path) -> None:
    name = f"Python {version[0]}.{version[1]}"
    work = Path(tempfile.mkdtemp(prefix=f"llmbench-py{version[0]}{version[1]}-"))
    try:
        venv = work / "venv"
        step(name, "venv", [python, "-m", "venv", str(venv)], work)
        bin_ = venv / "bin"
        # no .pyc for every installed module (pandas, scipy, pyarrow: most of pip's CPU on a
        # 2-core machine); what runs compiles its own on import
        step(name, "pip install . (the wheel and its dependencies)",
             [str(bin_ / "pip"), "install", "--no-compile", "--disable-pip-version-check",
              str(wheel)], work, progress=entries(venv))
        llmbench = str(bin_ / "llmbench")
        home = work / "home"
        home.mkdir()
        env = {"LLMBENCH_TOKENIZER": "approx"}
        # the README's first command, short; 99 is "thresholds failed" (a verdict, not a crash)
        step(name, "ramp --users 1,2 --hold 3s", [llmbench, "ramp", "--users", "1,2", "--hold", "3s"],
             home, ok_codes=(0, 99), env=env)
        newest_run(home / "results")
        runs = []
        for i in (1, 2):
            out = home / f"runs{i}"
            step(name, f"run --requests 6 ({i})", [llmbench, "run", "--requests", "6", "--out",
                                             str(out)], home, env=env)
            runs.append(newest_run(out))
        step(name, "report", [llmbench, "report", str(runs[0])], home)
        if not (runs[0] / "report.html").exists():
            raise Failed("report: no report.html")
        step(name, "compare", [llmbench, "compare", str(runs[0]), str(runs[1]), "--html",
                         str(home / "compare.html")], home)
        step(name, "option names", [str(bin_ / "python"), str(ROOT / "scripts" / "cli_options.py"),
                              "--check"], work)   # run from outside the checkout: the install
        want = json.loads(FIXTURE.read_text())
        for cmd, names in want.items():
            args = cmd.split() if cmd else []
            text = step(name, f"{cmd or '(top)'} --help", [llmbench, *args, "--help"], home,
                        env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
            absent = [n for n in names
                      if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
            if absent:
                raise Failed(f"{cmd} --help does not list {absent}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="e.g. 3.10 (repeatable)")
    args = ap.parse_args()
    here = sys.version_info[:2]
    wanted = [v for v in claimed() if v != here]
    if args.only:
        wanted = [v for v in wanted if f"{v[0]}.{v[1]}" in args.only]
    # the interpreters are checked at once, each in its own venv and folder (most of a check
    # is pip installing and commands waiting on the mock: 3 in a row took ~300 s on the 2-core
    # CI machine); each step's line is printed as it ends, naming its interpreter
    found = []
    for v in wanted:
        python = find(v)
        if python is None:
            say(f"Python {v[0]}.{v[1]}: not on this machine, not checked (the suite runs on "
                f"{here[0]}.{here[1]})")
        else:
            found.append((v, python))
    if not found:
        return 0
    say(f"check_pythons: {', '.join(f'{v[0]}.{v[1]}' for v, _ in found)} at once, after "
        "building the wheel")
    build = Path(tempfile.mkdtemp(prefix="llmbench-wheel-"))
    try:
        try:
            wheel = build_wheel(build)
        except (Failed, subprocess.TimeoutExpired) as exc:
            say(f"check_pythons: FAILED {exc}")
            return 1

        def one(v: tuple[int, int], python: str) -> bool:
            name = f"Python {v[0]}.{v[1]}"
            say(f"{name}: {python}")
            t = time.monotonic()
            try:
                check(python, v, wheel)
                say(f"{name}: works ({time.monotonic() - t:.0f} s)")
                return True
            except (Failed, subprocess.TimeoutExpired) as exc:
                say(f"{name}: FAILED {exc}")
                return False

        with ThreadPoolExecutor(max_workers=len(found)) as pool:
            oks = list(pool.map(lambda a: one(*a), found))
    finally:
        shutil.rmtree(build, ignore_errors=True)
    failed = [f"Python {v[0]}.{v[1]}" for (v, _), ok in zip(found, oks) if not ok]
    if failed:
        say(f"check_pythons: failed on {', '.join(failed)}")
        return 1
    say(f"check_pythons: {len(found)} interpreter(s) work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
