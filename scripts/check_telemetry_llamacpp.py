"""Server telemetry against the real llama.cpp server (../shared/realserver/, issue 39).

    python scripts/check_telemetry_llamacpp.py [--port 18610] [--hold 20s] [--threads 1,2]

For -t 1 and -t 2 (four slots each), a ramp of 1, 2 and 4 users with the server found by its
loopback port, while this script reads the server's /proc/PID/stat itself every 0.1 s:
1. each step's process CPU in run.json against this script's own reading over the same hold
   window, and the whole ramp's against /proc before and after (both within 5 %);
2. the ramp saturates the server (four requests batched on its one or two decode threads: the
   gaps between tokens grow) and its verdict names the CPU, with the figures;
3. a ramp at -np 1 (one slot) is limited by its slot: the verdict says queuing and does not
   name the CPU.
Prints the figures, PASS or FAIL per check, and the load average (the machine is shared).
Exit 1 when a check failed, 2 when the real server is not built.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmbench.servers import procfs  # noqa: E402

SERVE = ROOT.parent / "shared" / "realserver" / "serve.sh"
if not SERVE.exists():
    SERVE = Path("/work/shared/realserver/serve.sh")
failed: list[str] = []


def check(what: str, ok: bool, figures: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {what}: {figures}", flush=True)
    if not ok:
        failed.append(what)


class ProcWatch(threading.Thread):
    """The process's CPU seconds from /proc every 0.1 s, stamped with perf_counter."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.points = pid, []
        self.stop_ = threading.Event()

    def run(self) -> None:
        while not self.stop_.is_set():
            st = procfs.read_stat(self.pid)
            if st is None:
                return
            self.points.append((time.perf_counter(), st.cpu_ticks / procfs.CLK_TCK))
            time.sleep(0.1)

    def between(self, a: float, b: float) -> float:
        import numpy as np
        ts, vs = np.array([p[0] for p in self.points]), np.array([p[1] for p in self.points])
        return float(np.interp(b, ts, vs) - np.interp(a, ts, vs))


def serve(port: int, slots: int, threads: int) -> int:
    out = subprocess.run(["bash", str(SERVE), str(port), str(slots), str(threads)],
                         capture_output=True, text=True, timeout=180)
    if out.returncode != 0:
        raise SystemExit(f"serve.sh failed: {out.stderr.strip()}")
    return int(out.stdout.strip().splitlines()[-1])


def ramp(url: str, out: str, hold: str, **kw):
    import llmbench
    return llmbench.ramp(url=url, model="gemma-3-270m", users="1,2,4", ramp_in="2s", hold=hold,
                         think="0", turns=1, prompt_tokens=32, output_tokens=32,
                         generator_lag_limit="2000ms", keep_going=True, out=out, **kw)


def itl_p50(url: str, out: str) -> float:
    import llmbench
    r = llmbench.run(url=url, model="gemma-3-270m", requests=6, concurrency=1, prompt_tokens=32,
                     output_tokens=32, out=out)
    return float(r.summary.itl.median)


def cpu_ramp(port: int, threads: int, hold: str, out: str) -> None:
    pid = serve(port, 4, threads)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        base = itl_p50(url, out)
        # breaks once the gaps grow by half: the batch of four on the decode threads
        limit = 1.4 * base
        print(f"\n-t {threads} -np 4 (pid {pid}): ITL p50 alone {base:.1f} ms; threshold "
              f"itl.p50<={limit:.0f}ms; load average {os.getloadavg()[0]:.2f}", flush=True)
        before = procfs.read_stat(pid).cpu_ticks / procfs.CLK_TCK
        watch = ProcWatch(pid)
        watch.start()
        r = ramp(url, out, hold, threshold=f"itl.p50<={limit:.0f}ms")
        time.sleep(0.3)
        watch.stop_.set()
        watch.join(5)
        after = procfs.read_stat(pid).cpu_ticks / procfs.CLK_TCK
        run = json.loads((Path(r.path) / "run.json").read_text())
        for st in run["steps"]:
            srv = st["telemetry"]["server"]
            mine = watch.between(st["hold_start"], st["hold_end"])
            check(f"-t {threads}: step {st['load']:g} users' process CPU vs /proc",
                  abs(srv["cpu_s"] - mine) <= 0.05 * mine,
                  f"run.json {srv['cpu_s']:.2f} s ({srv['cores']:.2f} cores) vs /proc "
                  f"{mine:.2f} s ({(srv['cpu_s'] / mine - 1) * 100:+.1f} %)")
        w = run["telemetry"]["window"]
        mine = watch.between(w["start"], w["end"])
        check(f"-t {threads}: the whole ramp's process CPU vs /proc",
              abs(w["server"]["cpu_s"] - mine) <= 0.05 * mine,
              f"run.json {w['server']['cpu_s']:.2f} s vs /proc {mine:.2f} s")
        rows = [json.loads(x) for x in (Path(r.path) / "telemetry.jsonl").read_text().splitlines()]
        local = [x for x in rows if x["source"] == "local" and "server" in x]
        sampled = local[-1]["server"]["cpu_s"] - local[0]["server"]["cpu_s"]
        # not a check: before and after include the preflight, and the replies the server
        # still computed after the ramp stopped reading them, outside the samples
        print(f"info  -t {threads}: sampled from the first to the last sample {sampled:.2f} s; "
              f"/proc before and after the ramp {after - before:.2f} s", flush=True)
        v = run["verdict"]
        text = " ".join(v["evidence"])
        print(f"  verdict: {v['result']}")
        for e in v["evidence"]:
            print(f"    {e}")
        check(f"-t {threads}: the saturating ramp names the CPU",
              v["kind"] == "saturation" and v.get("cause") in ("cpu", "machine_cpu")
              and ("CPU was saturated" in text or "CPU is saturated" in text),
              f"kind {v['kind']}, cause {v.get('cause')}")
    finally:
        subprocess.run(["kill", str(pid)])


def slot_ramp(port: int, hold: str, out: str) -> None:
    pid = serve(port, 1, 1)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        print(f"\n-t 1 -np 1 (pid {pid}): load average {os.getloadavg()[0]:.2f}", flush=True)
        r = ramp(url, out, hold, threshold="ttft.p95<=1.5s")
        run = json.loads((Path(r.path) / "run.json").read_text())
        v = run["verdict"]
        print(f"  verdict: {v['result']}")
        for e in v["evidence"]:
            print(f"    {e}")
        text = " ".join(v["evidence"])
        check("-np 1: the ramp limited by its slot does not name the CPU",
              v["kind"] == "queuing" and "cause" not in v and "CPU is saturated" not in text
              and "CPU was saturated" not in text,
              f"kind {v['kind']}, cause {v.get('cause')}")
    finally:
        subprocess.run(["kill", str(pid)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=18610)
    ap.add_argument("--hold", default="20s")
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    if not (Path.home() / ".cache" / "llmbench-realserver" / "bin" / "llama-server").exists():
        print("check_telemetry_llamacpp: the real server is not built (run "
              "shared/realserver/setup.sh)")
        return 2
    with tempfile.TemporaryDirectory() as out:
        for i, t in enumerate(int(x) for x in args.threads.split(",") if x):
            cpu_ramp(args.port + i, t, args.hold, out)
        slot_ramp(args.port + 5, args.hold, out)
    print(f"\nload average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{len(failed)} check(s) failed" + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
