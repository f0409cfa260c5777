"""From tests/e2e/test_hostile_inputs.py, the case that needs only the run's files: a server's
hostile values stay valid JSON, run in this process through the API (llmbench.run)."""

from __future__ import annotations

import json

import pytest

import llmbench
from tests.helpers import RawServer, chat_token
from tests.helpers.api import run_exit_code


def test_server_nan_header_and_negative_tokens_stay_valid(tmp_path):
    usage = (b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
             b'"usage":{"prompt_tokens":5,"completion_tokens":-7}}\n\n')
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-llmbench-queue-ms: nan\r\n"
            b"connection: close\r\n\r\n")
    body = chat_token("a") + chat_token("b") + chat_token("c") + usage + b"data: [DONE]\n\n"
    with RawServer([(0, head + body)]) as s:
        r = llmbench.run(url=s.url + "/v1", model="m", requests=3, prompt_tokens=5,
                         output_tokens=3, out=tmp_path)
    assert run_exit_code(r) == 0
    run_dir = next(tmp_path.iterdir())
    assert run_dir == r.path

    def strict(line: str):
        return json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    recs = [strict(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(x["ok"] for x in recs)
    assert all("server_queue_ms" not in x for x in recs)
    assert all(x["output_tokens"] == 3 and "completion_tokens -7" in x["note"] for x in recs)
    summary = strict((run_dir / "run.json").read_text())["summary"]
    assert summary["output_throughput"] > 0 and summary["total_output_tokens"] == 9
