"""A live dashboard page finishes loading (issue 45, 4): while a run goes, Chromium's own
``--headless --screenshot URL`` (the first thing a person tries) returns with the page drawn,
its tiles showing the run in progress. A page whose loading never ends (a response never
finished, a script that waits forever) makes chromium time out here."""

from __future__ import annotations

import subprocess
import threading
import time

import llmbench
from llmbench.report.dashboard import handle
from tests.helpers.field import require

PNG = b"\x89PNG\r\n\x1a\n"


def test_chromium_screenshots_a_live_page(mock_factory, tmp_path):
    chromium = require("chromium", "chromium")
    m = mock_factory(ttft_ms=50, itl_ms=40, tokens=64, parallel=4)
    done = threading.Event()
    failed: list[BaseException] = []

    def go() -> None:
        try:
            llmbench.run(url=m.url + "/v1", model="mock", concurrency=2, duration="15s",
                         prompt_tokens=8, output_tokens=64, out=tmp_path, dashboard=0)
        except BaseException as exc:       # noqa: BLE001 - said by the test below
            failed.append(exc)
        finally:
            done.set()
    t = threading.Thread(target=go, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while (handle.current() is None or not handle.current().alive) \
                and time.monotonic() < deadline and not done.is_set():
            time.sleep(0.1)
        board = handle.current()
        assert board is not None and board.alive, failed
        time.sleep(2.0)                    # a tick or two: the page shows the run going
        shot = tmp_path / "live.png"
        t0 = time.monotonic()
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
             "--window-size=1200,1600", f"--user-data-dir={tmp_path / 'profile'}", board.url],
            capture_output=True, timeout=120, cwd=tmp_path)
        took = time.monotonic() - t0
        assert not done.is_set(), "the run ended before the screenshot: not a live page"
    finally:
        done.wait(60)
        if handle.current() is not None:
            handle.current().close()
    assert not failed, failed
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    data = shot.read_bytes()
    assert data.startswith(PNG) and len(data) > 20_000, (len(data), took)
