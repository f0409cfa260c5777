"""Every request llmbench sends besides the load (its /tokenize probe, /v1/models, the server
probe's pages) has a deadline for the whole of it and a size cap, so a server that drips
keep-alive bytes forever cannot hold llmbench before its run (issue 23, item 2)."""

import os
import subprocess
import sys
import time

from tests.helpers import CHAT_ROLE, ROOT, RawServer, chat_token, chunk, http_head

DRIP = [(0.0, http_head(chunked=True))] + [(0.2, chunk(b": keep-alive\n\n"))] * 300   # 60 s


def dripping_server(drip_paths: tuple[bytes, ...]) -> RawServer:
    """Chat completions answered at once; the paths named answered with a head and then a
    keep-alive comment every 0.2 s for a minute; anything else a 404."""
    server: RawServer

    def script(i: int):
        line = server.requests[i].split(b"\r\n", 1)[0]
        if any(p in line for p in drip_paths):
            return DRIP
        if b"/chat/completions" in line:
            return [(0, http_head() + CHAT_ROLE + chat_token("ok") + b"data: [DONE]\n\n")]
        return [(0, b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")]
    server = RawServer(script)
    return server


def _llmbench(*args: str, timeout: float = 90) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if k != "LLMBENCH_TOKENIZER"}
    env["PYTHONPATH"] = str(ROOT)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "llmbench.cli", *args], capture_output=True,
                       text=True, timeout=timeout, env=env, cwd=ROOT)
    return r, time.monotonic() - t


def test_a_tokenize_endpoint_that_drips_forever_costs_seconds_not_the_run(tmp_path):
    with dripping_server((b"/tokenize",)) as s:
        r, took = _llmbench("run", "--url", s.url + "/v1", "--model", "m", "--requests", "3",
                            "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    # the probe gave up after its deadline (2 s) and said why; the run went on
    assert "no whole answer within 2 s" in r.stdout + r.stderr, r.stdout + r.stderr
    assert took < 45, took


def test_a_models_list_that_drips_forever_is_one_line_not_a_hang(tmp_path):
    with dripping_server((b"/v1/models",)) as s:
        r, took = _llmbench("run", "--url", s.url + "/v1", "--requests", "3",
                            "--out", str(tmp_path))
    assert r.returncode == 3, r.stdout + r.stderr          # no --model, and none to be had
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "no whole answer within" in lines[0], r.stderr
    assert took < 45, took


def test_a_server_probe_page_that_drips_forever_is_given_up(tmp_path):
    # /metrics drips: the server probe's 3 s total per page ends it; the run is measured
    # only the run's folder and time: in this process, through the API
    import llmbench
    from tests.helpers.api import run_exit_code
    with dripping_server((b"/metrics", b"/slots", b"/api/ps", b"/health")) as s:
        t = time.monotonic()
        r = llmbench.run(url=s.url + "/v1", model="m", requests=3, tokenizer="approx",
                         server_probe="auto", out=tmp_path)
        took = time.monotonic() - t
    assert run_exit_code(r) == 0
    assert took < 60, took
    import json
    folder = next(tmp_path.iterdir())
    probe = json.loads((folder / "run.json").read_text())["server_probe"]
    # the pages never ended: the probe said so and polled nothing, rather than waiting
    assert probe["samples"] == 0 and "did not answer" in (probe["note"] or ""), probe


def test_a_server_probe_page_over_its_size_cap_is_not_read_whole():
    import asyncio

    from llmbench.servers.scrape import MAX_PAGE_BYTES, ServerProbe
    big = b"x" * (MAX_PAGE_BYTES + 4096)
    page = (b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n" % len(big))
    with RawServer([(0, page + big)]) as s:
        probe = ServerProbe(s.url, "auto")

        async def get():
            async with probe.session() as session:
                return await probe._get(session, "/metrics")
        from llmbench.servers.plainget import PageError
        try:
            asyncio.run(get())
        except PageError as exc:
            assert "larger than 8 MB" in str(exc)
        else:
            raise AssertionError("a page over the cap was read whole")
