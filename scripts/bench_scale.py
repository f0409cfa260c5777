"""Accuracy at scale, through the real CLI: `llmbench run --workers N|auto` against the mock's
send-time log (issue 12's acceptance).

The mock (optionally `--mock-workers` processes behind one port) logs, per request, its arrival
stamp and the send time of every event (perf_counter_ns: CLOCK_MONOTONIC, shared by the
processes of one host). `llmbench run` (a child process, with its worker processes) writes
requests.jsonl. Per request, matched by x-request-id:
  - TTFT error = client TTFT - (mock's first send - mock's arrival stamp): the client's own send
    delay is in the error, as it is in the TTFT a user reads,
  - client start -> server arrival (the send delay as the server saw it),
  - ITL p99, client vs server,
  - mean requests in flight (sum of request times / the measured window),
  - CPU of llmbench's processes (the CLI and its workers: os.wait4 of the child), per event.

  python scripts/bench_scale.py --streams 128 --workers 1,auto --seconds 15
  python scripts/bench_scale.py --streams 256 --itl-ms 50 --workers auto --mock-workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmbench.mock_server import MockProcess, make_config  # noqa: E402
from llmbench.mock_server.recorder import read_log  # noqa: E402


def run_cli(url: str, streams: int, seconds: float, tokens: int, workers: str,
            out: Path) -> tuple[float, float]:
    """(CPU seconds of llmbench's processes, wall seconds)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}
    cmd = [sys.executable, "-m", "llmbench.cli", "run", "--url", url + "/v1", "--model", "mock",
           "--concurrency", str(streams), "--duration", f"{seconds:g}s",
           "--warmup", str(streams), "--prompt-tokens", "16", "--output-tokens", str(tokens),
           "--workers", workers, "--server-probe", "off", "--no-progress",
           "--out", str(out)]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    stdout, stderr = p.stdout.read(), p.stderr.read()   # type: ignore[union-attr]
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 4):      # 4: llmbench flagged its own numbers (reported below)
        raise SystemExit(f"llmbench run failed ({code}):\n{stdout}\n{stderr}")
    return ru.ru_utime + ru.ru_stime, wall


def measure(a: argparse.Namespace, streams: int, workers: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "send.jsonl")
        cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens)
        out = Path(d) / "out"
        with MockProcess(cfg, record=log, workers=a.mock_workers) as m:
            cpu, wall = run_cli(m.url, streams, a.seconds, a.tokens, workers, out)
        sent = {e["request_id"]: e for e in read_log(log)}
        run_dir = next(p for p in out.iterdir() if p.is_dir())
        run = json.loads((run_dir / "run.json").read_text())
        recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in recs if not r.get("warmup")]
    ok = [r for r in measured if r.get("ok") and r["request_id"] in sent]
    cli_gaps, srv_gaps, ttft_err, to_arrival, err_handler = [], [], [], [], []
    events = 0
    for r in ok:
        e = sent[r["request_id"]]
        ns = np.asarray(e["event_ns"], dtype=float) / 1e9
        t = r["start"] + np.asarray(r["token_us"], dtype=float) / 1e6
        if len(ns) != len(t) or not len(t):
            continue
        arrival = e["arrival_ns"] / 1e9
        events += len(t)
        cli_gaps.extend(np.diff(t))
        srv_gaps.extend(np.diff(ns))
        ttft_err.append((t[0] - r["start"]) - (ns[0] - arrival))
        to_arrival.append(arrival - r["start"])
        handler = e.get("handler_ns", e["arrival_ns"]) / 1e9
        err_handler.append((t[0] - r["start"]) - (ns[0] - handler))
    lo = min(r["start"] for r in measured)
    hi = max(r["done"] for r in measured)
    in_flight = sum(r["done"] - r["start"] for r in measured) / max(hi - lo, 1e-9)
    ms = lambda v, p: float(np.percentile(v, p) * 1000) if len(v) else float("nan")  # noqa: E731
    mon = run.get("monitor") or {}
    return {"streams": streams, "records": len(recs), "mock_log": len(sent),
            "workers": (run.get("workers") or {}).get("count", workers),
            "requests": len(ok), "start_arrival_p50": ms(to_arrival, 50),
            "start_arrival_p99": ms(to_arrival, 99), "ttft_err_p50": ms(ttft_err, 50),
            "ttft_err_p99": ms(ttft_err, 99), "handler_err_p50": ms(err_handler, 50),
            "handler_err_p99": ms(err_handler, 99), "itl_p99_cli": ms(cli_gaps, 99),
            "itl_p99_srv": ms(srv_gaps, 99), "in_flight": in_flight,
            "send_delay_p99": (run.get("summary") or {}).get("p99_send_delay_ms"),
            "flagged": bool(mon.get("overloaded")),
            "why": (f"lag p99 {mon.get('lag_p99_ms', 0):.0f} ms, CPU {mon.get('cpu_pct', 0):.0f}%"
                    + (", send delay" if mon.get("send_delay_over") else "")), "cpu_s": cpu, "wall_s": wall,
            "us_per_event_all": cpu / max(events, 1) * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="128")
    ap.add_argument("--workers", default="1,auto", help="comma list of --workers values")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--mock-workers", type=int, default=1)
    a = ap.parse_args()
    print(f"event every {a.itl_ms:g} ms, TTFT {a.ttft_ms:g} ms, {a.tokens} events per request, "
          f"{a.seconds:g} s, mock workers {a.mock_workers}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("errors are client - server; the server's TTFT is first send - its arrival stamp "
          "(when the request's first bytes were read from the socket); 'vs handler': measured "
          "from when the mock's handler started instead (includes the mock's own intake delay)")
    print(f"{'streams':>7} {'workers':>7} {'reqs':>6} {'start->arr p50/p99':>19} "
          f"{'TTFT err p50/p99':>17} {'vs handler':>17} {'ITL p99 cli/srv':>17} {'in flight':>9} "
          f"{'send p99':>8} {'flagged':>7} {'us/ev all':>9} {'records/mock log':>16}")
    for n in [int(x) for x in a.streams.split(",")]:
        for w in a.workers.split(","):
            r = measure(a, n, w)
            print(f"{n:>7} {str(r['workers']):>7} {r['requests']:>6} "
                  f"{r['start_arrival_p50']:8.2f}/{r['start_arrival_p99']:<10.2f} "
                  f"{r['ttft_err_p50']:+8.2f}/{r['ttft_err_p99']:<+8.2f} "
                  f"{r['handler_err_p50']:+8.2f}/{r['handler_err_p99']:<+8.2f} "
                  f"{r['itl_p99_cli']:8.2f}/{r['itl_p99_srv']:<8.2f} {r['in_flight']:9.1f} "
                  f"{r['send_delay_p99'] or float('nan'):8.2f} {str(r['flagged']):>7} "
                  f"{r['us_per_event_all']:9.1f} {r['records']:>7}/{r['mock_log']:<8} "
                  f"({r['why']})", flush=True)


if __name__ == "__main__":
    main()
