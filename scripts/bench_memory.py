"""Peak memory of ``llmbench run`` over a long run (issue 12, item 5).

  python scripts/bench_memory.py --requests 20000 100000 1000000
  python scripts/bench_memory.py --requests 20000 --output-tokens 128

Starts ``llmbench mock`` (zero delay) in its own process, then the real CLI ``llmbench run`` in a
subprocess against it, and reports the peak resident set of llmbench's own process(es) only:
the run's process from ``wait4`` (its ru_maxrss, exact, whatever happened after the last poll)
plus the high-water marks (VmHWM) of any child processes it starts (workers), polled. The mock
is not counted. It also checks that requests.jsonl holds as many records as requests were asked
for, and that the summary's ``requests`` says the same.

Figures depend on how busy the machine is only through time, not memory; the per-request slope
(MB per 100k requests between the sizes run) says whether memory still grows with the run.

Measured 2026-11-30 on the shared 2-core machine (8-token replies, concurrency 32):
  before (records as Record objects):  20k 130.7 MB, 100k 295.9 MB
  after (RecordStore, columnar summary, regenerated synthetic workload):
                                       20k 111.6 MB, 100k 146.2 MB
  128-token replies, 20k: 322 MB before (issue 12), 184.9 MB after
About 97 MB of any run is fixed: imports (~49 MB) and matplotlib for report.html (~50 MB).

2026-11-30, later (memory2; report charts are SVG now, no matplotlib):
  real:       20k 84.1 MB, 200k 133.0 MB (slope 285 bytes per request between them)
  --simulate: 200k 117.9 MB; 1M 289.5 MB (was 564.8 before this round), by phase:
              before records 68, store filled 213 (store 140 MB), summary 276, peak in flight
              253, record checks 263, timeline 290, report 208
  --workers 2: each worker process is ~55-63 MB and the resource tracker 13 MB, so the fixed
              cost of llmbench's processes together is ~200 MB before any record.

2026-11-30, the session after (issue 12's 1M bound), real 1M requests x 8 tokens, one process
(`--requests 1000000`; each while other work shared the machine, which changes time only):
  287.1 MB at the start of the session
  274.7  columns of one value kept once (store 140 -> 100 MB), end-of-run passes a block of
         requests at a time (timeline counts, peak in flight, length checks, summary series)
  259.5  ITL from counts of its gap values, send delay without copies, aiohttp not loaded
  259.6  the heap trimmed every 65,536 stored requests too (RSS had grown ~146 bytes a request
         where the columns take ~109 at 200k; at 1M it changed nothing: still ~60 MB above
         the store plus imports at the end of the run, cause not found)
  --simulate 1M: 218.5 MB (store 99.9 MB; phases: records 169, summary 218, timeline 217)
  The 250 MB bound is for this benchmark; with --workers each worker adds ~45-60 MB.

2026-12-01, where it goes (a 300k-request run, 8 tokens, one process, /proc/self/smaps sampled
every 60 s from a thread in the run's process; peak 132.8 MB, 237 s):
  heap (brk) flat at 15-16 MB and pymalloc's 1 MiB arenas flat at 9-10 MB the whole run:
  finished Records and per-request objects do not pile up. The growth is all in anonymous
  mappings over 1 MiB (numpy and array buffers): 24 MB at ~76k requests, 35 MB at ~150k, 43 MB
  at ~230k, about twice the store's columns at each point; ~24 MB of it, in two 11 and 13 MiB
  mappings, is there 20 s into a run (25k requests, store ~3 MB). Those two mappings are the
  next thing to explain (over-allocated array buffers moved by mremap? a live-line or monitor
  buffer?). The end-of-run passes add ~30 MB on top (99 MB during the run, 132.8 MB peak).
  tracemalloc (all domains, numpy's included) in a 40k run traced 22.7 MB at 15 s and 31.1 MB
  at 35 s while RSS was ~90 MB: most of those mappings are not Python, array or numpy memory
  (C libraries: uvloop/libuv, orjson, OpenSSL?). MALLOC_ARENA_MAX=1 changed nothing at 40k
  (94.7 vs 94.3 MB peak), so they are not per-thread malloc arenas.
  asyncio's loop instead of uvloop (LLMBENCH_LOOP=asyncio): 92.8 vs 94.6 MB at 40k, not uvloop.

2026-12-01, the session after: the 250 MB bound met. What the 60 MB was, and what changed
(real 1M x 8 tokens, one process, `--requests 1000000 --phases`):
  The "two 11 and 13 MiB mappings" above were pymalloc's 1 MiB arenas, which the kernel shows
  as one mapping when they lie side by side, and ~20 MB of them were the diagnostic's own (it
  read /proc/self/smaps into one string every minute); sampled from outside the process, RSS
  during the run was imports (~76 MB: shared objects 25, heap 16, arenas ~35) + the store, no
  more, at every point. The 60 MB appeared at the end: by_done (records put in order of done)
  found 793 of 200,000 records out of place (none by more than 29) and reordered everything;
  its reorder wrote each column of one value (status, max_tokens, ... ~18 of them) out whole,
  because the up to 65,535 values appended since the last look were not folded yet: +41 MB,
  kept to the end of the run. Now:
  - token events as each record's first value and its gaps, 1-2 bytes each
    (llmbench/records/token_events.py): store 99.9 -> 85 MB (8-token replies; 20 ms gaps take
    2 bytes, so long replies halve)
  - reorder writes only the records that move, folds one-value columns first, lets old token
    chunks go as it goes; the summary folds them too (no int64 copies of turn/cached_tokens)
  - the report reads ITLs as int32 µs and floats only a chart's sample; the live line's recent
    TTFTs are two float arrays; the timeline's pairs one complex array sorted in place
  - passes read token events in blocks of about the same number of events whatever the reply
    length (20,000 x 128 tokens: 147.8 -> 90.5 MB peak)
  peak by phase (MB), before -> after:  end of requests 158.5 (store 85.0), by_done 218.8 ->
  (folded), summary 241.7 -> 189.2, record_checks 231.2 -> 170.3, timeline 231.6 -> 190.6,
  report 186.6 -> 189.0; whole run 260.0 -> 192.9 MB (records 1000000 == requests; 1183 s
  while other work shared the machine; 192.2 MB in 758 s quiet, one commit earlier)

  python scripts/bench_memory.py --simulate 1000000 [--simulate-streams 2]
  python scripts/bench_memory.py --requests 300000 --workers 2
  python scripts/bench_memory.py --requests 1000000 --phases    # the end-of-run passes' peaks
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLMBENCH = [sys.executable, "-c", "import sys; from llmbench.cli.app import main; sys.exit(main())"]


def start_mock(tokens: int, workers: int = 1) -> tuple[subprocess.Popen[str], str]:
    cmd = LLMBENCH[:] + ["mock", "--ttft-ms", "0", "--itl-ms", "0", "--tokens", str(tokens),
                         "--port", "0", "--parallel", "0"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    # "llmbench mock 0 on http://127.0.0.1:PORT  (OpenAI: .../v1, Ollama: ...)"
    if " on http" not in line:
        proc.kill()
        raise SystemExit(f"the mock did not start: {line!r}")
    url = line.split(" on ", 1)[1].split()[0]
    return proc, url


def descendants(pid: int) -> list[int]:
    """Child processes of ``pid`` (recursively), from /proc."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                kids = [int(x) for x in fh.read().split()]
        except OSError:
            continue
        out.extend(kids)
        todo.extend(kids)
    return out


def hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


PHASES = ("during_run", "before_records", "records", "by_done", "summary", "peak_in_flight",
          "record_checks", "run_json", "timeline", "report")


def run_once(url: str, requests: int, tokens: int, concurrency: int, out: Path,
             workers: str = "1", phases: bool = False) -> dict:
    head = [sys.executable, __file__, "--child-phases"] if phases else LLMBENCH[:]
    cmd = head + ["run", "--url", url + "/v1", "--model", "mock",
                         "--requests", str(requests), "--concurrency", str(concurrency),
                         "--workers", workers,
                         "--prompt-tokens", "8", "--output-tokens", str(tokens),
                         "--tokenizer", "approx", "--server-probe", "off", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    phases_file = out.parent / f"phases-{requests}.json"
    if phases:
        env["BENCH_MEMORY_PHASES"] = str(phases_file)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    kids_hwm: dict[int, int] = {}
    main_hwm = [0]
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.5):
            main_hwm[0] = max(main_hwm[0], hwm_kb(proc.pid))
            for k in descendants(proc.pid):
                kids_hwm[k] = max(kids_hwm.get(k, 0), hwm_kb(k))
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    th.join()
    wall_s = time.perf_counter() - t0
    if proc.returncode != 0:
        print(stdout[-2000:], file=sys.stderr)
        raise SystemExit(f"llmbench run exited {proc.returncode}")
    run_dir = max((p for p in out.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    with open(run_dir / "requests.jsonl", "rb") as fh:
        lines = sum(1 for _ in fh)
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    main_kb = max(usage.ru_maxrss, main_hwm[0])      # ru_maxrss is in KiB on Linux
    ph = json.loads(phases_file.read_text()) if phases else {}
    if ph:
        # each phase started a new peak (clear_refs), which resets ru_maxrss too
        main_kb = max(main_kb, max(ph.values()) * 1024)
    return {"phases": ph,"requests": requests, "records": lines, "summary_requests": summary["requests"],
            "completed": summary["completed"], "peak_rss_mb": (main_kb + sum(kids_hwm.values())) / 1024,
            "main_mb": main_kb / 1024, "children": len(kids_hwm), "wall_s": wall_s,
            "children_mb": [round(v / 1024, 1) for v in kids_hwm.values()],
            "cpu_s": usage.ru_utime + usage.ru_stime}


# -- a simulated run: the end of a long run without waiting for it ------------------------------

def _hwm_kb() -> int:
    return hwm_kb(os.getpid())


def _reset_hwm() -> None:
    """Start a new peak (Linux: writing 5 to clear_refs resets VmHWM to the current RSS)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _made_up(n: int, tokens: int, rng: random.Random):
    """N records of a closed loop at concurrency 32 against a zero-delay server, in the order
    they finish (as a session appends them)."""
    import heapq
    from llmbench.records.record import Record
    free = [(1000.0 + u * 1e-4, u) for u in range(32)]      # (next start, user)
    heapq.heapify(free)
    finished: list[tuple[float, int, Record]] = []
    for i in range(n):
        start, u = heapq.heappop(free)
        while finished and finished[0][0] <= start:
            yield heapq.heappop(finished)[2]
        sent = start + rng.uniform(1e-4, 5e-3)
        first = sent + rng.uniform(2e-4, 8e-3)
        times = [first]
        for _ in range(tokens - 1):
            times.append(times[-1] + (0.0 if rng.random() < 0.6 else rng.uniform(1e-4, 3e-3)))
        done = times[-1] + 1e-4
        heapq.heappush(free, (done + 2e-5, u))
        rec = Record(f"60478-{i}", start - 1e-5, start, sent, first, times[-1], done, times,
                     None, True, 200, None, None, 13, "server", tokens, "server", None,
                     "length", "replica-0", round(rng.uniform(0.05, 0.3), 3), None, True,
                     u, f"syn-{i}", 0, None, False, None, tokens)
        heapq.heappush(finished, (done, i, rec))
    while finished:
        yield heapq.heappop(finished)[2]


def watch_phases():
    """Wrap the end-of-run passes of ``llmbench run`` so that each records its own peak RSS:
    (phases, phase) where ``phase(name, fn)`` wraps another function the same way."""
    sys.path.insert(0, str(ROOT))
    from llmbench.analysis import checks, finish, metrics
    from llmbench.report import auto
    from llmbench.results.schema import Run
    phases: dict[str, float] = {}

    def phase(name: str, fn):
        def wrapped(*a, **k):
            _reset_hwm()
            try:
                return fn(*a, **k)
            finally:
                phases[name] = max(phases.get(name, 0.0), _hwm_kb() / 1024)
        return wrapped
    metrics.summarize = phase("summary", metrics.summarize)
    metrics.peak_in_flight = phase("peak_in_flight", metrics.peak_in_flight)
    checks.record_checks = phase("record_checks", checks.record_checks)
    Run.save = phase("run_json", Run.save)      # type: ignore[method-assign]
    finish.timeline = phase("timeline", finish.timeline)
    auto.write_report = phase("report", auto.write_report)
    return phases, phase


def phases_child(argv: list[str]) -> None:
    """``llmbench run`` for real, in this process, with the peak RSS of the run itself
    ("during_run": imports, preflight and every request) and of each end-of-run pass written
    as one JSON line to the file BENCH_MEMORY_PHASES names."""
    phases, phase = watch_phases()
    from llmbench.cli.app import app as cli_app
    from llmbench.load.harness import Harness
    Harness.run = phase("during_run", Harness.run)      # type: ignore[method-assign]
    sys.argv = ["llmbench", *argv]
    try:
        cli_app()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    with open(os.environ["BENCH_MEMORY_PHASES"], "w") as fh:
        fh.write(json.dumps(phases) + "\n")
    sys.stdout.flush()
    os._exit(code if isinstance(code, int) else 1)


def simulate_child(n: int, out: Path, tokens: int, workers: int) -> None:
    """In this process: ``llmbench run`` through the real CLI and commands, with the harness's
    run replaced by N made-up records (a closed loop at concurrency 32 against a zero-delay
    server: 1-15 ms per request), written to requests.jsonl and kept in a RecordStore as the
    harness does (``workers`` > 1: arriving in batches of 256 from that many streams, not in
    order of ``done``, as the coordinator gets them). Prints one JSON line: the peak RSS of
    each end-of-run phase and of the whole process."""
    sys.path.insert(0, str(ROOT))
    from llmbench.cli.app import app as cli_app
    from llmbench.load.harness import Harness, Outcome
    from llmbench.records.record import Record, RecordLog
    from llmbench.records.store import RecordStore, by_done
    from llmbench.load.shapes.base import LiveState
    phases, phase = watch_phases()

    def fake_run(self, shape, targets):
        phases["before_records"] = _hwm_kb() / 1024
        if os.environ.get("BENCH_MEMORY_TRACE"):
            import tracemalloc
            snap = tracemalloc.take_snapshot()
            for st in snap.statistics("traceback")[:8]:
                print(st, file=sys.stderr)
                for line in st.traceback.format()[-12:]:
                    print("   ", line, file=sys.stderr)
        _reset_hwm()
        rng = random.Random(1)
        log = RecordLog(self.run_dir / "requests.jsonl")
        pending: list[list[Record]] = [[] for _ in range(max(workers, 1))]
        arrived = RecordStore()
        for i, rec in enumerate(_made_up(n, tokens, rng)):
            if workers > 1:
                w = i % workers
                rec.worker = w
                pending[w].append(rec)
                if len(pending[w]) >= 256:          # a worker's batch arrives
                    for r in pending[w]:
                        arrived.append(r)
                        log.append(r)
                    pending[w] = []
            else:
                arrived.append(rec)
                log.append(rec)
        for p in pending:
            for r in p:
                arrived.append(r)
                log.append(r)
        log.close()
        phases["records"] = _hwm_kb() / 1024
        phases["store_mb"] = arrived.nbytes() / 1024 / 1024
        _reset_hwm()
        records = phase("by_done", by_done)([arrived])
        del arrived
        self.started_at, self.t0_perf = 0.0, 1000.0
        return Outcome(1000.0, records, 0.0, 1000.0, False, [], {}, LiveState(), None)

    Harness.run = fake_run                              # type: ignore[method-assign]
    argv = ["run", "--url", "http://127.0.0.1:9/v1", "--model", "mock", "--requests", str(n),
            "--concurrency", "32", "--prompt-tokens", "8", "--output-tokens", str(tokens),
            "--tokenizer", "approx", "--server-probe", "off", "--out", str(out)]
    sys.argv = ["llmbench", *argv]
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli_app()                   # not main(): it leaves by os._exit
        except SystemExit:
            pass
    # clear_refs resets ru_maxrss too: the process's peak is the highest phase's
    phases["process_peak"] = max(v for k, v in phases.items() if k != "store_mb")
    print(json.dumps(phases))


def simulate(n: int, tokens: int, workers: int, limit_mb: float) -> None:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, __file__, "--child-simulate", str(n), d, str(tokens), str(workers)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall_s = time.perf_counter() - t0
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"the simulation exited {out.returncode}")
        ph = json.loads(out.stdout.strip().splitlines()[-1])
        run_dir = next(p for p in Path(d).iterdir() if p.is_dir())
        with open(run_dir / "requests.jsonl", "rb") as fh:
            lines = sum(1 for _ in fh)
        summary = json.loads((run_dir / "run.json").read_text())["summary"]
    ok = lines == n == summary["requests"]
    order = PHASES
    print(f"simulated {n} requests x {tokens} tokens ({workers} arrival streams), one process: "
          f"peak RSS {ph['process_peak']:.1f} MB, store {ph['store_mb']:.1f} MB, records "
          f"{lines} {'==' if ok else '!='} requests [{wall_s:.0f} s]  "
          f"{'OK' if ok and ph['process_peak'] < limit_mb else 'FAIL'}")
    print("  peak by phase (MB): " + ", ".join(f"{k} {ph[k]:.1f}" for k in order if k in ph))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-phases":
        phases_child(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child-simulate":
        n, out, tokens, workers = sys.argv[2:6]
        simulate_child(int(n), Path(out), int(tokens), int(workers))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, nargs="+", default=[20000, 100000])
    ap.add_argument("--output-tokens", type=int, default=8, help="reply length (tokens)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--workers", default="1", help="llmbench run --workers N|auto (their peaks "
                    "are added to the coordinator's)")
    ap.add_argument("--mock-workers", type=int, default=1, help="llmbench mock --workers N")
    ap.add_argument("--limit-mb", type=float, default=250.0)
    ap.add_argument("--simulate", type=int, metavar="N",
                    help="no server: N made-up records through the real end of a run, in one "
                         "process; peak RSS by phase")
    ap.add_argument("--phases", action="store_true",
                    help="the real run in one process, with the peak RSS of the run itself and "
                         "of each end-of-run pass")
    ap.add_argument("--simulate-streams", type=int, default=1, metavar="K",
                    help="with --simulate: records arrive from K workers, out of order")
    a = ap.parse_args()
    if a.simulate:
        simulate(a.simulate, a.output_tokens, a.simulate_streams, a.limit_mb)
        return
    if a.phases and a.workers != "1":
        raise SystemExit("--phases: one process only (--workers 1)")
    mock, url = start_mock(a.output_tokens, a.mock_workers)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as d:
            for n in a.requests:
                r = run_once(url, n, a.output_tokens, a.concurrency, Path(d) / str(n),
                             a.workers, a.phases)
                rows.append(r)
                ok = r["records"] == n == r["summary_requests"]
                print(f"{n:>9} requests x {a.output_tokens} tokens: peak RSS {r['peak_rss_mb']:6.1f} MB"
                      f" (main {r['main_mb']:.1f}, {r['children']} child processes"
                      f"{' ' + str(r['children_mb']) if r['children'] else ''})  "
                      f"records {r['records']} {'==' if ok else '!='} requests  "
                      f"[{r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU, "
                      f"{n / r['wall_s']:.0f} req/s]"
                      f"  {'OK' if ok and r['peak_rss_mb'] < a.limit_mb else 'FAIL'}", flush=True)
                if r["phases"]:
                    print("  peak by phase (MB): " + ", ".join(
                        f"{k} {r['phases'][k]:.1f}" for k in PHASES if k in r["phases"]))
    finally:
        mock.terminate()
        mock.wait(5)
    if len(rows) >= 2:
        a0, b0 = rows[0], rows[-1]
        slope = (b0["peak_rss_mb"] - a0["peak_rss_mb"]) / (b0["requests"] - a0["requests"])
        print(f"slope: {slope * 1e5:.1f} MB per 100k requests "
              f"({slope * 1024 * 1024:.0f} bytes per request)")


if __name__ == "__main__":
    main()
