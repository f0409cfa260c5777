"""Each request's phases (records/phases.py), stamped by both transports over real loopback
HTTP: straight to the mock, and through nginx terminating TLS (tests/helpers/field.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from llmbench.client import netconfig
from llmbench.client.netconfig import NetOptions
from llmbench.records.phases import PHASES, new_connection, phases_ms
from llmbench.records.record import Record
from tests.helpers.field import Nginx, TestCA
from tests.helpers.phases import send_many

SETUP_KEYS = ("conn_us", "dns_us", "connect_us", "tls_us")


def _adds_up(rec: Record) -> dict[str, float]:
    ph = phases_ms(rec)
    assert ph is not None, rec.to_json()
    assert set(ph) <= set(PHASES)
    assert all(v >= 0 for v in ph.values()), ph
    before_token = sum(v for k, v in ph.items() if k != "decode")
    assert abs(before_token - rec.ttft * 1000.0) <= 1.0, (ph, rec.ttft)
    assert abs(before_token + ph["decode"] - rec.e2el * 1000.0) <= 1.0
    return ph


@pytest.mark.usefixtures("transport")
def test_a_new_connection_has_a_connect_phase_and_a_reused_one_none(mock_factory):
    m = mock_factory(ttft_ms=30, itl_ms=2)
    recs = asyncio.run(send_many(m.url + "/v1", 3))
    assert all(r.ok for r in recs)
    first, *rest = recs
    ph = _adds_up(first)
    assert new_connection(first) is True and "connect" in ph
    assert "dns" not in ph and "tls" not in ph     # an IP address, plain http
    for r in rest:
        ph = _adds_up(r)
        assert new_connection(r) is False
        assert not set(ph) & {"blocked", "dns", "connect", "tls"}, ph
        # the mock sends its head at once and its first token ttft_ms later
        assert ph["wait"] + ph["first_token"] >= 30 * 0.9 and ph["wait"] < ph["first_token"]


@pytest.mark.usefixtures("transport")
def test_a_host_name_is_resolved_as_a_phase(mock_factory):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    url = m.url.replace("127.0.0.1", "localhost") + "/v1"
    first = asyncio.run(send_many(url, 1))[0]
    assert first.ok, first.error
    ph = _adds_up(first)
    assert "dns" in ph and "connect" in ph


def test_through_nginx_with_tls_a_new_connection_shows_its_handshake(
        transport, mock_factory, tmp_path):
    ca = TestCA(tmp_path / "ca")
    cert = ca.issue("server")
    m = mock_factory(ttft_ms=20, itl_ms=1)
    port = int(m.url.rsplit(":", 1)[1])
    netconfig.configure(None)
    with Nginx(tmp_path / "ng", port, tls=cert, buffering=False) as ng:
        recs = asyncio.run(send_many(ng.url + "/v1", 3, NetOptions(ca_cert=str(ca.bundle))))
    assert all(r.ok for r in recs), [r.error for r in recs]
    first, *rest = recs
    ph = _adds_up(first)
    if transport == "fast":
        assert ph["tls"] > 0 and ph["connect"] >= 0, ph
        # a TLS handshake on loopback costs more than the TCP connection's one round trip
        assert ph["tls"] > ph["connect"]
    else:                               # aiohttp has no hook between TCP and TLS
        assert "tls" not in ph and ph["connect"] > 0
    for r in rest:
        ph = _adds_up(r)
        assert not set(ph) & {"blocked", "dns", "connect", "tls"}, ph


def test_phase_fields_are_optional_on_disk():
    old = {"request_id": "a", "scheduled": 1.0, "start": 1.0, "first_token": 1.1, "end": 1.2,
           "done": 1.2, "ok": True, "status": 200, "output_tokens": 2,
           "token_us": [100000, 200000]}
    rec = Record.from_json(old)
    assert phases_ms(rec) is None and new_connection(rec) is None
    assert not set(rec.to_json()) & {*SETUP_KEYS, "first_byte_us"}
    new = Record.from_json({**old, "sent": 1.001, "conn_us": 0, "connect_us": 500,
                            "first_byte_us": 3000})
    back = Record.from_json(json.loads(json.dumps(new.to_json())))
    assert phases_ms(back) == {"blocked": 0.0, "connect": 0.5, "send": 0.5, "wait": 2.0,
                               "first_token": 97.0, "decode": 100.0}
    assert not any(k in back.to_json() for k in ("dns_us", "tls_us"))


def test_a_run_keeps_its_phases_in_run_json_the_export_and_the_report(tmp_path, transport):
    import csv
    import io

    from llmbench import run as api_run
    from llmbench.mock_server import MockConfig, MockServer
    from llmbench.report import export, html
    from tests.helpers import only_run

    with MockServer(MockConfig(ttft_ms=20, itl_ms=2, models=["m"], seed=3)) as m:
        api_run(url=m.url + "/v1", model="m", concurrency=3, requests=18,
                prompt_tokens=10, output_tokens=6, out=tmp_path)
    d = only_run(tmp_path)
    summary = json.loads((d / "run.json").read_text())["summary"]
    ph = summary["phases_ms"]
    assert ph["first_token"]["count"] == summary["completed"] == 18
    assert ph["first_token"]["p50"] >= 20 * 0.9
    # the pool was opened before the load (preconnect) or by the first requests: few new
    # connections, at most one per user
    assert ph["new_connections"] <= 3
    buf = io.StringIO()
    export.write_csv(export.as_run(d), buf, per_request=True)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert {"connect_ms", "tls_ms", "wait_ms", "first_token_ms", "new_connection"} <= set(rows[0])
    for r in rows:
        total = sum(float(r[f"{p}_ms"]) for p in PHASES[:-1] if r[f"{p}_ms"])
        assert abs(total - float(r["ttft_ms"])) <= 1.0, r
    page = html.render(d)
    assert "Request phases" in page and "TLS handshake" not in page   # plain http: no TLS row
