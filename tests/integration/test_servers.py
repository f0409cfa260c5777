"""Server adapters (probe/servers/): each kind detected from its own pages on a loopback server,
polled into a sample, and detection asks each path at most once."""

import asyncio
import json
import threading
from pathlib import Path

import pytest
from aiohttp import web

from llmbench import servers
from llmbench.servers import KINDS
from llmbench.servers.scrape import ServerProbe
from tests.helpers import free_port

from tests.helpers import FIXTURES as FIX  # noqa: E402


class PageServer:
    """Answers GET <path> with fixed (status, text) pages, 404 otherwise; counts what was asked."""

    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = pages
        self.asked: list[str] = []
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _any(self, request: web.Request) -> web.Response:
        self.asked.append(request.path)
        if request.path in self.pages:
            return web.Response(text=self.pages[request.path])
        return web.Response(status=404, text="404 page not found")

    def __enter__(self):
        ready = threading.Event()

        def main():
            self._loop = asyncio.new_event_loop()
            app = web.Application()
            app.router.add_route("GET", "/{tail:.*}", self._any)
            self._runner = web.AppRunner(app)
            self._loop.run_until_complete(self._runner.setup())
            self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        assert ready.wait(5)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def probe_once(url: str, kind: str = "auto"):
    async def go():
        p = ServerProbe(url, kind)
        async with p.session() as s:
            found = await p.detect(s)
            sample = await p.poll_once(s) if found else None
        return found, sample, p.note
    return asyncio.run(go())


def test_kinds_and_help_come_from_the_registry():
    names = [a.name for a in servers.ADAPTERS]
    assert KINDS == ("auto", *names, "off")
    assert set(names) == {"vllm", "sglang", "llamacpp", "ollama", "tgi", "mock", "nomyo",
                          "lmstudio"}
    # the mock's page holds vllm: names too, so it is asked first
    assert names.index("mock") < names.index("vllm")


@pytest.mark.parametrize("kind,running", [("vllm", 3), ("sglang", 7), ("llamacpp", 1), ("tgi", 8)])
def test_metrics_servers_are_recognised_by_their_page(kind, running):
    pages = {"/metrics": (FIX / f"{kind}_metrics.txt").read_text()}
    if kind == "llamacpp":
        pages["/props"] = json.dumps({"total_slots": 4})
    with PageServer(pages) as s:
        found, sample, _ = probe_once(s.url)
    assert found == kind and sample["kind"] == kind and sample["running"] == running
    if kind == "llamacpp":
        assert sample["slots"] == 4


def test_llamacpp_without_metrics_polls_slots():
    slots = [{"id": 0, "is_processing": True}, {"id": 1, "state": 0}]
    with PageServer({"/props": json.dumps({"total_slots": 2}), "/slots": json.dumps(slots)}) as s:
        found, sample, _ = probe_once(s.url)
    assert found == "llamacpp" and sample["running"] == 1 and sample["slots"] == 2


def test_ollama_and_nomyo():
    ps = {"models": [{"name": "q", "size": 10, "size_vram": 4}]}
    with PageServer({"/api/version": '{"version": "0.5.1"}', "/api/ps": json.dumps(ps)}) as s:
        found, sample, _ = probe_once(s.url)
    assert found == "ollama" and sample["models_loaded"] == ["q"] and sample["ram_bytes"] == 6
    usage = {"usage_counts": {"http://a": {"m": 2}}}
    with PageServer({"/api/usage": json.dumps(usage)}) as s:
        found, sample, _ = probe_once(s.url)
    # the router's in-flight count (running or queued at the backend), not a running count
    assert found == "nomyo" and sample["in_flight"] == 2 and "running" not in sample


def test_detection_asks_each_path_once_and_says_what_it_tried():
    with PageServer({}) as s:
        found, _, note = probe_once(s.url)
    assert found is None
    assert sorted(s.asked) == sorted(["/metrics", "/api/usage", "/props", "/api/v0/models",
                                      "/api/version"])
    assert "(no /metrics, /api/usage, /props, /api/v0/models or /api/version)" in note


def test_a_named_kind_takes_any_metrics_page():
    with PageServer({"/metrics": "# nothing this server is known by\nup 1\n"}) as s:
        assert probe_once(s.url)[0] is None
        found, sample, _ = probe_once(s.url, "tgi")
        assert probe_once(s.url, "ollama")[0] is None
    assert found == "tgi" and "running" not in sample


def test_a_failed_poll_is_an_error_sample():
    with PageServer({"/metrics": (FIX / "tgi_metrics.txt").read_text()}) as s:
        async def go():
            p = ServerProbe(s.url)
            async with p.session() as sess:
                await p.detect(sess)
                s.pages.clear()
                return await p.poll_once(sess)
        sample = asyncio.run(go())
    assert sample["error"] == "HTTP 404" and sample["kind"] == "tgi"
