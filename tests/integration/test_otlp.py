"""--otlp and --traceparent (report/otlp.py) against an OTLP/HTTP receiver on loopback
(tests/helpers/otlp_sink.py): one span per request with the GenAI attributes, the traceparent
the mock received is the span's own context, and a collector that is down, stopped, slow or
answers HTML loses spans (said in one line), never measurements, never the load's time."""

from __future__ import annotations

import json
import time

from llmbench.mock_server import MockConfig, MockServer
from llmbench.records.record import load_records
from tests.helpers import llmbench, only_run
from tests.helpers.otlp_sink import OtlpSink

ARGS = ("--model", "mock", "--prompt-tokens", "10", "--output-tokens", "6", "--no-progress")


def _run(url: str, out, *extra: str, timeout: float = 120) -> tuple[object, float]:
    t = time.monotonic()
    p = llmbench("run", "--url", url + "/v1", *ARGS, "--out", str(out), *extra, timeout=timeout)
    return p, time.monotonic() - t


def _otlp_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "OTLP" in ln or "opentelemetry" in ln.lower()]


def test_each_request_is_a_span_whose_context_the_server_received(tmp_path):
    log = tmp_path / "mock.jsonl"
    # the mock's log is whole once it stops (it writes in batches)
    with MockServer(MockConfig(ttft_ms=10, itl_ms=2), record=str(log)) as m, \
            OtlpSink() as sink:
        p, _ = _run(m.url, tmp_path / "out", "--concurrency", "4", "--requests", "24",
                    "--otlp", sink.url)
    assert p.returncode == 0, p.stderr
    lines = _otlp_lines(p.stderr)
    assert lines == [f"OTLP: 24 request spans sent to {sink.url}/v1/traces"], p.stderr
    recs = load_records(only_run(tmp_path / "out") / "requests.jsonl")
    measured = [r for r in recs if r.trace_id]
    spans = {s["trace_id"]: s for s in sink.requests()}
    assert len(spans) == len(recs) == len(measured) == 24 + sum(r.warmup for r in recs)
    received = {}
    for line in log.read_text().splitlines():
        d = json.loads(line)
        if "traceparent" in d:
            received[d["request_id"]] = d["traceparent"]
    for r in recs:
        s = spans[r.trace_id]
        # the server got this span's context: its own spans would be its children
        assert received[r.request_id] == f"00-{s['trace_id']}-{s['span_id']}-01"
        a = s["attributes"]
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "mock"
        assert a["gen_ai.usage.output_tokens"] == r.output_tokens
        assert a["gen_ai.usage.input_tokens"] == r.prompt_tokens
        assert a["llmbench.request_id"] == r.request_id and a["llmbench.outcome"] == "ok"
        assert abs(a["llmbench.ttft_ms"] - r.ttft * 1000.0) < 1e-3     # to the µs on disk
        assert "llmbench.itl_p50_ms" in a and a["llmbench.user"] == r.user
        assert s["kind"] == 3                               # SPAN_KIND_CLIENT
        assert {"send", "wait", "first_token", "decode"} <= set(s["events"])
        assert s["end_ns"] >= s["start_ns"]
    # and the preflight's span (no record: not a measurement), whose context it sent too
    pre = sink.preflights()
    sent = [tp for rid, tp in received.items() if rid not in {r.request_id for r in recs}]
    assert len(pre) == 1 and sent == [f"00-{pre[0]['trace_id']}-{pre[0]['span_id']}-01"]


def test_no_traceparent_sends_no_header_but_keeps_the_spans(tmp_path):
    log = tmp_path / "mock.jsonl"
    with MockServer(MockConfig(ttft_ms=5, itl_ms=1), record=str(log)) as m, OtlpSink() as sink:
        p, _ = _run(m.url, tmp_path / "out", "--concurrency", "2", "--requests", "6",
                    "--otlp", sink.url, "--traceparent", "off")
    assert p.returncode == 0, p.stderr
    assert "traceparent" not in log.read_text()
    assert len(sink.requests()) >= 6


def test_a_collector_stopped_mid_run_loses_spans_not_measurements(mock_factory, tmp_path):
    import threading
    m = mock_factory(ttft_ms=10, itl_ms=2)

    def attempt(i: int) -> int:
        sink = OtlpSink().__enter__()

        def stop_after_first_spans() -> None:
            deadline = time.monotonic() + 60
            while not sink.requests() and time.monotonic() < deadline:
                time.sleep(0.05)
            sink.stop()
        threading.Thread(target=stop_after_first_spans, daemon=True).start()
        out = tmp_path / f"out{i}"
        p, _ = _run(m.url, out, "--concurrency", "4", "--duration", "6s", "--otlp", sink.url)
        sink.stop()
        assert p.returncode == 0, p.stderr
        d = only_run(out)
        recs = load_records(d / "requests.jsonl")
        summary = json.loads((d / "run.json").read_text())["summary"]
        assert summary["completed"] == sum(1 for r in recs if r.ok and not r.warmup) > 0
        lines = _otlp_lines(p.stderr)
        assert len(lines) == 1, p.stderr
        if " request spans dropped (" not in lines[0]:
            # the exporter started late (a busy machine) and sent every span in the one batch
            # the sink took before it stopped: nothing was lost, and the line says so
            assert lines[0].startswith(f"OTLP: {len(recs)} request spans sent"), p.stderr
            assert len(sink.requests()) == len(recs)
            return 0
        dropped = int(lines[0].split("OTLP: ")[1].split(" of ")[0])
        assert 0 < dropped <= len(recs)
        assert len(sink.requests()) + dropped == len(recs)
        return dropped
    # the stop must come between two batches: on a busy machine, once in a while, it cannot
    assert any(attempt(i) for i in range(3))


def test_a_bad_otlp_url_is_one_line_and_never_stalls_the_load(mock_factory, tmp_path):
    from llmbench.servers.ports import free_port
    m = mock_factory(ttft_ms=5, itl_ms=1)
    base, base_s = _run(m.url, tmp_path / "base", "--concurrency", "2", "--duration", "2s")
    assert base.returncode == 0, base.stderr
    with OtlpSink("html") as html, OtlpSink("drip") as drip:
        for name, url in (("refused", f"http://127.0.0.1:{free_port()}"),
                          ("html", html.url), ("drip", drip.url)):
            p, took = _run(m.url, tmp_path / name, "--concurrency", "2", "--duration", "2s",
                           "--otlp", url)
            assert p.returncode == 0, (name, p.stderr)
            lines = _otlp_lines(p.stderr)
            assert len(lines) == 1 and "dropped" in lines[0], (name, p.stderr)
            assert "Traceback" not in p.stderr
            # the end waits for the collector 5 s at most (report.otlp.CLOSE_WAIT_S)
            assert took < base_s + 5 + 10, (name, took, base_s)
            recs = load_records(only_run(tmp_path / name) / "requests.jsonl")
            assert recs and all(r.ok for r in recs)
    bad = llmbench("run", "--url", m.url + "/v1", *ARGS, "--requests", "1",
                   "--otlp", "ftp://x", "--out", str(tmp_path / "bad"))
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "--otlp" in bad.stderr
