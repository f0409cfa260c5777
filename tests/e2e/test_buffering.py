"""A proxy that buffers the stream is named, not measured as the model (issue 24, item 1).

A real nginx with its defaults (``proxy_pass`` alone: HTTP/1.0 upstream, ``proxy_buffering
on``) in front of a server that streams as uvicorn answers an HTTP/1.0 request (no length,
closed at the end) hands llmbench each reply in one read: TTFT becomes the whole reply's time
and ITL 0.00 ms. The same nginx with ``proxy_buffering off`` is the control.
"""

import json

from tests.helpers import CHAT_ROLE, RawServer, chat_token
from tests.helpers.field import Nginx
from tests.helpers import llmbench, only_run
from tests.helpers.api import run_exit_code
from llmbench import run as api_run
from llmbench.report import console
from llmbench.results.schema import Summary

TTFT_S, ITL_S, TOKENS = 0.05, 0.01, 30


def chat_upstream(ttft_s: float = TTFT_S) -> RawServer:
    """Chat completions streamed close-delimited: 30 one-word events 10 ms apart after 50 ms;
    anything else (the CLI's GET probes) a 404."""
    server: RawServer

    def script(i: int):
        if not server.requests[i].startswith(b"POST"):
            return [(0, b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")]
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        events = [(ttft_s, head + CHAT_ROLE + chat_token(" w0"))]
        events += [(ITL_S, chat_token(f" w{k}")) for k in range(1, TOKENS)]
        return events + [(0, b"data: [DONE]\n\n")]
    server = RawServer(script)
    return server


def _run(url: str, out, *extra: str):
    r = llmbench("run", "--url", url + "/v1", "--model", "m", "--requests", "8",
                 "--concurrency", "2", "--output-tokens", str(TOKENS), "--prompt-tokens", "10",
                 *extra, "--out", str(out), timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return r, json.loads((only_run(out) / "run.json").read_text())


def _measure(url: str, out) -> dict:
    """The same run as _run, for a test that needs only its folder and numbers: in this process,
    through the API (no console output to read); its run.json."""
    r = api_run(url=url + "/v1", model="m", requests=8, concurrency=2, output_tokens=TOKENS,
                prompt_tokens=10, out=out)
    assert run_exit_code(r) == 0
    return json.loads((only_run(out) / "run.json").read_text())


def test_nginx_defaults_are_named_a_buffer_and_proxy_buffering_off_is_not(transport, tmp_path):
    """What each transport reads through the buffer (its reads are the point): in this process,
    through the API; the command's console wording is the next test's, once."""
    with chat_upstream() as up:
        d = _measure(up.url, tmp_path / "direct")
        with Nginx(tmp_path / "ng-default", up.port) as ng:
            b = _measure(ng.url, tmp_path / "buffered")
        with Nginx(tmp_path / "ng-off", up.port, buffering=False) as ng:
            u = _measure(ng.url, tmp_path / "unbuffered")
    # the runs went over this transport (LLMBENCH_TRANSPORT, read in this process too)
    assert {x["config"]["request"]["transport"] for x in (d, b, u)} == {transport}
    sd, sb, su = d["summary"], b["summary"], u["summary"]
    # what the buffer does to the numbers: the whole reply's time as TTFT, no gaps
    assert sb["median_ttft_ms"] > sd["median_ttft_ms"] + 200, (sb["median_ttft_ms"], sd["median_ttft_ms"])
    assert sb["median_itl_ms"] < 1.0 <= sd["median_itl_ms"]
    # ... and llmbench says so, in what the console prints after a run, and the report
    assert sb["stream_bunching"]["buffered"] is True
    assert sb["stream_bunching"]["bunched"] == sb["stream_bunching"]["requests"] == 8
    said = console.extras(Summary.from_dict(sb))
    assert "WARNING: tokens arrive in bursts" in said
    assert "proxy_buffering off" in said and "X-Accel-Buffering: no" in said
    page = (only_run(tmp_path / "buffered") / "report.html").read_text()
    assert "Tokens arrive in bursts" in page
    # direct and unbuffered: about one event a read, no warning, TTFT near direct's. The bounds
    # hold on a busy machine (a late loop reads two events at once now and then, and adds a few
    # ms), and stay far from what the buffer does (every event in one read, +200 ms and more)
    for s in (sd, su):
        assert s["stream_bunching"]["buffered"] is False and s["stream_bunching"]["bunched"] == 0
        assert s["stream_bunching"]["events_per_read_p50"] <= 1.5
        assert "bursts" not in console.extras(Summary.from_dict(s))
    assert abs(su["median_ttft_ms"] - sd["median_ttft_ms"]) < 25.0, (su, sd)


def test_the_run_command_warns_of_the_buffer(tmp_path):
    """`llmbench run` through nginx's defaults prints the warning and what to change (the
    command's own output, once: the transports' reads are the test above's)."""
    with chat_upstream() as up, Nginx(tmp_path / "ng-default", up.port) as ng:
        buffered, b = _run(ng.url, tmp_path / "buffered")
    assert b["summary"]["stream_bunching"]["buffered"] is True
    assert "WARNING: tokens arrive in bursts" in buffered.stdout
    assert "proxy_buffering off" in buffered.stdout and "X-Accel-Buffering: no" in buffered.stdout


def test_a_ramp_through_a_buffer_names_the_buffer_not_queuing(tmp_path):
    with chat_upstream() as up, Nginx(tmp_path / "ng", up.port) as ng:
        r = llmbench("ramp", "--url", ng.url + "/v1", "--model", "m", "--users", "1,2",
                     "--ramp-in", "0.2s", "--hold", "2s", "--think", "0", "--turns", "1",
                     "--prompt-tokens", "10", "--output-tokens", str(TOKENS),
                     "--threshold", "ttft.p95<=150ms", "--generator-lag-limit", "2000ms",
                     "--out", str(tmp_path / "out"), timeout=180)
    run = json.loads((only_run(tmp_path / "out") / "run.json").read_text())
    v = run["verdict"]
    assert v["kind"] == "buffered", v
    assert r.returncode == 4, r.stdout + r.stderr          # the numbers are not the server's
    assert "Why: a proxy buffered the stream" in r.stdout
    assert "Why: requests were queuing" not in r.stdout and "Serve more requests" not in r.stdout
    assert "proxy_buffering off" in r.stdout


def test_compare_does_not_gate_on_the_latencies_of_a_buffered_run(tmp_path):
    with chat_upstream() as up:
        _measure(up.url, tmp_path / "direct")
        with Nginx(tmp_path / "ng", up.port) as ng:
            _measure(ng.url, tmp_path / "buffered")
    a, b = only_run(tmp_path / "direct"), only_run(tmp_path / "buffered")
    r = llmbench("compare", str(a), str(b), "--metric", "ttft.p95", "--max-regression", "10%",
                 "--html", str(tmp_path / "c.html"))
    assert r.returncode == 0, r.stdout + r.stderr          # +500 % TTFT, but it is the buffer's
    assert "a proxy buffered the stream" in r.stdout + r.stderr
    # the same change from a server that is really that slow is a regression
    with chat_upstream(ttft_s=0.35) as slow:
        _measure(slow.url, tmp_path / "slow")
    r = llmbench("compare", str(a), str(only_run(tmp_path / "slow")), "--metric", "ttft.p95",
                 "--max-regression", "10%", "--html", str(tmp_path / "c2.html"))
    assert r.returncode == 1, r.stdout + r.stderr
