"""A probe path's slim summary keeps its failures' samples (it raised on them: the error
samples went back through from_dict as objects, not as run.json holds them)."""

from __future__ import annotations

from llmbench.analysis.metrics import summarize
from llmbench.analysis.router_ab import SLIM
from llmbench.records.record import Record


def test_slim_keeps_the_error_samples_of_failed_requests():
    ok = [Record(f"r{i}", float(i), start=float(i), ok=True, first_token=i + 0.1, end=i + 0.2,
                 done=i + 0.2, token_times=[i + 0.1, i + 0.2], output_tokens=2, status=200)
          for i in range(4)]
    bad = Record("bad", 5.0, start=5.0, done=5.1, status=503, error_kind="http",
                 error="queue full")
    full = summarize(ok + [bad])
    assert full.error_samples
    slim = full.slim(SLIM)
    assert slim.failed == 1 and slim.error_samples == full.error_samples
    assert slim.completed == 4 and slim.ttft.median == full.ttft.median
