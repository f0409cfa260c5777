"""Routers that do not name their backends (issue 40 section 3), against a scripted loopback
router shaped like NOMYO Router v0.7: it forwards to its backends round-robin, names none of
them in its replies, keeps ``usage_counts`` per backend (requests it sent on and that have not
finished: running or queued there) at /api/usage, lists its models at /v1/models, and answers a
model none of its backends serves with a bare HTTP 500 (NOMYO's RuntimeError). Also: a named
--server-probe that finds nothing says so; a /tokenize that stalls now and then costs only
the prompts it could not count."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiohttp import web

import llmbench
from llmbench.errors import LlmbenchError
from tests.helpers.api import probe as probe_api, run_json

HIDDEN = ("x-llmbench-replica", "x-llmbench-worker", "x-llmbench-queue-ms")


class NomyoLike:
    """NOMYO Router's behaviour that llmbench reads, on loopback, in a thread."""

    def __init__(self, backends: list[str], models: tuple[str, ...] = ("mock",)) -> None:
        self.backends, self.models = backends, models
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._rr = itertools.cycle(backends)
        self.url = ""

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        model = json.loads(body).get("model")
        if model not in self.models:
            # choose_endpoint raised RuntimeError: FastAPI's bare 500
            return web.Response(status=500, text="Internal Server Error")
        ep = next(self._rr)
        self.usage[ep][model] += 1
        try:
            async with self._session.post(ep + request.path, data=body,
                                          headers={"content-type": "application/json"}) as up:
                resp = web.StreamResponse(status=up.status, headers={
                    "content-type": up.headers.get("content-type", "text/event-stream")})
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                return resp
        finally:
            self.usage[ep][model] -= 1

    async def usage_page(self, request: web.Request) -> web.Response:
        return web.json_response({"usage_counts": {k: dict(v) for k, v in self.usage.items()},
                                  "token_usage_counts": {}})

    async def list_models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": m, "name": m} for m in self.models]})

    def __enter__(self) -> "NomyoLike":
        ready = threading.Event()

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)

            async def start() -> None:
                import aiohttp
                self._session = aiohttp.ClientSession()
                app = web.Application()
                app.router.add_post("/v1/chat/completions", self.chat)
                app.router.add_get("/api/usage", self.usage_page)
                app.router.add_get("/v1/models", self.list_models)
                self._runner = web.AppRunner(app)
                await self._runner.setup()
                site = web.TCPSite(self._runner, "127.0.0.1", 0)
                await site.start()
                port = site._server.sockets[0].getsockname()[1]       # type: ignore[union-attr]
                self.url = f"http://127.0.0.1:{port}"
                ready.set()
            self._loop.run_until_complete(start())
            self._loop.run_forever()
        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        assert ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            await self._session.close()
            await self._runner.cleanup()
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def test_a_wrong_model_through_the_router_names_the_served_models(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with NomyoLike([m.url], models=("gemma-3-270m", "qwen2.5:0.5b")) as router:
        with pytest.raises(LlmbenchError) as err:
            llmbench.run(url=router.url + "/v1", model="gemma3", requests=2, out=tmp_path,
                         server_probe="off", tokenizer="approx", progress=False)
    text = str(err.value)
    assert "answered 500" in text
    assert "the server serves: gemma-3-270m, qwen2.5:0.5b; pass --model gemma-3-270m" in text
    # through the probe: the router says what it serves, and that the asked one is not there
    with NomyoLike([m.url], models=("gemma-3-270m",)) as router:
        with pytest.raises(LlmbenchError) as err:
            probe_api(router.url + "/v1", m.url + "/v1", tmp_path, model="gemma3",
                      direct_model="mock", users="1", server_probe="off", tokenizer="approx")
    assert "the router serves: gemma-3-270m; --model 'gemma3' is not among them" in str(err.value)


def test_probe_behind_a_router_that_names_no_backend(mock_factory, tmp_path):
    # two backends behind the router, one of them also the --direct path
    a = mock_factory(ttft_ms=40, itl_ms=2, tokens=6, parallel=1)
    b = mock_factory(ttft_ms=40, itl_ms=2, tokens=6, parallel=1)
    with NomyoLike([a.url, b.url]) as router:
        run = probe_api(router.url + "/v1", a.url + "/v1", tmp_path, users="2", turns=1,
                        rounds=2, slice_s="1s", tokenizer="approx")
    doc = run_json(run)
    out = doc["backends_unidentified"]               # printed by the probe as it is
    assert doc["backends"] is None                 # no reply named its backend
    counters = doc["router_counters"]["backends"]
    assert set(counters) == {a.url, b.url}
    assert all(0.2 < v["share"] < 0.8 for v in counters.values())
    # said instead of a spread nobody measured, with what it means for the overhead
    assert "No reply named the backend that served it" in out
    assert "2 backends" in out and "mixes the router's own cost with the difference in capacity" in out
    # the router's counters are its in-flight count, never "running"
    samples = [json.loads(line) for line in
               (run.path / "router_server.jsonl").read_text().splitlines()]
    assert samples and all("running" not in s for s in samples)
    assert any(s.get("in_flight") for s in samples)


def test_ramp_verdict_reads_the_routers_count_as_in_flight():
    from llmbench.analysis.verdict import server_sentence, server_view
    samples = [{"t": 1.0, "kind": "nomyo", "in_flight": 4.0,
                "backends_in_flight": {"http://a:8080": 4.0}}]
    view = server_view(samples)
    assert view["running_max"] is None and view["router_in_flight_max"] == 4.0
    text = server_sentence(view)
    assert "up to 4 running" not in text
    assert "router reported up to 4 requests in flight" in text and "queued" in text


def test_a_named_server_probe_that_finds_nothing_says_so(mock_factory, tmp_path, capfd):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    with NomyoLike([m.url]) as router:
        run = llmbench.run(url=router.url + "/v1", model="mock", requests=2, out=tmp_path,
                           server_probe="llamacpp", tokenizer="approx", progress=None)
    err = capfd.readouterr().err
    assert ("warning: server probe llamacpp: nothing to poll at " + router.url) in err
    assert "GET /metrics answered 404" in err and "a router in front of one" in err
    assert "GET /metrics answered 404" in run_json(run)["server_probe"]["note"]


# -- /tokenize that stalls now and then -----------------------------------------------------
class _Tokenize(BaseHTTPRequestHandler):
    """llama.cpp's /tokenize (one token per word); the first call for one text in four, and
    every call for a text holding "never", waits past the client's per-call timeout."""

    calls = 0
    seen: set = set()
    lock = threading.Lock()

    def log_message(self, *a) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        text = body.get("content")
        with _Tokenize.lock:
            _Tokenize.calls += 1
            first = text not in _Tokenize.seen
            _Tokenize.seen.add(text)
        if text is None:                    # vLLM's shape: llama.cpp answers an empty list
            out = {"tokens": []}
        else:
            if (first and _Tokenize.calls % 4 == 0) or "never" in text:
                time.sleep(1.5)
            out = {"tokens": list(range(len(text.split())))}
        data = json.dumps(out).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass                            # the client gave up on this one


@pytest.fixture
def stalling_tokenizer(monkeypatch):
    from llmbench.workload import server_tokenizer
    monkeypatch.setattr(server_tokenizer, "CALL_TIMEOUT_S", 0.5)
    _Tokenize.calls = 0
    _Tokenize.seen = set()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Tokenize)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _tok(root):
    from llmbench.workload import ServerRef, load_tokenizer
    return load_tokenizer("auto", server=ServerRef(root, "m", {}))


def test_a_stalled_tokenize_call_is_retried_not_the_end_of_exact_counts(stalling_tokenizer):
    from llmbench.workload import WorkloadSpec, build_workload
    tok = _tok(stalling_tokenizer)
    wl = build_workload(WorkloadSpec(count=40, prompt_tokens=(30, 30), output_tokens=(4, 4)), tok)
    assert wl.tokenizer == "server:m"             # still the server's: not dropped for the run
    info = wl.tokenizer_info
    assert info["server_missed"] == 0 and info["server_counted"] > 40
    assert _Tokenize.calls > info["server_counted"]     # some calls stalled and were retried
    assert all(t.prompt_tokens == 30 for c in wl.conversations for t in c.turns)
    assert not any("/tokenize counted" in w for w in wl.warnings)


def test_a_prompt_the_server_never_counts_is_counted_locally_and_said(stalling_tokenizer):
    from llmbench.workload.tokenizer import TokenizerError  # noqa: F401 - not raised
    tok = _tok(stalling_tokenizer)
    texts = [f"prompt {i} of some words" for i in range(12)] + ["this one never counts"]
    counts = tok.count_many(texts)
    assert counts[:12] == [5] * 12                 # the server's counts, exact
    assert counts[12] == tok.local.count(texts[12])
    assert tok.server.missed == 1 and tok.server.counted == 12
    note = tok.missed_note()
    assert "counted 12 of 13 texts exactly" in note and "failed 3 times" in note
