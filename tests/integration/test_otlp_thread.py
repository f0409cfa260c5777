"""--otlp without a run folder (the API's out=None): the exporter's thread path
(report/otlp.py), over real loopback HTTP to the OTLP receiver and from real records."""

from __future__ import annotations

import asyncio

from llmbench.report.otlp import OtlpExporter
from tests.helpers.otlp_sink import OtlpSink
from tests.helpers.phases import send_many


def test_the_thread_sends_one_span_per_record_with_its_phases(mock_factory, capsys):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    pre, *recs = asyncio.run(send_many(m.url + "/v1", 6))
    for i, r in enumerate(recs):
        r.step = i % 2
    with OtlpSink() as sink:
        exp = OtlpExporter(sink.url, "mock", "openai-chat", m.url + "/v1")
        exp.preflight(pre)              # the harness hands it over before the load
        for r in recs:
            exp.observe(r)
        exp.close()
        spans, marked = sink.requests(), sink.preflights()
        steps = [s for s in sink.spans if s["name"].startswith("llmbench step")]
    # the closing line counts the load's requests; the preflight's span is sent beside them
    assert capsys.readouterr().err.strip() == f"OTLP: 5 request spans sent to {sink.url}/v1/traces"
    assert [s["attributes"]["llmbench.request_id"] for s in marked] == [pre.request_id]
    assert sorted(s["attributes"]["llmbench.request_id"] for s in spans) == \
        sorted(r.request_id for r in recs)
    assert {s["name"] for s in steps} == {"llmbench step 0", "llmbench step 1"}
    step_ids = {s["span_id"] for s in steps}
    assert all(len(s["links"]) == 1 and s["links"][0][1] in step_ids for s in spans)
    assert "connect" in marked[0]["events"]      # the request that opened the connection
    assert not any("connect" in s["events"] for s in spans)     # the others reused it


def test_a_collector_that_is_down_drops_with_one_line(capsys):
    from llmbench.records.record import Record
    from llmbench.servers.ports import free_port
    exp = OtlpExporter(f"http://127.0.0.1:{free_port()}", "mock", "openai-chat",
                       "http://127.0.0.1:1/v1")
    for i in range(3):
        exp.observe(Record(f"r-{i}", scheduled=1.0, start=1.0, done=1.1, ok=True, status=200))
    exp.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("OTLP: 3 of 3 request spans dropped ("), err
