"""Live numbers that are live (issue 45, 4): token events are counted as they arrive, so while
a 64-token reply streams for seconds the live token rate is never 0 for a whole second, read
from the live line llmbench prints and from the dashboard's feed, over HTTP from the page's own
process, against the mock. Before, tokens were counted when a reply ended: the live line read
0, 0, 0, 64 tok/s and the page "0 token events/s" while the reply streamed."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import pytest

import llmbench
from llmbench.report.dashboard import handle
from tests.helpers import free_port

TOKENS = 64
ITL_MS = 60            # a reply streams for ~3.9 s: seconds in which no reply ends


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_live_rate_is_never_zero_while_a_reply_streams(mock_factory, tmp_path, capfd,
                                                           workers):
    """``workers=2``: the replies stream in worker processes, whose counts reach the
    coordinator's live views by message, streaming replies included."""
    m = mock_factory(ttft_ms=100, itl_ms=ITL_MS, tokens=TOKENS, parallel=2)
    ticks: list[tuple[float, float]] = []          # (t_s, the page's token events/s)
    scraped: list[int] = []                        # llmbench_token_events_total, as scraped
    port = free_port()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            board = handle.current()
            if board is not None and board.alive:
                try:
                    s = json.loads(_get(board.url + "state.json"))
                    text = s["text"]         # the tiles, as the page shows them
                    at = re.fullmatch(r"(\d+)s", text.get("elapsed") or "")
                    if at and text.get("tok_s", "–") != "–" and not s["final"]:
                        ticks.append((float(at.group(1)), float(text["tok_s"])))
                except OSError:
                    pass
            try:
                body = _get(f"http://127.0.0.1:{port}/metrics").decode()
                got = re.search(r"^llmbench_token_events_total\S* (\d+)$", body, re.M)
                if got:
                    scraped.append(int(got.group(1)))
            except OSError:
                pass
            time.sleep(0.2)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        # a user per process, three replies each one after the other: every second of the
        # run has a reply streaming (the next starts as soon as one ends)
        run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=workers,
                           requests=3 * workers, prompt_tokens=8, output_tokens=TOKENS,
                           out=tmp_path, dashboard=0, progress=True, metrics_port=port,
                           **({"workers": str(workers)} if workers > 1 else {}))
        stop.set()
        t.join(10)
        state = json.loads(_get(handle.current().url + "state.json"))
    finally:
        stop.set()
        if handle.current() is not None:
            handle.current().close()
    assert run.summary.completed == 3 * workers
    duration_s = run.summary.duration_s
    assert duration_s > 3 * TOKENS * ITL_MS / 1000.0 * 0.9, duration_s

    # the live line (no terminal: one line a second on stderr), "[   4s] ... ~   16 tok/s"
    err = capfd.readouterr().err
    lines = [(int(a), int(b)) for a, b in re.findall(r"\[\s*(\d+)s\][^\n]*~\s*(\d+) tok/s", err)]
    # from the first token on (worker processes take a second or two to start sending), to
    # the end of the run's last whole second
    during = _streaming(lines, duration_s)
    assert len(during) >= 6, err[-2000:]
    assert all(n > 0 for _, n in during), during
    # about the mock's pace (1000/ITL_MS a second a stream), not 0 then 64
    assert max(n for _, n in during) < 2 * workers * 1000 / ITL_MS, during

    # the page's tile, as the page read it while the run went
    during = _streaming(ticks, duration_s)
    assert len(during) >= 4, ticks
    assert all(v > 0 for _, v in during), during
    # and its per-second rows (the live chart's token rate): every whole second of the run
    per_s = state["series"]["tok_s"]
    during = _streaming(list(enumerate(per_s)), duration_s)
    assert len(during) >= 6, per_s
    assert all(v > 0 for _, v in during), per_s
    # the rows' token events add up to the run's (none counted twice, none lost)
    assert abs(sum(per_s) - 3 * workers * TOKENS) <= 1, per_s

    # the metrics port's counter, scraped while replies streamed: it went up mid-reply (not
    # in steps of whole replies), and never down
    assert scraped and any(v % TOKENS for v in scraped), scraped
    assert scraped == sorted(scraped), scraped


def _streaming(seen: list[tuple[float, float]], duration_s: float) -> list[tuple[float, float]]:
    """The (time, rate) readings from the first token event on (worker processes take a second
    or two to start sending) to the end of the run's last whole second."""
    first = next((i for i, (_, n) in enumerate(seen) if n > 0), len(seen))
    if first == len(seen):
        return []
    return [(t, n) for t, n in seen[first:] if t - seen[first][0] <= duration_s - 1.5]
