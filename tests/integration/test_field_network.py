"""Right in the field (issue 24, items 2-5): forward proxies, TLS options, URLs as gateways
need them, and one response policy for both transports.

Against real components (tests/helpers/field.py: nginx terminating TLS and requiring client
certificates, tinyproxy, a test CA made with openssl), a standard-library forward proxy that
knows a made-up host name (tests/helpers/forward_proxy.py: a request that reaches the server through
it proves the proxy was used) and loopback servers that misbehave (conftest.RawServer). Every
client-level test runs on both transports (the ``transport`` fixture).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from pathlib import Path

import pytest

from tests.helpers import CHAT_ROLE, RawServer, chat_token, chunk, run
from tests.helpers.field import Cert, Nginx, TestCA, Tinyproxy
from tests.helpers.forward_proxy import ForwardProxy
from tests.helpers import llmbench, only_run

from llmbench.client import netconfig
from llmbench.client.request import Client, RequestParams, Timeouts
from llmbench.servers.discover import served_models
from llmbench.client.netconfig import NetError, NetOptions, no_proxy_matches, resolve
from llmbench.servers.scrape import ServerProbe
from llmbench.records.record import Record
from llmbench.results.folder import scrub_argv
from llmbench.client.target import TargetError, make_target
from llmbench.workload.server_tokenizer import detect

HOST = "model.llmbench-test"          # resolves nowhere: only the test proxy knows it
DONE = b"data: [DONE]\n\n"
HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n")
STREAM = [(0, HEAD), (0, chunk(CHAT_ROLE + chat_token("a"))), (0, chunk(chat_token("b") + DONE)),
          (0, b"0\r\n\r\n")]
NO_PROXY_ENV = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                "ALL_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No proxy or CA bundle from the machine's environment; no options from an earlier test."""
    for v in (*NO_PROXY_ENV, "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(v, raising=False)
    netconfig.configure(None)
    yield
    netconfig.configure(None)


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def server_cert(ca) -> Cert:
    return ca.issue("server")


@pytest.fixture(scope="module")
def named_cert(ca) -> Cert:
    """A server certificate for the made-up host name (TestCA.issue covers 127.0.0.1 only)."""
    key, csr, crt, ext = (ca.dir / f"named.{s}" for s in ("key", "csr", "pem", "ext"))
    ca._run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={HOST}", "-keyout", str(key),
            "-out", str(csr))
    ext.write_text(f"subjectAltName=DNS:{HOST}\nextendedKeyUsage=serverAuth\n")
    ca._run("x509", "-req", "-in", str(csr), "-CA", str(ca.bundle), "-CAkey", str(ca._ca_key),
            "-CAcreateserial", "-days", "2", "-out", str(crt), "-extfile", str(ext))
    return Cert(crt, key)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def _send(url: str, net: NetOptions | None = None, stream: bool = True, **kw):
    target = make_target(url, "mock", net=net, **kw)
    t = Timeouts(connect_s=10, first_token_s=10, idle_s=10, total_s=30)
    async with Client(target, RequestParams(stream=stream), t) as c:
        rec = Record("t-1", scheduled=time.perf_counter())
        text = await c.send([{"role": "user", "content": "hello"}], 4, rec)
        return rec, text


def send(url: str, net: NetOptions | None = None, **kw) -> tuple[Record, str]:
    return run(_send(url, net, **kw))


def files_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


# -- 2. forward proxies ---------------------------------------------------------------------------

def test_an_environment_proxy_reaches_a_host_only_it_knows(transport, mock_factory, monkeypatch):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with ForwardProxy({HOST: port_of(m.url)}) as fp:
        monkeypatch.setenv("HTTP_PROXY", fp.url)
        rec, text = send(f"http://{HOST}/v1")
    assert rec.ok and text, rec.error
    assert f"POST http://{HOST}/v1/chat/completions" in fp.log      # absolute form


def test_https_goes_through_a_connect_tunnel_with_tls_to_the_target(
        transport, mock_factory, monkeypatch, ca, named_cert, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with Nginx(tmp_path / "ng", port_of(m.url), tls=named_cert, buffering=False) as ng, \
            ForwardProxy({HOST: ng.port}) as fp:
        monkeypatch.setenv("https_proxy", fp.url)
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")   # the other scheme's: unused
        rec, text = send(f"https://{HOST}/v1", NetOptions(ca_cert=str(ca.bundle)))
    assert rec.ok and text, rec.error
    assert fp.log and all(line == f"CONNECT {HOST}:443" for line in fp.log), fp.log


def test_proxy_credentials_are_sent_and_never_shown(transport, mock_factory, ca, named_cert,
                                                     tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with Nginx(tmp_path / "ng", port_of(m.url), tls=named_cert, buffering=False) as ng, \
            ForwardProxy({HOST: port_of(m.url), f"tls.{HOST}": ng.port},
                         auth=("bench", "s3cret-Pr0xy")) as fp:
        good = f"http://bench:s3cret-Pr0xy@127.0.0.1:{fp.port}"
        rec, _ = send(f"http://{HOST}/v1", NetOptions(proxy=good))
        assert rec.ok, rec.error
        rec, _ = send(f"https://tls.{HOST}/v1", NetOptions(proxy=good, insecure=True))
        assert rec.ok, rec.error
        rec, _ = send(f"http://{HOST}/v1", NetOptions(proxy=fp.url))       # none given
        assert rec.status == 407 and rec.error_kind == "http_status"
        rec, _ = send(f"https://tls.{HOST}/v1", NetOptions(proxy=fp.url, insecure=True))
        assert rec.error_kind == "connect" and "407" in rec.error, rec.error
    assert fp.auth_seen.count("Basic YmVuY2g6czNjcmV0LVByMHh5") == 2
    target = make_target(f"http://{HOST}/v1", "m", net=NetOptions(proxy=good))
    assert "s3cret-Pr0xy" in target.secrets()
    assert "s3cret" not in json.dumps(target.describe()) and "s3cret" not in repr(target)
    assert target.describe()["proxy"] == fp.url


def test_tinyproxy_forwards_plain_and_tunnels_tls(transport, mock_factory, ca, server_cert,
                                                  tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with Tinyproxy(tmp_path / "tp") as tp, \
            Nginx(tmp_path / "ng", port_of(m.url), tls=server_cert, buffering=False) as ng:
        rec, text = send(m.url + "/v1", NetOptions(proxy=tp.url))
        assert rec.ok and text, rec.error
        rec, text = send(ng.url + "/v1", NetOptions(proxy=tp.url, ca_cert=str(ca.bundle)))
        assert rec.ok and text, rec.error
        log = tp.text()
    assert f"POST {m.url}/v1/chat/completions" in log
    assert f"CONNECT 127.0.0.1:{ng.port}" in log


def test_tinyproxy_with_basic_auth_end_to_end_and_run_json_names_the_proxy(
        transport, mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with Tinyproxy(tmp_path / "tp", auth=("bench", "Tiny-Pa55word")) as tp:
        proxy = f"http://bench:Tiny-Pa55word@127.0.0.1:{tp.port}"
        r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "3",
                     "--proxy", proxy, "--out", str(tmp_path / "out"), "--no-progress")
        assert r.returncode == 0, r.stderr
        assert tp.text().count(f"POST {m.url}/v1/chat/completions") >= 3
        bad = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "1",
                       "--proxy", f"http://bench:wrong-Pa55word@127.0.0.1:{tp.port}",
                       "--out", str(tmp_path / "bad"), "--no-progress")
        none = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "1",
                        "--proxy", tp.url, "--out", str(tmp_path / "none"), "--no-progress")
    folder = only_run(tmp_path / "out")
    doc = json.loads((folder / "run.json").read_text())
    assert doc["config"]["target"]["proxy"] == tp.url
    assert doc["config"]["target"]["proxy_from"] == "--proxy"
    # tinyproxy answers wrong credentials with 401, none with 407
    assert bad.returncode != 0 and "check the proxy's credentials" in bad.stderr, bad.stderr
    assert none.returncode != 0 and "answered 407 (the proxy wants credentials" in none.stderr
    for text in (files_text(folder), r.stdout, r.stderr, files_text(tmp_path / "bad"),
                 bad.stdout, bad.stderr):
        assert "Pa55word" not in text


def test_probes_go_the_way_requests_go(mock_factory, monkeypatch):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with ForwardProxy({HOST: port_of(m.url)}) as fp:
        monkeypatch.setenv("HTTP_PROXY", fp.url)
        target = make_target(f"http://{HOST}/v1?api-version=7", "?")
        assert served_models(target) == ["mock"]                      # /v1/models
        probe = ServerProbe(target.server_root, "auto")               # /metrics
        stop = asyncio.Event()
        stop.set()
        run(probe.run(stop))
        tok = detect(target.server_root, "mock", net=target.net)     # /tokenize
        assert tok.count("hello there") > 0
    assert f"GET http://{HOST}/v1/models?api-version=7" in fp.log
    assert probe.kind == "mock" and f"GET http://{HOST}/metrics" in fp.log
    assert f"POST http://{HOST}/tokenize" in fp.log


def test_probes_tunnel_to_https(mock_factory, monkeypatch, ca, named_cert, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with Nginx(tmp_path / "ng", port_of(m.url), tls=named_cert, buffering=False) as ng, \
            ForwardProxy({HOST: ng.port}) as fp:
        monkeypatch.setenv("HTTPS_PROXY", fp.url)
        netconfig.configure(NetOptions(ca_cert=str(ca.bundle)))      # as the CLI does
        target = make_target(f"https://{HOST}/v1", "?")
        assert served_models(target) == ["mock"]
        probe = ServerProbe(target.server_root, "auto")
        stop = asyncio.Event()
        stop.set()
        run(probe.run(stop))
        assert detect(target.server_root, "mock").count("hello there") > 0
    assert probe.kind == "mock", probe.note
    assert len(fp.log) >= 3 and set(fp.log) == {f"CONNECT {HOST}:443"}


def test_cannot_reach_names_the_proxy_used_or_bypassed(transport, tmp_path, monkeypatch):
    from llmbench.servers.ports import free_port
    closed = free_port()
    with ForwardProxy({}) as fp:
        r = llmbench("run", "--url", f"https://nothere.{HOST}/v1", "--model", "m",
                     "--requests", "1", "--proxy", fp.url, "--out", str(tmp_path / "a"))
        assert r.returncode == 3, r.stderr
        assert f"through the proxy {fp.url} (from --proxy)" in r.stderr
        assert "can the proxy reach it" in r.stderr
        r = llmbench("run", "--url", f"http://127.0.0.1:{closed}/v1", "--model", "m",
                     "--requests", "1", "--out", str(tmp_path / "b"),
                     env={"HTTP_PROXY": fp.url, "NO_PROXY": "localhost,127.0.0.0/8"})
        assert r.returncode == 3, r.stderr
        assert "not through the proxy in HTTP_PROXY (NO_PROXY matches 127.0.0.1)" in r.stderr
        assert "take it out of NO_PROXY or pass --proxy URL" in r.stderr
        assert fp.log == [f"CONNECT nothere.{HOST}:443"]
    assert len(r.stderr.strip().splitlines()) == 1


def test_proxy_settings_are_resolved_like_curl():
    env = {"https_proxy": "proxy.corp:3128", "HTTPS_PROXY": "http://other:1",
           "HTTP_PROXY": "http://plain:8080", "NO_PROXY": ".internal.corp, 10.0.0.0/8, h:8443"}
    n = resolve("https://api.example.com/v1", env=env)
    assert (n.proxy, n.proxy_from) == ("http://proxy.corp:3128", "https_proxy")
    assert resolve("http://api.example.com/v1", env=env).proxy == "http://plain:8080"
    assert resolve("https://gpu.internal.corp/v1", env=env).proxy is None
    assert "NO_PROXY matches" in resolve("https://10.1.2.3/v1", env=env).bypassed
    assert resolve("https://h:8443/v1", env=env).proxy is None
    assert resolve("https://h:9443/v1", env=env).proxy is not None
    assert resolve("https://127.0.0.1:8000", env=env).bypassed.endswith("is this machine)")
    assert resolve("https://api.example.com", NetOptions(proxy="none"), env=env).proxy is None
    assert resolve("http://127.0.0.1", NetOptions(proxy="http://u:p@px:3"), env=env).proxy \
        == "http://u:p@px:3"
    assert resolve("http://x.y", env={"ALL_PROXY": "http://all:1"}).proxy == "http://all:1"
    cgi = {"HTTP_PROXY": "http://evil:1", "REQUEST_METHOD": "GET"}
    assert resolve("http://x.y", env=cgi).proxy is None                 # httpoxy
    assert no_proxy_matches("a.b.example", 443, "*.example")
    assert no_proxy_matches("::1", 80, "[::1]:80") and not no_proxy_matches("x", 1, "")
    with pytest.raises(NetError, match="socks5.*http://"):
        resolve("https://api.example.com", env={"ALL_PROXY": "socks5://s:1080"})
    with pytest.raises(NetError) as e:
        NetOptions(proxy="https://user:hidden-pw@p:1").validate()
    assert "hidden-pw" not in str(e.value)


# -- 3. TLS options ---------------------------------------------------------------------------------

@pytest.fixture
def tls_nginx(mock_factory, server_cert, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with Nginx(tmp_path / "ng", port_of(m.url), tls=server_cert, buffering=False) as ng:
        yield ng


def test_ca_cert_insecure_and_the_environment_bundles(transport, tls_nginx, ca, monkeypatch):
    url = tls_nginx.url + "/v1"
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    rec, _ = send(url)
    assert rec.error_kind == "connect" and "certificate verify failed" in rec.error.lower()
    assert netconfig.certificate_problem(rec.error).startswith("the server's TLS certificate")
    assert send(url, NetOptions(ca_cert=str(ca.bundle)))[0].ok
    assert send(url, NetOptions(insecure=True))[0].ok
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca.bundle))
    assert send(url)[0].ok
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.bundle))
    assert send(url)[0].ok


def test_mutual_tls_with_a_client_certificate(transport, mock_factory, ca, server_cert, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    client = ca.issue("client", server=False)
    with Nginx(tmp_path / "ng", port_of(m.url), tls=server_cert, client_ca=ca.bundle,
               buffering=False) as ng:
        rec, _ = send(ng.url + "/v1", NetOptions(ca_cert=str(ca.bundle)))
        assert rec.status == 400 and "certificate" in rec.error.lower()
        assert "--cert FILE --key FILE" in netconfig.certificate_problem(rec.error)
        rec, text = send(ng.url + "/v1", NetOptions(ca_cert=str(ca.bundle),
                                                    cert=str(client.cert), key=str(client.key)))
    assert rec.ok and text, rec.error


def test_tls_on_the_command_line(transport, tls_nginx, ca, tmp_path):
    url = tls_nginx.url + "/v1"
    r = llmbench("run", "--url", url, "--model", "mock", "--requests", "1",
                 "--out", str(tmp_path / "a"), env={"SSL_CERT_FILE": ""})
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "TLS certificate was not accepted" in r.stderr and "--ca-cert FILE" in r.stderr
    assert "Is the server running" not in r.stderr
    r = llmbench("run", "--url", url, "--requests", "1", "--out", str(tmp_path / "a2"),
                 env={"SSL_CERT_FILE": ""})                          # asks /v1/models first
    assert r.returncode == 3 and "TLS certificate was not accepted" in r.stderr, r.stderr
    r = llmbench("run", "--url", url, "--model", "mock", "--requests", "2", "--insecure",
                 "--out", str(tmp_path / "b"), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "warning: --insecure" in r.stderr
    doc = json.loads((only_run(tmp_path / "b") / "run.json").read_text())
    assert doc["config"]["target"]["tls_verify"] is False
    r = llmbench("run", "--url", url, "--requests", "2", "--ca-cert", str(ca.bundle),
                 "--out", str(tmp_path / "c"), "--no-progress")     # /v1/models too
    assert r.returncode == 0, r.stderr
    doc = json.loads((only_run(tmp_path / "c") / "run.json").read_text())
    assert doc["config"]["target"]["tls_verify"] is True
    assert doc["config"]["target"]["ca_cert"] == str(ca.bundle)


def test_mutual_tls_on_the_command_line(transport, mock_factory, ca, server_cert, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    client = ca.issue("client", server=False)
    with Nginx(tmp_path / "ng", port_of(m.url), tls=server_cert, client_ca=ca.bundle,
               buffering=False) as ng, Tinyproxy(tmp_path / "tp") as tp:
        base = ("run", "--url", ng.url + "/v1", "--model", "mock", "--requests", "2",
                "--ca-cert", str(ca.bundle), "--no-progress")
        r = llmbench(*base, "--out", str(tmp_path / "a"))
        assert r.returncode != 0 and "--cert FILE --key FILE" in r.stderr, r.stderr
        # through a CONNECT tunnel on the CLI's event loop (uvloop when installed)
        r = llmbench(*base, "--cert", str(client.cert), "--key", str(client.key),
                     "--proxy", tp.url, "--out", str(tmp_path / "b"))
        assert r.returncode == 0, r.stderr
        assert f"CONNECT 127.0.0.1:{ng.port}" in tp.text()
    doc = json.loads((only_run(tmp_path / "b") / "run.json").read_text())
    assert doc["config"]["target"]["client_cert"] == str(client.cert)


@pytest.mark.parametrize("args, words", [
    (("--ca-cert", "{missing}"), "--ca-cert"),
    (("--ca-cert", "{notpem}"), "not a PEM certificate bundle"),
    (("--cert", "{notpem}"), "--cert"),
    (("--key", "{notpem}"), "goes with --cert"),
    (("--proxy", "socks5://127.0.0.1:1080"), "plain http://"),
    (("--endpoint", "chat/completions"), "--endpoint"),
    (("--redact", "ab"), "--redact"),
])
def test_bad_network_options_are_one_line(tmp_path, args, words):
    notpem = tmp_path / "x.pem"
    notpem.write_text("not a certificate\n")
    args = tuple(a.format(missing=tmp_path / "none.pem", notpem=notpem) for a in args)
    r = llmbench("run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--requests", "1",
                 *args, "--out", str(tmp_path / "o"))
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


# -- 4. URLs as gateways need them ------------------------------------------------------------

def test_the_query_stays_on_every_request_and_endpoint_replaces_the_path(transport):
    with RawServer(STREAM) as s:
        rec, _ = send(s.url + "/openai/deployments/gpt?api-version=2024-02-01")
        assert rec.ok, rec.error
        rec, _ = send(s.url + "/v1?api-version=2024-02-01&key=abc",
                      endpoint="/openai/deployments/gpt/chat/completions")
        assert rec.ok, rec.error
        rec, _ = send(s.url + "/v1?x=1", endpoint="/v1/completions")
    first = [r.split(b"\r\n", 1)[0] for r in s.requests]
    assert first == [
        b"POST /openai/deployments/gpt/chat/completions?api-version=2024-02-01 HTTP/1.1",
        b"POST /openai/deployments/gpt/chat/completions?api-version=2024-02-01&key=abc HTTP/1.1",
        b"POST /v1/completions?x=1 HTTP/1.1"]
    assert b'"prompt"' in s.requests[2]            # --endpoint named its format
    assert make_target("http://h/v1", "m", endpoint="/v1/completions").api == "openai"


def test_secrets_in_the_query_are_never_written_or_printed(transport, mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    url = m.url + "/v1?key=SEKRET-key-123&api-version=2024-02-01&deployment=gpt-private"
    r = llmbench("run", "--url", url, "--model", "mock", "--requests", "2", "--redact",
                 "deployment", "--out", str(tmp_path / "ok"), "--no-progress")
    assert r.returncode == 0, r.stderr
    folder = only_run(tmp_path / "ok")
    doc = json.loads((folder / "run.json").read_text())
    assert doc["config"]["target"]["url"] == \
        m.url + "/v1?key=***&api-version=2024-02-01&deployment=***"
    assert (folder / "report.html").exists()
    # a server that echoes the URL in its error body
    body = b'{"error": "no such deployment gpt-private for key SEKRET-key-123"}'
    script = [(0, b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
                  b"content-length: %d\r\n\r\n%s" % (len(body), body))]
    with RawServer(script) as s:
        bad = llmbench("run", "--url", s.url + url[len(m.url):], "--model", "mock",
                       "--requests", "1", "--redact", "deployment",
                       "--out", str(tmp_path / "bad"))
    assert bad.returncode != 0 and "answered 401" in bad.stderr, bad.stderr
    for text in (files_text(tmp_path / "ok"), r.stdout, r.stderr,
                 files_text(tmp_path / "bad"), bad.stdout, bad.stderr):
        assert "SEKRET" not in text and "gpt-private" not in text


def test_scrub_argv_hides_query_secrets_proxy_credentials_and_redact_texts():
    argv = ["run", "--url", "https://u:pw@h/v1?api-version=1&api_key=K1&sig=abc&deployment=d",
            "--proxy", "user:proxy-pw@proxy:3128", "--redact", "deployment",
            "--redact=path-SECRET", "--header", "api-key: azure-key",
            "--out", "results/path-SECRET"]
    out = scrub_argv(argv)
    assert out == ["run", "--url", "https://h/v1?api-version=1&api_key=***&sig=***&deployment=***",
                   "--proxy", "proxy:3128", "--redact", "deployment", "--redact=***",
                   "--header", "api-key: ***", "--out", "results/***"]


def test_a_redact_text_that_names_no_parameter_is_hidden_everywhere():
    t = make_target("http://h/tenant-0xC0FFEE/v1", "m", redact=["tenant-0xC0FFEE"])
    assert "tenant-0xC0FFEE" not in json.dumps(t.describe())
    assert t.redact("404 for /tenant-0xC0FFEE/v1") == "404 for /***/v1"
    with pytest.raises(TargetError, match="--redact"):
        make_target("http://h/v1", "m", redact=["ab"])


# -- 5. the two transports agree --------------------------------------------------------------

def _redirect(status: str, location: str) -> bytes:
    return (f"HTTP/1.1 {status}\r\nlocation: {location}\r\ncontent-type: text/html\r\n"
            f"content-length: 9\r\n\r\n<a>x</a>\n").encode()


def test_a_same_origin_307_is_followed_once_and_warned_about(transport, capsys):
    def script(i: int) -> list:
        return [(0, _redirect("307 Temporary Redirect", "/v2/chat/completions"))] if i == 0 \
            else STREAM
    with RawServer(script) as s:
        rec, text = send(s.url + "/v1?api-version=1")
    assert rec.ok and text == "ab" and rec.status == 200, rec.error
    assert rec.note == "followed a 307 redirect to /v2/chat/completions"
    assert [r.split(b"\r\n", 1)[0] for r in s.requests] == [
        b"POST /v1/chat/completions?api-version=1 HTTP/1.1",
        b"POST /v2/chat/completions HTTP/1.1"]
    assert s.requests[0].split(b"\r\n\r\n", 1)[1] == s.requests[1].split(b"\r\n\r\n", 1)[1]
    err = capsys.readouterr().err
    assert "warning:" in err and "answered 307" in err and f"--url {s.url}/v2" in err


@pytest.mark.parametrize("status", ["301 Moved Permanently", "302 Found", "303 See Other"])
def test_a_redirect_that_would_turn_post_into_get_is_refused(transport, status):
    with RawServer([(0, _redirect(status, "/v2/chat/completions"))]) as s:
        rec, _ = send(s.url + "/v1")
    assert rec.error_kind == "http_status" and rec.status == int(status[:3])
    assert rec.error == "redirected to /v2/chat/completions (not followed)"
    assert len(s.requests) == 1


def test_a_second_redirect_is_not_followed(transport):
    with RawServer([(0, _redirect("308 Permanent Redirect", "/again"))]) as s:
        rec, _ = send(s.url + "/v1")
    assert rec.error_kind == "http_status" and rec.status == 308
    assert rec.error == "redirected to /again (not followed)" and len(s.requests) == 2


def test_a_head_with_bare_lf_line_ends_is_read(transport):
    head = (b"HTTP/1.1 200 OK\ncontent-type: text/event-stream\nx-llmbench-replica: r-2\n"
            b"transfer-encoding: chunked\n\n")
    with RawServer([(0, head), *STREAM[1:]]) as s:
        rec, text = send(s.url + "/v1")
    assert rec.ok and text == "ab" and rec.served_by == "r-2", rec.error


@pytest.mark.parametrize("size, ok", [(10_240, True), (70_000, False)])
def test_one_head_limit_whether_the_head_comes_in_one_read_or_many(transport, size, ok):
    head = HEAD[:-2] + b"x-big: " + b"a" * size + b"\r\n\r\n"
    with RawServer([(0, head), *STREAM[1:]]) as s:
        rec, _ = send(s.url + "/v1")
    assert rec.ok is ok, rec.error
    if not ok:
        # a head past the limit is not HTTP llmbench reads: a protocol error, on both transports
        assert rec.status is None and rec.error_kind == "protocol"


@pytest.mark.parametrize("encoding, pack", [("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_a_compressed_error_body_is_read_as_text(transport, encoding, pack):
    body = pack(b'{"error": {"message": "the model is overloaded, try later"}}')
    script = [(0, (f"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                   f"content-encoding: {encoding}\r\ncontent-length: {len(body)}\r\n\r\n"
                   ).encode() + body)]
    with RawServer(script) as s:
        rec, _ = send(s.url + "/v1")
    assert rec.status == 503 and "the model is overloaded" in rec.error, rec.error


def test_a_compressed_stream_is_named_and_a_compressed_whole_reply_is_read(transport):
    events = CHAT_ROLE + chat_token("a") + DONE
    packed = gzip.compress(events)
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
            b"content-length: %d\r\n\r\n" % len(packed))
    with RawServer([(0, head + packed)]) as s:
        rec, _ = send(s.url + "/v1")
    assert rec.error_kind == "malformed_event" and "compressed" in rec.error
    assert "content-encoding: gzip" in rec.error and "stream_cut" != rec.error_kind
    whole = gzip.compress(json.dumps({"choices": [{"message": {"content": "hi there"},
                                                   "finish_reason": "stop"}]}).encode())
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
            b"content-length: %d\r\n\r\n" % len(whole))
    with RawServer([(0, head + whole)]) as s:
        rec, text = send(s.url + "/v1", stream=False)
    assert rec.ok and text == "hi there", rec.error
