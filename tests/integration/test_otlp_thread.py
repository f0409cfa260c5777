"""--otlp without a run folder (the API's out=None): the exporter's thread path
(report/otlp.py), over real loopback HTTP to the OTLP receiver and from real records."""

from __future__ import annotations

import asyncio

from llmbench.report.otlp import OtlpExporter
from tests.helpers.otlp_sink import OtlpSink
from tests.helpers.phases import send_many


def test_the_thread_sends_one_span_per_record_with_its_phases(mock_factory, capsys):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    recs = asyncio.run(send_many(m.url + "/v1", 5))
    for i, r in enumerate(recs):
        r.step = i % 2
    with OtlpSink() as sink:
        exp = OtlpExporter(sink.url, "mock", "openai-chat", m.url + "/v1")
        for r in recs:
            exp.observe(r)
        exp.close()
        spans = sink.requests()
        steps = [s for s in sink.spans if s["name"].startswith("llmbench step")]
    assert capsys.readouterr().err.strip() == f"OTLP: 5 request spans sent to {sink.url}/v1/traces"
    assert sorted(s["attributes"]["llmbench.request_id"] for s in spans) == \
        sorted(r.request_id for r in recs)
    assert {s["name"] for s in steps} == {"llmbench step 0", "llmbench step 1"}
    step_ids = {s["span_id"] for s in steps}
    assert all(len(s["links"]) == 1 and s["links"][0][1] in step_ids for s in spans)
    first = next(s for s in spans if s["attributes"]["llmbench.request_id"] == recs[0].request_id)
    assert "connect" in first["events"]         # the request that opened the connection


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
