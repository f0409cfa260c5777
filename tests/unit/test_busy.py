"""tests/helpers/busy.py: the deadlines the timing-bound tests wait with (issue 49) stretch
with the slowdown they measure, and still end a hang."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.helpers import busy


def test_slowdown_is_a_factor_of_at_least_one_and_bounded():
    f = busy.slowdown()
    assert 1.0 <= f <= busy.MAX_FACTOR


def test_a_deadline_spends_its_budget_at_the_measured_slowdown(monkeypatch):
    # a machine measured 3x slower: a 0.2 s quiet wait lasts about 0.6 s of wall time
    monkeypatch.setattr(busy, "slowdown", lambda *a, **k: 3.0)
    d = busy.Deadline(0.2, every_s=0.05)
    t = time.monotonic()
    while not d.expired():
        time.sleep(0.01)
    took = time.monotonic() - t
    assert took >= 0.6 - 0.02, took
    assert "3.0-3.0x slower" in str(d)


def test_a_deadline_never_stretches_past_its_cap(monkeypatch):
    monkeypatch.setattr(busy, "slowdown", lambda *a, **k: 1e9)
    monkeypatch.setattr(busy, "MAX_FACTOR", 2.0)
    d = busy.Deadline(0.1)
    while not d.expired():
        time.sleep(0.01)
    assert 0.2 - 0.02 <= d.elapsed() < 1.0


def test_run_returns_what_the_child_printed_and_kills_a_hang():
    r = busy.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], 30,
                 capture_output=True, text=True, input="hello")
    assert r.returncode == 0 and r.stdout.strip() == "HELLO"
    t = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        busy.run([sys.executable, "-c", "import time; time.sleep(60)"], 0.3)
    assert time.monotonic() - t < 0.3 * busy.MAX_FACTOR + 5


def test_generator_finding_reads_the_tools_own_verdict():
    assert busy.generator_finding({"verdict": {"kind": "queuing"}, "steps": [
        {"load": 1, "monitor": {"overloaded": False}}]}) is None
    said = busy.generator_finding({"verdict": {"kind": "load_generator", "result": "Held 2.",
                                               "evidence": ["llmbench itself was frozen"]}})
    assert said == "Held 2. llmbench itself was frozen"
    assert "load 4" in busy.generator_finding({"verdict": {"kind": "queuing"}, "steps": [
        {"load": 4, "monitor": {"overloaded": True}}]})
    assert busy.said_busy("    8    15  2.08s  over (machine busy)")
    assert not busy.said_busy("    8    15  2.08s  over")
