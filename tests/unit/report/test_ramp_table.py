"""The ramp table fits an 80-column terminal (issue 40 §5), and the README's sample of it is
what the code prints."""

from __future__ import annotations

import re

from llmbench.report import console
from llmbench.results.schema import Step
from tests.helpers import ROOT


def _step(load: float, state: str, requests: int = 8, **summary) -> dict:
    s = {"requests": requests, "completed": requests, "failed": 0, "median_ttft_ms": 129.4,
         "p95_ttft_ms": 12_489.0, "p95_itl_ms": 188.9, "p95_e2el_ms": 123_998.0,
         "output_throughput": 9_851.2, **summary}
    return Step.from_dict({"index": 0, "load": load, "held": state == "held", "state": state,
                           "checks": [], "monitor": {}, "summary": s})


def test_header_and_rows_fit_80_columns():
    assert len(console.ramp_header()) <= console.RAMP_WIDTH
    assert len(console.ramp_header("Req/s", "embeddings")) <= console.RAMP_WIDTH
    # wide figures (seconds, thousands of tokens/s, 10,000 requests) and the longest state
    for state in ("held", "over", "not enough data"):
        row = console.ramp_row(_step(128, state, requests=10_000))
        assert len(row) <= console.RAMP_WIDTH, (len(row), row)
        assert row.endswith(state)
    # the columns line up under their headers
    header = console.ramp_header()
    row = console.ramp_row(_step(2, "held"))
    for name, value in (("TTFT p95", "12.49s"), ("ITL p95", "189ms"), ("Errors", "0")):
        end = header.index(name) + len(name)
        assert row[:end].endswith(value), (name, row)


def test_the_readme_sample_is_the_table_the_code_prints():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("prints something like:\n\n```text\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert lines[0] == console.ramp_header()
    # the table's rows: up to the blank line under it (the verdict follows)
    rows = [ln for ln in lines[1:lines.index("")] if re.match(r"^\s+\d", ln)]
    assert len(rows) >= 3
    for ln in [lines[0], *rows]:
        assert len(ln) <= console.RAMP_WIDTH, ln
    # each sample row parses back into the header's columns
    for ln in rows:
        users, reqs, ttft50, ttft95, itl95, e2el, tok_s, errors, shown = ln.split(None, 8)
        # the state and its marker (console.state_text): "*" a busy machine in that step
        state = shown.rstrip(console.BUSY)
        monitor = {"overloaded": True, "lag_p99_ms": 0.0} if shown.endswith(console.BUSY) else {}
        # an "over" row broke TTFT p95 <= 2 s by more than the lag (so "*", not "!")
        checks = [] if state != "over" else [
            {"threshold": "ttft.p95<=2s", "ok": False, "actual": _ms(ttft95), "limit": 2000.0,
             "metric": "ttft", "stat": "p95"}]
        row = console.ramp_row(Step.from_dict({
            "index": 0, "load": float(users), "held": state == "held", "state": state,
            "checks": checks, "monitor": monitor, "summary": {
                "requests": int(reqs), "failed": int(errors), "median_ttft_ms": _ms(ttft50),
                "p95_ttft_ms": _ms(ttft95), "p95_itl_ms": _ms(itl95), "p95_e2el_ms": _ms(e2el),
                "output_throughput": float(tok_s)}}))
        assert row == ln


def _ms(text: str) -> float:
    return float(text[:-2]) if text.endswith("ms") else float(text[:-1]) * 1000


def _busy(load: float, cpu_pct: float) -> Step:
    """A step that broke TTFT p95 by 10 ms with the loop 30 ms late: the lag explains it."""
    return Step.from_dict({
        "index": int(load), "load": load, "held": False, "state": "over",
        "monitor": {"overloaded": True, "lag_p99_ms": 30.0, "cpu_pct": cpu_pct},
        "checks": [{"threshold": "ttft.p95<=2s", "ok": False, "actual": 2010.0, "limit": 2000.0,
                    "metric": "ttft", "stat": "p95"}],
        "summary": {"requests": 20, "completed": 20, "failed": 0, "p95_ttft_ms": 2010.0}})


def test_the_untrusted_mark_names_the_cause_the_verdict_names():
    from llmbench.analysis.verdict import explain
    # other processes had the CPU (llmbench at 3%): the verdict's words, and the mark's
    starved = [_busy(1, 3.0), _busy(2, 3.0)]
    starved[0] = Step.from_dict({**starved[0].to_dict(), "held": True, "state": "held",
                                 "checks": []})
    v = explain(starved, [], "users")
    assert v.kind == "load_generator" and v.generator_cause == "machine"
    assert "busy with other processes" in " ".join(v.evidence)
    marks = console.marks_lines(starved, v)
    mark = [m for m in marks if m.startswith(console.UNTRUSTED)]
    assert mark == [f"{console.UNTRUSTED} not trustworthy at 2 users: the machine was busy "
                    "with other processes (they had the CPU), and the lag they gave llmbench's "
                    "timestamps could explain why the step broke."]
    assert "llmbench's own lag" not in " ".join(marks)
    # llmbench itself busy (95% of a core): both say it was llmbench
    own = [starved[0], _busy(2, 95.0)]
    v = explain(own, [], "users")
    assert v.generator_cause == "llmbench"
    mark = [m for m in console.marks_lines(own, v) if m.startswith(console.UNTRUSTED)]
    assert mark == [f"{console.UNTRUSTED} not trustworthy at 2 users: llmbench itself was busy, "
                    "and its own lag could explain why the step broke."]


def test_a_mark_at_one_user_says_user():
    one = _busy(1, 3.0)
    marks = console.marks_lines([one])
    assert marks[0].startswith(f"{console.BUSY} the machine was busy with other processes at "
                               "1 user:"), marks
    assert marks[1].startswith(f"{console.UNTRUSTED} not trustworthy at 1 user: "), marks
