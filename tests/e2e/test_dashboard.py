"""--dashboard in a real browser: a ramp against the mock, watched in headless Chromium over
its DevTools protocol. The page loads with no console error, its numbers change while the run
goes (two screenshots, two loads), it is updated by its event stream (never reloaded), and when
the run ends it is the run's report, whose numbers are run.json's. Then ``llmbench dashboard``
serves the same folder the same way. The model's name is markup: escaped, it is text; run as
markup, its image would fail to load and its handler would open a dialog (both are errors)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
import signal
import subprocess
import sys
from pathlib import Path

from llmbench.report.console import fmt_ms
from tests.helpers import ENV, ROOT, busy, free_port
from tests.helpers.browser import Browser

HOSTILE = 'mo<img src=x onerror="alert(1)">del'

READ = """JSON.stringify({
  final: document.body.getAttribute("data-final"),
  version: document.body.getAttribute("data-version"),
  marker: window.__notReloaded === true,
  k: Object.fromEntries([...document.querySelectorAll("[data-k]")].map(
       e => [e.getAttribute("data-k"), e.textContent])),
  thresholds: (document.querySelector('[data-h="thresholds"]') || {}).innerText || "",
  live: !!document.querySelector('[data-chart="live timeline"] svg')})"""

STEP_TABLE = """JSON.stringify(Array.from(Array.from(document.querySelectorAll("h2")).filter(
  h => h.textContent === "Steps")[0].nextElementSibling.querySelectorAll("tr")).slice(1).map(
  tr => Array.from(tr.querySelectorAll("td")).map(td => td.textContent)))"""


async def _watch(url: str, shots: Path, proc: subprocess.Popen, err: busy.Lines,
                 later: list) -> dict:
    """Watch the run to its end; then (``later``: the command that serves the folder after,
    started here once the run is over) the same browser opens the folder's page."""
    async with Browser() as b:
        await b.goto(url)
        await b.eval("window.__notReloaded = true")
        moments: dict[str, dict] = {}
        done_seen: set[str] = set()
        so_far = judged = False
        deadline = busy.Deadline(120)
        while not deadline.expired():
            s = json.loads(await b.eval(READ))
            if s["final"] == "1":
                break
            k = s["k"]
            done_seen.add(k.get("done", ""))
            so_far = so_far or "so far" in s["thresholds"]
            judged = judged or "✓" in s["thresholds"].replace("so far", "")
            users = k.get("load", "")
            # a moment per step, once its users are all in and requests have finished
            for step, want in (("1/2", "1/1 users"), ("2/2", "4/4 users")):
                if step not in moments and k.get("step", "").startswith(step) and users == want \
                        and k.get("ttft_p50") != "–" and s["live"]:
                    moments[step] = {**s, "png": str(await b.screenshot(shots / f"step{step[0]}.png"))}
            await asyncio.sleep(0.25)
        final = json.loads(await b.eval(READ))
        table = json.loads(await b.eval(STEP_TABLE))
        verdict = await b.eval("document.querySelector('.verdict b').textContent")
        title = await b.eval("document.title")
        await b.screenshot(shots / "final.png")
        errors = b.errors()
        # the page is final before the command lingers: a Ctrl-C sent in between ends the
        # command (exit 130, no linger), so the one that ends the linger, where the ramp's exit
        # code stays, waits for its line ("Dashboard: URL stays up for 120 s")
        err.wait(r"Dashboard: \S+ stays up", 90)
        proc.send_signal(signal.SIGINT)
        serve = later[0]()
        later[:] = [serve]
        await b.goto(busy.Lines(serve).wait(r"Dashboard: (http://\S+)", 90).group(1))
        again = {"table": json.loads(await b.eval(STEP_TABLE)),
                 "verdict": await b.eval("document.querySelector('.verdict b').textContent"),
                 "errors": b.errors()[len(errors):]}
        return {"moments": moments, "final": final, "table": table, "verdict": verdict,
                "title": title, "errors": errors, "done_seen": done_seen,
                "so_far": so_far, "judged": judged, "again": again}


def test_a_ramp_watched_in_chromium(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=60, itl_ms=10, tokens=10, parallel=8, models=[HOSTILE])
    out = tmp_path / "out"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench.cli", "ramp", "--url", m.url + "/v1", "--model", HOSTILE,
         "--users", "1,4", "--ramp-in", "0.5s", "--hold", "2s", "--think", "0.1s-0.3s",
         "--output-tokens", "16",
         "--threshold", "ttft.p50<=5s", "--out", str(out), "--no-progress",
         "--dashboard", f"127.0.0.1:{port}", "--dashboard-linger", "120s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    err = busy.Lines(proc)

    def serve_folder() -> subprocess.Popen:        # the same folder, served after the run
        run_dir = next(p for p in out.iterdir() if p.is_dir())
        # PYTHONFAULTHANDLER: where it was stuck, if it does not end on Ctrl-C (issue 49: once,
        # with two busy loops, it was still up after the wait and was killed)
        return subprocess.Popen([sys.executable, "-m", "llmbench.cli", "dashboard", str(run_dir),
                                 "--port", str(free_port())], stderr=subprocess.PIPE, cwd=ROOT,
                                env={**ENV, "PYTHONFAULTHANDLER": "1"})
    later: list = [serve_folder]
    stuck: list[str] = []
    try:
        url = err.wait(r"Dashboard: (http://\S+)", 90).group(1)
        assert err.seen[0].startswith("Dashboard: "), err.seen   # the URL is printed first
        assert url == f"http://127.0.0.1:{port}/"
        got = asyncio.run(_watch(url, tmp_path, proc, err, later))
        stdout, stderr = busy.communicate(proc, 30)
    finally:
        for p in [proc] + [x for x in later if isinstance(x, subprocess.Popen)]:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    busy.communicate(p, 30, dump=True)
                except subprocess.TimeoutExpired as exc:    # killed
                    stuck.append(f"{p.args[3]} did not end on Ctrl-C in {exc.timeout:.0f} s: "
                                 f"{(exc.stderr or b'').decode(errors='replace')[-3000:]}")
                    # every thread's stack (faulthandler), whole: the assertion's text is cut
                    print(stuck[-1], file=sys.stderr)
    assert proc.returncode == 0, (err.seen, stdout.decode()[-2000:], stderr.decode()[-2000:])
    assert later[0].returncode == 0, stuck         # `llmbench dashboard` ended by Ctrl-C
    assert got["errors"] == [], got["errors"]
    # two moments, two loads, each in its screenshot, the numbers moving between them
    a, b = got["moments"].get("1/2"), got["moments"].get("2/2")
    assert a is not None and b is not None, got["moments"].keys()
    assert a["k"]["load"] != b["k"]["load"]
    assert int(a["version"]) < int(b["version"]) and len(got["done_seen"]) >= 3
    assert Path(a["png"]).stat().st_size > 10_000 and Path(b["png"]).stat().st_size > 10_000
    assert got["so_far"] and got["judged"]     # thresholds: live during a step, then judged
    assert got["final"]["marker"]              # updated in place: the page never reloaded
    # the end: the report, whose numbers are run.json's
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    run = json.loads((run_dir / "run.json").read_text())
    steps = run["steps"]
    assert len(got["table"]) == len(steps) == 2
    for row, st in zip(got["table"], steps):
        s = st["summary"]
        assert row[0] == f"{st['load']:g}"
        assert row[1] == str(s["requests"])
        assert row[3] == fmt_ms(s["p95_ttft_ms"]) and row[5] == fmt_ms(s["p95_itl_ms"])
        assert row[10] == str(s["failed"])
    assert got["verdict"] == run["verdict"]["result"]
    assert HOSTILE in got["title"]             # shown as text, never run as markup
    # the same folder served later, the same way
    again = got["again"]
    assert again["table"] == got["table"] and again["verdict"] == got["verdict"]
    assert again["errors"] == []


def test_a_ctrl_c_before_the_linger_ends_the_command(mock_factory, tmp_path):
    """A Ctrl-C the run takes (here during its load; on a busy machine it also lands in the
    closing output, after the page is final) is the user's stop: the command ends with 130 and
    its page closes with it, instead of lingering the hour it was asked to after a normal end."""
    m = mock_factory(ttft_ms=20, itl_ms=10, tokens=10, parallel=2)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench.cli", "run", "--url", m.url + "/v1", "--model", "mock",
         "--concurrency", "2", "--duration", "10m", "--out", str(out), "--no-progress",
         "--dashboard", "127.0.0.1:0", "--dashboard-linger", "1h"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    err = busy.Lines(proc)
    try:
        url = err.wait(r"Dashboard: (http://\S+)", 90).group(1)
        assert busy.wait_for(lambda: any(p.stat().st_size for p in out.glob("*/requests.jsonl")),
                             60), "no request finished"
        proc.send_signal(signal.SIGINT)
        # the in-flight requests' grace period and the final write, not the hour's linger
        _, rest = busy.communicate(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = "\n".join(err.seen) + rest.decode()
    assert proc.returncode == 130, stderr[-2000:]
    assert "stays up" not in stderr, stderr[-2000:]
    run = json.loads(next(out.glob("*/run.json")).read_text())
    assert run["status"] == "partial" and run["summary"]["completed"] > 0
    try:                                        # the page closed with the command
        urllib.request.urlopen(url, timeout=5)
        raise AssertionError(f"{url} still answers after the command ended")
    except OSError:
        pass
