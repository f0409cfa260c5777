"""The client's own send delay: stamped per request (decided to send -> bytes handed to the
socket), summarised per run and per step, and judged by the load-generator check."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.helpers import send_one
from tests.helpers import llmbench, only_run

from llmbench.client.request import Client, RequestParams
from llmbench.analysis.finish import step_judge as judge
from llmbench.load.monitor import SEND_DELAY_P99_LIMIT_MS, busy, with_send_delay
from llmbench.load.session import Session
from llmbench.analysis.metrics import summarize
from llmbench.records.record import Record
from llmbench.load.shapes import StepWindow
from llmbench.client.target import make_target
from llmbench.analysis.verdict import generator_sentence, lag_explains
from llmbench.workload import Turn

# every test here runs on both HTTP transports (conftest.transport)
pytestmark = pytest.mark.usefixtures("transport")


def test_sent_is_stamped_between_start_and_the_first_token(mock_factory):
    m = mock_factory(ttft_ms=20, itl_ms=1)
    rec, _ = asyncio.run(send_one(m.url + "/v1", max_tokens=4))
    assert rec.ok and rec.sent is not None
    assert rec.start <= rec.sent <= rec.first_token
    assert rec.send_delay == rec.sent - rec.start


def test_logs_without_sent_still_load_and_summarise():
    old = {"request_id": "a", "scheduled": 1.0, "start": 1.0, "first_token": 1.1, "end": 1.2,
           "done": 1.2, "ok": True, "status": 200, "output_tokens": 2, "token_us": [100000, 200000]}
    rec = Record.from_json(old)
    assert rec.sent is None and rec.send_delay is None
    s = summarize([rec]).flat()
    assert s["n_send_delay"] == 0 and s["p99_send_delay_ms"] is None
    # and a new record round-trips its stamp
    new = Record.from_json({**old, "sent": 1.004})
    assert abs(new.send_delay - 0.004) < 1e-9
    assert Record.from_json(json.loads(json.dumps(new.to_json()))).sent == 1.004


async def _blocked_loop_run(url: str, n: int, block_s: float) -> list[Record]:
    """``n`` requests at once while something else in the same loop blocks it ``block_s`` on
    every turn: each request waits at least one turn between being started and being sent."""
    stop = False

    async def hog() -> None:
        while not stop:
            time.sleep(block_s)         # the loop's thread is busy: nothing else runs
            await asyncio.sleep(0)

    async with Client(make_target(url + "/v1", "mock"), RequestParams()) as c:
        s = Session(c, None)
        h = asyncio.get_running_loop().create_task(hog())
        await asyncio.sleep(0)
        msgs = [{"role": "user", "content": "hello"}]
        await asyncio.gather(*(s.request(msgs, Turn("hello", 2, 2), scheduled=time.perf_counter())
                               for _ in range(n)))
        stop = True
        await h
        return s.records


def test_a_blocked_generator_is_flagged_by_its_send_delay(mock_factory):
    m = mock_factory(ttft_ms=1, itl_ms=1)
    block_s = 0.08      # 8x the budget: a busier machine only makes the delay longer
    recs = asyncio.run(_blocked_loop_run(m.url, 16, block_s))
    assert all(r.ok and r.sent is not None for r in recs)
    s = summarize(recs).flat()
    assert s["n_send_delay"] == 16
    assert s["p50_send_delay_ms"] >= block_s * 1000 * 0.9
    mon = with_send_delay(busy([]), s["p50_send_delay_ms"], s["p99_send_delay_ms"])
    assert mon["overloaded"] and mon["send_delay_over"]
    assert mon["send_delay_limit_ms"] == SEND_DELAY_P99_LIMIT_MS
    assert "sent its requests late" in generator_sentence(mon)


def _late_records(delay_s: float, n: int = 50) -> list[Record]:
    out = []
    for i in range(n):
        start = 10.0 + 0.1 * i
        times = [start + delay_s + 0.05 + 0.01 * k for k in range(4)]
        out.append(Record(f"r{i}", scheduled=start, start=start, sent=start + delay_s, step=0,
                          token_times=times, first_token=times[0], end=times[-1],
                          done=times[-1], ok=True, status=200, output_tokens=4))
    return out


def test_a_ramp_step_with_late_sends_is_not_trustworthy_though_the_loop_looked_fine():
    calm = {"lag_p99_ms": 0.5, "lag_max_ms": 1.0, "cpu_pct": 95.0, "overloaded": False}
    recs = _late_records(0.040)
    from llmbench.analysis.slo import parse_threshold
    step = judge([parse_threshold("ttft.p95<=60ms")], 1.0, 10.0)(
        StepWindow(0, 8, 9.0, 10.0, 20.0, recs, 0, calm))
    mon = step.monitor
    assert mon["send_delay_over"] and mon["overloaded"]
    assert 39.0 < mon["send_delay_p99_ms"] < 41.0
    # TTFT p95 ~90 ms broke a 60 ms limit by less than the 40 ms the client added itself
    assert not step.held and lag_explains(step)
    # the same step with prompt sends holds the generator blameless
    ok = judge([parse_threshold("ttft.p95<=60ms")], 1.0, 10.0)(
        StepWindow(0, 8, 9.0, 10.0, 20.0, _late_records(0.0005), 0, calm))
    assert not ok.monitor["overloaded"] and not ok.monitor["send_delay_over"]


def test_run_folder_has_the_send_delay(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1, models=["m1"])
    r = llmbench("run", "--url", m.url + "/v1", "--model", "m1", "--concurrency", "2",
                 "--requests", "6", "--prompt-tokens", "8", "--output-tokens", "4",
                 "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    folder = only_run(tmp_path)
    run = json.loads((folder / "run.json").read_text())
    assert run["summary"]["n_send_delay"] == 6
    assert run["summary"]["p99_send_delay_ms"] >= run["summary"]["p50_send_delay_ms"] >= 0
    assert run["monitor"]["send_delay_p99_ms"] == run["summary"]["p99_send_delay_ms"]
    assert "send_delay_over" in run["monitor"]
    lines = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    assert all(x["start"] <= x["sent"] for x in lines)
    assert "Client send delay p50 / p99:" in r.stdout
