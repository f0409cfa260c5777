"""compare says what is true of the runs it compares (issue 45): runs without thresholds held
nothing ("A held 4; B held 4" was said), runs asked for 40 and 60 requests are compared as the
share that completed (not "completed +50 %"), its table fits 80 columns however many runs, and
its page goes beside the candidate's folder, not into it."""

import re

from tests.helpers import llmbench


def _run(mock, out, name, requests):
    r = llmbench("run", "--url", mock.url + "/v1", "--model", "mock", "--concurrency", "4",
                 "--requests", str(requests), "--prompt-tokens", "10", "--output-tokens", "4",
                 "--label", f"name={name}", "--out", str(out), timeout=120)
    assert r.returncode == 0, r.stderr
    (folder,) = [p for p in out.iterdir() if p.is_dir() and p.name.endswith(name)]
    return folder


def test_compare_says_what_is_true_and_fits(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1, parallel=4)
    a = _run(m, tmp_path, "A", 40)
    b = _run(m, tmp_path, "B", 60)
    c = _run(m, tmp_path, "C", 40)
    r = llmbench("compare", str(a), str(b), str(c), timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    first = out.splitlines()[0]
    assert "ran at 4 (no thresholds)" in first and " held " not in first, first
    completed = [ln for ln in out.splitlines() if ": completed at 4:" in ln]
    b_line = next(ln for ln in completed if ln.strip().startswith("B:"))
    assert "asked 40 and 60: compared as shares" in b_line and "+50" not in b_line, b_line
    assert "+0.0%" in b_line, b_line
    assert not [ln for ln in out.splitlines() if ln.strip().startswith("B: held")], out
    # the table: blocks of two runs, each line within 80 columns
    table = out.split("Change against", 1)[0].splitlines()[1:]
    assert table and all(len(ln) <= 80 for ln in table), table
    assert sum(1 for ln in table if ln.lstrip().startswith("load")) == 2
    page = a.parent / f"compare-{a.name}-vs-{b.name}-etc.html"
    assert page.is_file() and not (c / "compare.html").exists()
    assert re.search(rf"HTML: {re.escape(str(page))}", out)
