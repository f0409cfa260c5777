"""--otlp against a real third-party OpenTelemetry receiver on loopback, the Arize Phoenix server
(tests/helpers/phoenix.py; issue 48): the spans are read back through Phoenix's own REST API, so
what is checked is what a real collector stored, not our decoder (test_otlp.py has the hand-made
receiver and the slow, HTML and dripping ones). One span per request with the GenAI attributes
and the TTFT, and the traceparent the mock received names that stored span; a Phoenix stopped
mid-run loses spans, said in one line, never a measurement."""

from __future__ import annotations

import json
import threading
import time

import pytest

from llmbench.mock_server import MockConfig, MockServer
from llmbench.records.record import load_records
from tests.helpers import llmbench, only_run
from tests.helpers.phoenix import Phoenix

ARGS = ("--model", "mock", "--prompt-tokens", "10", "--output-tokens", "6", "--no-progress")


@pytest.fixture
def phoenix(tmp_path):
    wd = tmp_path / "phoenix"
    wd.mkdir()
    p = Phoenix(wd).start()
    yield p
    p.stop()


def _otlp_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "OTLP" in ln or "opentelemetry" in ln.lower()]


def test_phoenix_stores_a_span_per_request_whose_context_the_server_received(phoenix, tmp_path):
    log = tmp_path / "mock.jsonl"
    # the mock's log is whole once it stops (it writes in batches)
    with MockServer(MockConfig(ttft_ms=10, itl_ms=2), record=str(log)) as m:
        p = llmbench("run", "--url", m.url + "/v1", *ARGS, "--concurrency", "3",
                     "--requests", "9", "--out", str(tmp_path / "out"),
                     "--otlp", phoenix.url, timeout=120)
    assert p.returncode == 0, p.stderr
    assert _otlp_lines(p.stderr) == [f"OTLP: 9 request spans sent to {phoenix.url}/v1/traces"]
    recs = load_records(only_run(tmp_path / "out") / "requests.jsonl")
    assert len(recs) == 9 and all(r.trace_id for r in recs)
    # the records' spans and the preflight's
    stored = phoenix.wait_for_spans(len(recs) + 1)
    requests = [s for s in stored if "llmbench.request_id" in s["attributes"]
                and not s["attributes"].get("llmbench.preflight")]
    by_trace = {s["context"]["trace_id"]: s for s in requests}
    assert len(requests) == len(by_trace) == len(recs), [s["name"] for s in stored]
    received = {}
    for line in log.read_text().splitlines():
        d = json.loads(line)
        if "traceparent" in d:
            received[d["request_id"]] = d["traceparent"]
    for r in recs:
        s = by_trace[r.trace_id]
        # the server got the stored span's own context: its spans would be that span's children
        assert received[r.request_id] == \
            f"00-{s['context']['trace_id']}-{s['context']['span_id']}-01"
        a = s["attributes"]
        assert a["llmbench.request_id"] == r.request_id
        assert a["gen_ai.request.model"] == "mock" and a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.usage.input_tokens"] == r.prompt_tokens
        assert a["gen_ai.usage.output_tokens"] == r.output_tokens
        assert abs(a["llmbench.ttft_ms"] - r.ttft * 1000.0) < 1e-3     # to the µs on disk
        assert a["llmbench.outcome"] == "ok" and a["llmbench.user"] == r.user
        assert {"send", "wait", "first_token", "decode"} <= {e["name"] for e in s["events"]}
    # the preflight, the one-token request before the load, is no measurement (no record) but
    # sent a traceparent too: its span is stored, marked, with the context the mock received
    ours = {r.request_id for r in recs}
    sent = [tp for rid, tp in received.items() if rid not in ours]
    marked = [s for s in stored if s["attributes"].get("llmbench.preflight")]
    assert len(sent) == 1 and len(marked) == 1, (sent, [s["attributes"] for s in marked])
    pre = marked[0]
    assert sent[0] == f"00-{pre['context']['trace_id']}-{pre['context']['span_id']}-01"
    assert pre["context"]["trace_id"] not in by_trace       # a trace of its own
    a = pre["attributes"]
    assert a["llmbench.outcome"] == "ok" and a["gen_ai.request.max_tokens"] == 1
    assert a["gen_ai.request.model"] == "mock" and "llmbench.step" not in a


def test_phoenix_stopped_mid_run_loses_spans_not_measurements(phoenix, mock_factory, tmp_path):
    m = mock_factory(ttft_ms=10, itl_ms=2)
    seen: list[dict] = []

    def stop_after_first_spans() -> None:
        deadline = time.monotonic() + 60
        while not seen and time.monotonic() < deadline:
            try:
                # the load's request spans (the preflight's comes first, before any load)
                seen.extend(s for s in phoenix.spans()
                            if not s["attributes"].get("llmbench.preflight"))
            except OSError:
                pass
            time.sleep(0.1)
        phoenix.stop()
    # the load runs 15 s: on a machine kept busy by two other processes Phoenix took over 6 s
    # to show the first spans, and a 6 s run had sent them all before it went down
    stopper = threading.Thread(target=stop_after_first_spans, daemon=True)
    stopper.start()
    p = llmbench("run", "--url", m.url + "/v1", *ARGS, "--concurrency", "4", "--duration", "15s",
                 "--out", str(tmp_path / "out"), "--otlp", phoenix.url, timeout=180)
    stopper.join(timeout=70)
    assert p.returncode == 0, p.stderr
    d = only_run(tmp_path / "out")
    recs = load_records(d / "requests.jsonl")
    summary = json.loads((d / "run.json").read_text())["summary"]
    assert summary["completed"] == sum(1 for r in recs if r.ok and not r.warmup) > 0
    lines = _otlp_lines(p.stderr)
    assert len(lines) == 1 and " request spans dropped (" in lines[0], p.stderr
    dropped = int(lines[0].split("OTLP: ")[1].split(" of ")[0])
    # Phoenix had stored some of this run's spans before it went down (a restart on its store
    # would show them again, at another start-up's cost); the rest were dropped, not waited for
    assert seen and {s["attributes"]["llmbench.request_id"] for s in seen} <= \
        {r.request_id for r in recs}
    assert 0 < dropped <= len(recs) - len(seen)
