"""Results that cannot be written end in one line, a whole requests.jsonl and a documented exit
code, never a traceback (issue 23, item 3): a file over its size limit (EFBIG, from
``ulimit -f``) and a full filesystem (ENOSPC, a small tmpfs mounted by the test)."""

import contextlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from llmbench.errors import EXIT_WRITE
from tests.helpers import ENV


def _run(args: list[str], cwd: Path, limit_bytes: int | None = None, timeout: float = 120):
    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return subprocess.run([sys.executable, "-m", "llmbench.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV, cwd=cwd, preexec_fn=limit)


def _whole_lines(path: Path) -> list[dict]:
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "a torn last line"
    return [json.loads(line) for line in text.splitlines()]


@contextlib.contextmanager
def small_fs(where: Path, size_kb: int):
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"this test mounts a {size_kb} KB tmpfs to fill it and needs root for that "
                    f"(CI runs as root): {r.stderr.strip()}", pytrace=False)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_results_file_over_its_size_limit_stops_the_run_in_one_line(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=1, itl_ms=1, tokens=8)
    out = tmp_path / "out"
    # run.json and its folder first, then the limit: the records cross 40 KB after ~80 requests
    r = _run(["run", "--url", m.url + "/v1", "--model", "mock", "--requests", "3000",
              "--concurrency", "4", "--prompt-tokens", "5", "--output-tokens", "8",
              "--out", str(out)], tmp_path, limit_bytes=40_000)
    assert r.returncode == EXIT_WRITE, r.stdout + r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    folder = next(out.iterdir())
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert errors and errors[0] == (f"error: cannot write {folder / 'requests.jsonl'}: file too "
                                    "large; the load was stopped there and the records before "
                                    "it are whole in requests.jsonl"), r.stderr
    recs = _whole_lines(folder / "requests.jsonl")
    assert 10 < len(recs) < 3000 and os.path.getsize(folder / "requests.jsonl") <= 40_000
    run = json.loads((folder / "run.json").read_text())
    assert run["status"] == "failed" and "file too large" in run["error"]
    # the summary counts what was measured, written or not: at least every line on disk
    assert run["summary"]["requests"] >= len(recs)


def test_a_full_filesystem_at_the_start_and_during_a_run_is_one_line(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=1, itl_ms=1, tokens=8)
    common = ["run", "--url", m.url + "/v1", "--model", "mock", "--concurrency", "4",
              "--prompt-tokens", "5", "--output-tokens", "8"]
    with small_fs(tmp_path / "fs", 96) as fs:
        # during: the records fill it
        r = _run([*common, "--requests", "5000", "--out", str(fs / "a")], tmp_path)
        assert r.returncode == EXIT_WRITE, r.stdout + r.stderr
        assert "Traceback" not in r.stderr + r.stdout
        assert "requests.jsonl: no space left on device; the load was stopped" in r.stderr
        folder = next((fs / "a").iterdir())
        recs = _whole_lines(folder / "requests.jsonl")
        assert len(recs) > 10
        # run.json: written as failed if there was room, else the console said it was not
        if "run.json was not written" not in r.stderr:
            assert json.loads((folder / "run.json").read_text())["status"] == "failed"
        # at the start: nothing fits, not even run.json
        with contextlib.suppress(OSError), open(fs / "filler", "wb") as fh:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        r = _run([*common, "--requests", "5", "--out", str(fs / "b")], tmp_path)
        assert r.returncode == EXIT_WRITE, r.stdout + r.stderr
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: cannot write ") \
            and lines[0].endswith("run.json: no space left on device"), r.stderr
