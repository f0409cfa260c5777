"""Soak test (issue 23): llmbench against the built-in mock for a long time at a modest load.

  python scripts/soak.py                       # 20 minutes, 32 users, think 1 s
  python scripts/soak.py --minutes 2 --out /tmp/soak-smoke.csv

Starts ``llmbench mock`` on a free 127.0.0.1 port (16 slots, TTFT 30 ms, 4 ms between tokens:
32 users thinking 1 s keep ~11 of the 16 slots busy, nothing queued), then one steady level for
the whole time: ``llmbench ramp --users N --ramp-in 10s --hold <rest> --think 1s`` (a single
step; a loose threshold, and a step is only judged after its hold, so nothing stops it early).
Not ``llmbench run --concurrency N --think 1s``: run's closed loop sends a user's next
conversation at once (think only between turns of one conversation, and run has one turn by
default), so it would be 32 users with no think time at all.

Every --interval-s it samples, from outside, the client (``llmbench ramp`` and any process it
starts, summed) and the mock (likewise): resident memory (VmRSS), open descriptors
(/proc/PID/fd) and CPU (utime+stime deltas, % of one core); and counts the lines (and
``"ok":false`` lines) requests.jsonl has grown by. The client's event-loop lag is not written
anywhere while the run goes on: it is taken at the end from the run's timeline.jsonl (the
monitor's per-second lag p99; the CSV's lag_p99_ms is the worst second of each interval) and the
CSV is rewritten with it. Rows go to the CSV as they are taken (a run stopped early keeps them).

At the end: for each series, growth per hour from a least-squares line over the hold's samples
after the warm-up (--warmup-s, default 120 s), with the slope's standard error (OLS; samples 10 s
apart are autocorrelated, so take it as a lower bound), first/last/min/max, and the client RSS
growth the in-memory record store is expected to explain (docs/memory.md). Everything
it started is stopped on exit, Ctrl-C or SIGTERM (each child in its own process group, and told
to die with this process: the client by SIGTERM, the mock by SIGKILL).
"""
from __future__ import annotations

import argparse
import csv
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# docs/memory.md: the record store costs about 105 bytes a request (about 65 in a
# plain run) and at most 4 bytes a token event; gaps under 65.5 ms are sealed as uint16 (2 bytes)
STORE_BYTES_PER_REQUEST = (65, 105)
STORE_BYTES_PER_TOKEN = (2, 4)
# Per second of run, the client also keeps one server-probe sample (a dict, sized from
# server.jsonl at the end) and one MonitorSample (~56 + ~300 bytes of attributes + 4 floats)
MONITOR_SAMPLE_BYTES = 450

SERIES = ["client_rss_mb", "client_anon_mb", "client_fds", "client_cpu_pct", "lag_p99_ms",
          "mock_rss_mb", "mock_anon_mb", "mock_fds", "mock_cpu_pct", "requests_done",
          "errors_done"]
FIELDS = ["t_s", "late_s", "phase", "client_pids", "client_rss_mb", "client_anon_mb",
          "client_fds", "client_cpu_pct", "lag_p99_ms", "mock_rss_mb", "mock_anon_mb", "mock_fds",
          "mock_cpu_pct", "requests_done", "errors_done"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Stop(Exception):
    """A signal asked us to stop."""


def _on_signal(signum, _frame):
    raise Stop(signal.Signals(signum).name)


def _die_with_parent(sig: int):
    """A preexec_fn: the child gets ``sig`` when soak.py dies (even by SIGKILL). Linux only."""
    parent = os.getpid()

    def preexec() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, sig, 0, 0, 0)         # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:              # soak.py died before prctl took hold
            os._exit(1)
    return preexec


def seconds(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|m|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


# ---------------------------------------------------------------- /proc


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(root: int) -> list[int]:
    """root and all its descendants."""
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def read_proc(pid: int) -> tuple[float, float, int, int] | None:
    """(RSS MB, anonymous RSS MB, open fds, utime+stime ticks), None if gone. RssAnon is what a
    leak grows; VmRSS also counts file pages (code, libraries), which the kernel drops under
    memory pressure and faults back in later: a slope of its own that is no leak."""
    try:
        rss_kb = anon_kb = 0
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon_kb = int(line.split()[1])
                    break
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/stat", "rb") as fh:
            f = fh.read().rsplit(b")", 1)[1].split()
        ticks = int(f[11]) + int(f[12])     # fields 14 and 15 (utime, stime)
    except (OSError, IndexError, ValueError):
        return None
    return rss_kb / 1024.0, anon_kb / 1024.0, fds, ticks


class ProcGroup:
    """A process and its descendants, sampled together: RSS and fds summed, CPU from the
    tick deltas of the pids seen in both samples (new pids: all their ticks)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.ticks: dict[int, int] = {}
        self.t: float | None = None

    def sample(self) -> dict[str, float | int | str] | None:
        now = time.perf_counter()
        rss = anon = 0.0
        fds = busy = 0
        ticks: dict[int, int] = {}
        pids = tree(self.root)
        for pid in pids:
            r = read_proc(pid)
            if r is None:
                continue
            rss += r[0]
            anon += r[1]
            fds += r[2]
            ticks[pid] = r[3]
            busy += r[3] - self.ticks.get(pid, 0 if self.t is not None else r[3])
        if not ticks:
            return None
        cpu = (100.0 * busy / CLK_TCK / (now - self.t)) if self.t is not None else float("nan")
        self.ticks, self.t = ticks, now
        return {"rss_mb": rss, "anon_mb": anon, "fds": fds, "cpu_pct": cpu,
                "pids": "+".join(str(p) for p in sorted(ticks))}


class JsonlCounter:
    """Lines and failed lines ("ok":false) requests.jsonl has grown by: reads only what is new."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.offset = 0
        self.lines = 0
        self.failed = 0
        self._tail = b""

    def update(self) -> None:
        if self.path is None or not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        self.offset += len(chunk)
        data = self._tail + chunk
        cut = data.rfind(b"\n") + 1
        whole, self._tail = data[:cut], data[cut:]
        self.lines += whole.count(b"\n")
        self.failed += whole.count(b'"ok":false') + whole.count(b'"ok": false')


# ---------------------------------------------------------------- processes


def start(cmd: list[str], log: Path, orphan_sig: int) -> subprocess.Popen:
    """cmd in its own process group, output to log, sent orphan_sig if soak.py dies."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    fh = open(log, "wb")
    try:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True,
                                preexec_fn=_die_with_parent(orphan_sig))
    finally:
        fh.close()


def stop(p: subprocess.Popen | None, name: str, first: int, grace_s: float) -> None:
    """Signal p's process group (first, then SIGTERM, then SIGKILL) until it has exited."""
    if p is None:
        return
    for sig, wait_s in ((first, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if p.poll() is not None:
            break
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            print(f"soak: {name} still running after {signal.Signals(sig).name}", file=sys.stderr)
    # anything left in its group (a worker that outlived its parent)
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def mock_url(p: subprocess.Popen, log: Path, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if m:
            return f"http://127.0.0.1:{m.group(1)}"
        if p.poll() is not None:
            raise SystemExit(f"soak: the mock exited ({p.returncode}): {log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise SystemExit(f"soak: the mock did not say its port within {timeout_s:.0f} s ({log})")


# ---------------------------------------------------------------- analysis


def fit(t_h: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least squares y = a + b t: (b per hour, its standard error, residual SD)."""
    ok = np.isfinite(y)
    t_h, y = t_h[ok], y[ok]
    if len(y) < 3 or np.ptp(t_h) == 0:
        return float("nan"), float("nan"), float("nan")
    tm = t_h - t_h.mean()
    sxx = float(tm @ tm)
    b = float(tm @ (y - y.mean())) / sxx
    resid = y - y.mean() - b * tm
    s2 = float(resid @ resid) / (len(y) - 2)
    return b, (s2 / sxx) ** 0.5, s2 ** 0.5


def merge_lag(rows: list[dict], perf: list[float], run_dir: Path, t0_perf: float | None) -> int:
    """Fill lag_p99_ms from timeline.jsonl: the worst per-second lag p99 in each interval."""
    tl = run_dir / "timeline.jsonl" if run_dir else None
    if t0_perf is None or tl is None or not tl.exists():
        return 0
    ts, lag = [], []
    for line in tl.read_text().splitlines():
        d = json.loads(line)
        if d.get("lag_p99_ms") is not None:
            ts.append(t0_perf + d["t"])
            lag.append(d["lag_p99_ms"])
    ts_a, lag_a = np.array(ts), np.array(lag)
    filled = 0
    for i, row in enumerate(rows):
        lo = perf[i - 1] if i else -np.inf
        sel = lag_a[(ts_a > lo) & (ts_a <= perf[i])]
        if len(sel):
            row["lag_p99_ms"] = round(float(sel.max()), 3)
            filled += 1
    return filled


def write_csv(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def report(rows: list[dict], rel: list[float], fit_from: float, fit_to: float,
           run_dir: Path | None) -> None:
    t = np.array(rel)
    sel = (t >= fit_from) & (t <= fit_to)
    n = int(sel.sum())
    print(f"\nfit window: {fit_from:.0f} s to {fit_to:.0f} s of the run (hold only, warm-up "
          f"excluded): {n} samples")
    if n < 3:
        print("too few samples in the fit window for a growth figure")
    hdr = (f"{'series':<15}{'first':>10}{'last':>10}{'min':>10}{'max':>10}"
           f"{'growth/h':>12}{'± se':>10}{'resid sd':>10}")
    print(hdr)
    print("-" * len(hdr))
    slopes = {}
    for s in SERIES:
        y = np.array([_num(r[s]) for r in rows])[sel]
        fin = y[np.isfinite(y)]
        if not len(fin):
            print(f"{s:<15}{'(none)':>10}")
            continue
        b, se, sd = fit(t[sel] / 3600.0, y)
        slopes[s] = (b, se)
        print(f"{s:<15}{fin[0]:>10.2f}{fin[-1]:>10.2f}{fin.min():>10.2f}{fin.max():>10.2f}"
              f"{b:>12.3f}{se:>10.3f}{sd:>10.3f}")
    allrss = [_num(r["client_rss_mb"]) for r in rows]
    if allrss:
        print(f"client RSS over everything sampled (incl. the end's summary and report): "
              f"peak {np.nanmax(allrss):.1f} MB")
    late = [r for r in rows if _num(r["late_s"]) > 5]
    if late:
        print(f"{len(late)} samples more than 5 s late (the machine stalled): at "
              + ", ".join(f"{r['t_s']} s (+{r['late_s']})" for r in late[:10]))

    doc = None
    if run_dir is not None and (run_dir / "run.json").exists():
        try:
            doc = json.loads((run_dir / "run.json").read_text())
        except ValueError:
            doc = None
    out_tokens = None
    if doc and doc.get("steps"):
        st = doc["steps"][-1]
        s, mon = st.get("summary", {}), st.get("monitor") or {}
        done, failed = s.get("completed", 0), s.get("failed", 0)
        if done and s.get("total_output_tokens"):
            out_tokens = s["total_output_tokens"] / done
        print(f"\nrun.json ({doc.get('status')}): hold window {done} completed, {failed} failed "
              f"(error rate {s.get('error_rate', 0):.4f}); {st.get('unfinished', 0)} unfinished")
        if mon:
            print(f"  generator monitor over the hold: lag p99 (median second) "
                  f"{mon.get('lag_p99_ms', float('nan')):.2f} ms, lag max "
                  f"{mon.get('lag_max_ms', float('nan')):.1f} ms, CPU "
                  f"{mon.get('cpu_pct', float('nan')):.1f}%, send delay p99 "
                  f"{mon.get('send_delay_p99_ms', float('nan')):.2f} ms, "
                  f"overloaded={mon.get('overloaded')}")
        v = (doc.get("verdict") or {}).get("result")
        if v:
            print(f"  verdict: {v}")
    if rows:
        print(f"requests.jsonl: {rows[-1]['requests_done']} lines, "
              f"{rows[-1]['errors_done']} with ok=false")

    # What the client's RSS is expected to grow by: its record store plus per-second samples
    if "client_rss_mb" in slopes and "requests_done" in slopes:
        req_h = slopes["requests_done"][0]
        tok = out_tokens or 128.0
        lo = req_h * (STORE_BYTES_PER_REQUEST[0] + tok * STORE_BYTES_PER_TOKEN[0]) / 2**20
        hi = req_h * (STORE_BYTES_PER_REQUEST[1] + tok * STORE_BYTES_PER_TOKEN[1]) / 2**20
        probe_b = 0
        sj = run_dir / "server.jsonl" if run_dir else None
        if sj and sj.exists():
            with open(sj) as fh:
                first = fh.readline()
            if first:
                d = json.loads(first)
                probe_b = sys.getsizeof(d) + sum(sys.getsizeof(x) for x in d.values()
                                                 if isinstance(x, float)) + 8
        per_s = 3600 * (probe_b + MONITOR_SAMPLE_BYTES) / 2**20
        b, se = slopes.get("client_anon_mb", slopes["client_rss_mb"])
        print(f"\nclient anonymous RSS growth {b:.2f} ± {se:.2f} MB/h (VmRSS "
              f"{slopes['client_rss_mb'][0]:.2f} ± {slopes['client_rss_mb'][1]:.2f}) at "
              f"{req_h:,.0f} requests/h x {tok:.0f} output tokens")
        if req_h > 0:
            print(f"  record store expected {lo:.2f}-{hi:.2f} MB/h "
                  f"({STORE_BYTES_PER_REQUEST[0]}-{STORE_BYTES_PER_REQUEST[1]} B/request + "
                  f"{STORE_BYTES_PER_TOKEN[0]}-{STORE_BYTES_PER_TOKEN[1]} B/token event)")
            print(f"  per-second samples kept (server probe {probe_b} B + monitor "
                  f"~{MONITOR_SAMPLE_BYTES} B a second): {per_s:.2f} MB/h")
            print(f"  unexplained: {b - hi - per_s:.2f} to {b - lo - per_s:.2f} MB/h; "
                  f"RSS growth per request {b * 2**20 / req_h:.0f} bytes")


def mock_completions(url: str) -> int | None:
    """Requests the mock finished (vllm:request_success_total over every finish reason)."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{"))


def figures(rows: list[dict], rel: list[float], fit_from: float, fit_to: float,
            run_dir: Path | None, mock_done: int | None, command: str) -> None:
    """The soak's figures (issue 49 §4) in a few lines: RSS, bytes per record, lag, errors,
    lost. "B/record" is the goal's figure: the client's RSS growth over the hold divided by
    the records written meanwhile (what each record costs the process); the file's own bytes
    per record are printed beside it."""
    print("\n== soak figures ==")
    print(f"command: {command}")
    if not rows:
        print("no samples")
        return
    t = np.array(rel)
    rss = np.array([_num(r["client_rss_mb"]) for r in rows])
    anon = np.array([_num(r["client_anon_mb"]) for r in rows])
    done = np.array([_num(r["requests_done"]) for r in rows])
    sel = (t >= fit_from) & (t <= fit_to) & np.isfinite(anon)
    print(f"duration: {float(rows[-1]['t_s']):.0f} s sampled, hold fit {fit_from:.0f}-"
          f"{min(fit_to, float(t.max())):.0f} s ({int(sel.sum())} samples)")
    if sel.sum() >= 3:
        first, last = int(np.argmax(sel)), int(len(sel) - 1 - np.argmax(sel[::-1]))
        b_h = fit(t[sel] / 3600.0, anon[sel])[0]
        rate_h = fit(t[sel] / 3600.0, done[sel])[0]
        grown = done[last] - done[first]
        per_rec = b_h * 2**20 / rate_h if rate_h > 0 else float("nan")
        print(f"client RSS: start {rss[first]:.1f} MB, peak {np.nanmax(rss):.1f} MB, end "
              f"{rss[last]:.1f} MB (hold); anon slope {b_h / 60:+.3f} MB/min")
        print(f"RSS per record: {per_rec:.0f} B ({grown:.0f} records over the fit window; "
              f"goal <= 600 B: {'met' if per_rec <= 600 else 'NOT met'})")
    else:
        print(f"client RSS: start {rss[0]:.1f} MB, peak {np.nanmax(rss):.1f} MB, end "
              f"{rss[-1]:.1f} MB; too few hold samples for a slope")
    # the last sample was taken before the client's last writes: count the file itself
    jl = run_dir / "requests.jsonl" if run_dir else None
    n = errors = 0
    if jl is not None and jl.exists():
        with open(jl, "rb") as fh:
            for line in fh:
                n += 1
                errors += b'"ok":false' in line or b'"ok": false' in line
        size = jl.stat().st_size
        print(f"requests.jsonl: {size / 2**20:.1f} MB, {n} records, "
              f"{size / max(n, 1):.0f} B/record on disk")
    lag = [_num(r["lag_p99_ms"]) for r in rows]
    lag = [x for x in lag if np.isfinite(x)]
    if lag:
        print(f"loop lag (per-second p99): median {np.median(lag):.1f} ms, worst {max(lag):.1f} ms")
    oks = n - errors
    line = f"errors: {errors} records with ok=false"
    if mock_done is not None:
        # the mock also counts what llmbench sends before the load (its preflight request)
        line += (f"; the mock finished {mock_done} requests, requests.jsonl holds {oks} ok "
                 f"(difference {mock_done - oks}: the preflight and any record lost)")
    print(line)


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="ramp-in + hold (default 20)")
    ap.add_argument("--users", type=int, default=32)
    ap.add_argument("--think", default="1s", help="llmbench --think (default 1s)")
    ap.add_argument("--out", type=Path, default=None,
                    help="CSV path (default /tmp/soak-<time>.csv)")
    ap.add_argument("--interval-s", type=float, default=10.0)
    ap.add_argument("--warmup-s", type=float, default=120.0, help="left out of the fits")
    ap.add_argument("--ramp-in", type=seconds, default=10.0, metavar="DURATION")
    ap.add_argument("--run-dir", type=Path, default=None,
                    help="where llmbench writes its run folder (default: a new /tmp folder)")
    ap.add_argument("--mock-parallel", type=int, default=16)
    ap.add_argument("--ttft-ms", type=float, default=30.0)
    ap.add_argument("--itl-ms", type=float, default=4.0)
    ap.add_argument("--llmbench", default=None, help="the CLI (default: next to this python)")
    args = ap.parse_args()

    exe = args.llmbench or str(Path(sys.executable).with_name("llmbench"))
    if not Path(exe).exists():
        exe = shutil.which("llmbench") or sys.exit("soak: llmbench not found; use --llmbench")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    csv_path = args.out or Path(f"/tmp/soak-{stamp}.csv")
    base = args.run_dir or Path(tempfile.mkdtemp(prefix=f"soak-{stamp}-", dir="/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    hold_s = max(args.minutes * 60.0 - args.ramp_in, 1.0)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)

    mock = client = None
    rows: list[dict] = []
    perf: list[float] = []          # perf_counter of each row (the same clock as llmbench's)
    rel: list[float] = []           # seconds from the run's t0 (launch until run.json says)
    run_dir: Path | None = None
    t0_perf: float | None = None
    interrupted = None
    mock_done: int | None = None
    try:
        mock = start([exe, "mock", "--host", "127.0.0.1", "--port", "0",
                      "--parallel", str(args.mock_parallel), "--ttft-ms", str(args.ttft_ms),
                      "--itl-ms", str(args.itl_ms)], base / "mock.log",
                     # SIGKILL: its graceful stop waits for streams in flight (up to a minute)
                     signal.SIGKILL)
        url = mock_url(mock, base / "mock.log")
        cmd = [exe, "ramp", "--url", f"{url}/v1", "--users", str(args.users),
               "--ramp-in", f"{args.ramp_in:g}s", "--hold", f"{hold_s:g}s",
               "--think", args.think, "--threshold", "ttft.p95_all<=120s",
               "--wait-ready", "30", "--proxy", "none", "--out", str(base), "--no-progress"]
        print("soak: mock:", " ".join(mock.args), f"-> {url}", flush=True)
        print("soak: client:", " ".join(cmd), flush=True)
        print(f"soak: CSV {csv_path}; run folder under {base}", flush=True)
        launch = time.perf_counter()
        client = start(cmd, base / "client.log", signal.SIGTERM)
        cg, mg = ProcGroup(client.pid), ProcGroup(mock.pid)
        counter = JsonlCounter()
        with open(csv_path, "w", newline="") as fh:
            w = csv.DictWriter(fh, FIELDS)
            w.writeheader()
            k = 0
            while True:
                if run_dir is None:
                    found = sorted(p for p in base.glob("*-ramp") if p.is_dir())
                    if found:
                        run_dir = found[-1]
                        counter.path = run_dir / "requests.jsonl"
                if run_dir is not None and t0_perf is None and (run_dir / "run.json").exists():
                    try:
                        t0_perf = json.loads((run_dir / "run.json").read_text())["t0_perf"]
                    except (ValueError, KeyError):
                        pass
                now = time.perf_counter()
                c, m = cg.sample(), mg.sample()
                counter.update()
                r = now - (t0_perf if t0_perf is not None else launch)
                phase = ("ramp-in" if r < args.ramp_in else "hold" if r <= args.ramp_in + hold_s
                         else "finish")
                row = {"t_s": round(now - launch, 2),
                       "late_s": round(now - (launch + k * args.interval_s), 2), "phase": phase,
                       "client_pids": c["pids"] if c else "",
                       "client_rss_mb": round(c["rss_mb"], 2) if c else "",
                       "client_anon_mb": round(c["anon_mb"], 2) if c else "",
                       "client_fds": c["fds"] if c else "",
                       "client_cpu_pct": round(c["cpu_pct"], 2) if c else "",
                       "lag_p99_ms": "",
                       "mock_rss_mb": round(m["rss_mb"], 2) if m else "",
                       "mock_anon_mb": round(m["anon_mb"], 2) if m else "",
                       "mock_fds": m["fds"] if m else "",
                       "mock_cpu_pct": round(m["cpu_pct"], 2) if m else "",
                       "requests_done": counter.lines, "errors_done": counter.failed}
                if float(row["late_s"]) > args.interval_s / 2:
                    print(f"soak: sample {row['late_s']} s late (the machine stalled?)",
                          flush=True)
                if c is not None:
                    rows.append(row)
                    perf.append(now)
                    rel.append(r)
                    w.writerow(row)
                    fh.flush()
                    if k % 6 == 0:
                        print(f"soak: {now - launch:7.0f} s {phase:<7} client "
                              f"{row['client_rss_mb']} MB (anon {row['client_anon_mb']}) "
                              f"{row['client_fds']} fds "
                              f"{row['client_cpu_pct']}% | mock {row['mock_rss_mb']} MB "
                              f"{row['mock_fds']} fds | {counter.lines} requests "
                              f"{counter.failed} failed", flush=True)
                k += 1
                if client.poll() is not None:
                    mock_done = mock_completions(url)
                    break
                if mock.poll() is not None:
                    print(f"soak: the mock exited ({mock.returncode}) during the run",
                          file=sys.stderr)
                    break
                # the next sample on a fixed schedule (slots missed while the machine stalled
                # are skipped, not caught up in a burst); wake early if the client ends
                k = max(k, int((time.perf_counter() - launch) / args.interval_s) + 1)
                nxt = launch + k * args.interval_s
                while time.perf_counter() < nxt and client.poll() is None:
                    time.sleep(min(0.5, max(nxt - time.perf_counter(), 0)))
    except Stop as exc:
        interrupted = str(exc)
        print(f"\nsoak: {interrupted}: stopping what it started", file=sys.stderr)
    except KeyboardInterrupt:
        interrupted = "SIGINT"
        print("\nsoak: interrupted: stopping what it started", file=sys.stderr)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        # the client first (SIGINT: it ends its run and writes its files), then the mock
        stop(client, "llmbench ramp", signal.SIGINT, 60.0)
        stop(mock, "llmbench mock", signal.SIGTERM, 10.0)
    rc = client.returncode if client is not None else None
    print(f"\nsoak: client exit code {rc}; mock exit code "
          f"{mock.returncode if mock is not None else None}")
    if run_dir is not None:
        print(f"soak: run folder {run_dir} (client log {base / 'client.log'})")
        if t0_perf is None and (run_dir / "run.json").exists():
            try:
                t0_perf = json.loads((run_dir / "run.json").read_text())["t0_perf"]
            except (ValueError, KeyError):
                pass
        if t0_perf is not None:
            rel = [p - t0_perf for p in perf]
        filled = merge_lag(rows, perf, run_dir, t0_perf)
        print(f"soak: event-loop lag from timeline.jsonl for {filled} of {len(rows)} samples"
              if filled else "soak: no timeline.jsonl: event-loop lag only as run.json's figures")
    if rows:
        write_csv(csv_path, rows)
    print(f"soak: CSV {csv_path} ({len(rows)} samples every {args.interval_s:g} s)")
    report(rows, rel, args.warmup_s, args.ramp_in + hold_s, run_dir)
    figures(rows, rel, args.warmup_s, args.ramp_in + hold_s, run_dir, mock_done,
            " ".join(client.args) if client is not None else "")
    return 130 if interrupted else (rc or 0)


if __name__ == "__main__":
    sys.exit(main())
