"""From tests/e2e/test_outage.py, the back-off from a server that says "not now", whose records
are the point: run in this process through the API (llmbench.run)."""

import json
import time

import llmbench
from llmbench.load.session import BACKOFF_MAX_S
from tests.helpers import CHAT_ROLE, RawServer, chat_token, http_head, only_run
from tests.helpers.api import run_exit_code


def test_users_back_off_from_a_server_that_says_not_now(tmp_path):
    """llama.cpp answers 503 "Loading model" for seconds after a restart; 4 users with no
    think time once sent 4,660 requests into 5 s of it. Each now backs off as from a refused
    connection (a 429 the same), and the requests after it succeed."""
    body = b'{"error":{"message":"Loading model","type":"unavailable_error","code":503}}'
    busy = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
    ok = http_head() + CHAT_ROLE + chat_token("ok") + b"data: [DONE]\n\n"
    loading: list[float] = []            # the 3 s of "Loading model", from the first request

    def script(i: int):
        if i == 0:
            return [(0, ok)]             # the preflight: the server was up, then restarted
        if not loading:
            loading.append(time.monotonic() + 3.0)
        return [(0, busy)] if time.monotonic() < loading[0] else [(0.01, ok)]
    with RawServer(script) as s:
        r = llmbench.run(url=s.url + "/v1", model="m", concurrency=4, duration="5s",
                         prompt_tokens=5, output_tokens=4, out=tmp_path)
    recs = [json.loads(x) for x in (only_run(tmp_path) / "requests.jsonl").read_text().splitlines()]
    not_now = [x for x in recs if x.get("status") == 503]
    assert run_exit_code(r) == 0
    # a handful per user over the 3 s, not thousands
    assert 4 <= len(not_now) < 100, len(not_now)
    assert all(0 < x["backoff_ms"] <= BACKOFF_MAX_S * 1000 for x in not_now)
    assert sum(1 for x in recs if x.get("ok")) > 10
