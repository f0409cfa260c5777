"""--ray figures: Ray's start time, what one coordinator ingests, and Ray vs --workers 2.

  python scripts/bench_ray.py ingest  --actors 2 --records 200000 [--tokens 16]
  python scripts/bench_ray.py compare --concurrency 32 --requests 640 [--ttft-ms 100 --itl-ms 20]

Both start a Ray head of their own on loopback (``ray start --head --block`` on a free port,
as tests/e2e/test_ray.py does) unless ``--address HOST:PORT`` names one, and stop it at the end.

ingest: each actor runs a synthetic worker (sent to it by value) that floods the coordinator
with finished records, batched exactly as the real worker batches them (BATCH per message,
shipped by the link's long poll); the coordinator does, per record, what the Fleet does:
Record.from_json, the clock shift, and one line appended to a requests.jsonl. Reported: records
per second at the coordinator, and the coordinator's CPU per record. The ceiling it shows is
the coordinator's (one Python process), not the cluster's.

compare: the same run against the same mock (a child process), with --workers 2 and with
--ray ADDRESS --workers 2; prints TTFT/ITL/E2EL p50 and p99 of each, and the actors' clock
offsets with their uncertainty.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}


from llmbench.servers.ports import free_port  # noqa: E402


class Head:
    """A Ray head on loopback, started and stopped by its own pid."""

    def __init__(self, cpus: int) -> None:
        self.cpus = cpus

    def __enter__(self) -> str:
        os.environ.update(RAY_ENV)
        self.tmp = tempfile.mkdtemp(prefix="lbray")
        port = free_port()
        exe = Path(sys.executable).parent / "ray"
        self.log = open(Path(self.tmp) / "head.log", "w+")
        t = time.perf_counter()
        self.proc = subprocess.Popen(
            [str(exe), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
             "--num-cpus", str(self.cpus), "--include-dashboard", "false",
             "--disable-usage-stats", "--temp-dir", self.tmp, "--block"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        while "Ray runtime started" not in Path(self.log.name).read_text():
            if self.proc.poll() is not None:
                sys.exit(Path(self.log.name).read_text()[-2000:])
            time.sleep(0.1)
        print(f"ray head started in {time.perf_counter() - t:.1f} s (127.0.0.1:{port})")
        return f"127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# -- ingest ---------------------------------------------------------------------------------
async def flood(spec, channel) -> None:
    """A synthetic worker: ``spec.plan`` = (records, tokens); every record a realistic one."""
    import time as _t
    from llmbench.records.record import Record
    from llmbench.workers.protocol import BATCH
    n, tokens = spec.plan
    wid = spec.worker_id
    channel.send({"type": "ready", "worker": wid})
    while True:
        msg = await channel.recv()
        if msg is None or msg.get("type") == "go":
            break
    now = _t.perf_counter()
    rec = Record("x", scheduled=now, start=now, first_token=now + 0.1, end=now + 0.1 + tokens * 0.02,
                 done=now + 0.1 + tokens * 0.02, token_times=[now + 0.1 + i * 0.02 for i in range(tokens)],
                 ok=True, status=200, prompt_tokens=128, output_tokens=tokens, finish_reason="length",
                 user=1, conversation="c1", turn=0, worker=wid)
    proto = rec.to_json()
    sent = 0
    while sent < n:
        k = min(BATCH, n - sent)
        batch = []
        for i in range(sent, sent + k):
            d = dict(proto)
            d["request_id"] = f"w{wid}-{i}"
            batch.append(d)
        channel.send({"type": "records", "worker": wid, "clock": "worker", "records": batch})
        sent += k
        await asyncio.sleep(0)            # let the actor's poll calls run
    channel.send({"type": "done", "worker": wid, "clock": "worker", "result": None,
                  "interrupted": False})


async def ingest(address: str, actors: int, records: int, tokens: int) -> None:
    from llmbench.records.record import Record, RecordLog
    from llmbench.client.target import make_target
    from llmbench.workers.coordinator import shift
    from llmbench.workers.protocol import WorkerSpec, WorkerTarget
    from llmbench.workers.ray_launcher import RayLauncher, connect
    cluster = connect(address)
    launcher = RayLauncher(cluster, entry=flood)
    target = WorkerTarget(make_target("http://127.0.0.1:9/v1", "m"))
    per = records // actors
    links = [launcher.launch(WorkerSpec(w, (per, tokens), [target])) for w in range(actors)]
    tmp = Path(tempfile.mkdtemp(prefix="lbingest"))
    log = RecordLog(tmp / "requests.jsonl")
    got = [0]
    t_first = [0.0]

    async def pump(link) -> None:
        ready = False
        while True:
            msg = await link.recv()
            if msg is None:
                return
            kind = msg["type"]
            if kind == "ready" and not ready:
                ready = True
                ready_count.append(1)
                if len(ready_count) == actors:
                    t_first[0] = time.perf_counter()
                    for other in links:
                        other.send({"type": "go", "clock": "coordinator", "t0": 0.0})
            elif kind == "records":
                off = link.clock_offset_s
                for d in msg["records"]:
                    log.append(shift(Record.from_json(d), off))
                got[0] += len(msg["records"])
    ready_count: list[int] = []
    cpu0 = time.process_time()
    await asyncio.gather(*(pump(link) for link in links))
    wall = time.perf_counter() - t_first[0]
    cpu = time.process_time() - cpu0
    log.close()
    size = (tmp / "requests.jsonl").stat().st_size
    shutil.rmtree(tmp, ignore_errors=True)
    for link in links:
        await link.close()
    batches = sum(link.batches for link in links)
    print(f"{actors} actors x {per} records ({tokens} token events each): {got[0]} records in "
          f"{wall:.2f} s = {got[0] / wall:,.0f} records/s at the coordinator; coordinator CPU "
          f"{cpu / max(got[0], 1) * 1e6:.1f} us/record; {batches} polls with messages "
          f"({got[0] / max(batches, 1):.0f} records each); {size / got[0]:.0f} bytes/record "
          "on disk")
    assert got[0] == per * actors, "records lost"


# -- compare --------------------------------------------------------------------------------
def compare(address: str, a: argparse.Namespace) -> None:
    from llmbench.mock_server import MockProcess, make_config
    cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, parallel=0)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}
    with MockProcess(cfg) as mock:
        rows = []
        for name, extra in (("--workers 2", []), ("--ray --workers 2", ["--ray", address])):
            out = Path(tempfile.mkdtemp(prefix="lbcmp"))
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "llmbench.cli", "run", "--url",
                                mock.url + "/v1", "--model", cfg.models[0], "--concurrency",
                                str(a.concurrency), "--requests", str(a.requests),
                                "--output-tokens", str(a.tokens), "--prompt-tokens", "32",
                                "--workers", "2", "--out", str(out), *extra],
                               capture_output=True, text=True, env=env, cwd=ROOT)
            wall = time.perf_counter() - t
            if p.returncode != 0:
                sys.exit(f"{name}: exit {p.returncode}: {p.stderr[-2000:]}")
            d = next(x for x in out.iterdir() if x.is_dir())
            run = json.loads((d / "run.json").read_text())
            s = run["summary"]
            rows.append((name, s, wall, run.get("workers", {})))
            shutil.rmtree(out, ignore_errors=True)
    keys = ("median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "median_e2el_ms",
            "p99_e2el_ms")
    print(f"mock: TTFT {a.ttft_ms} ms, {a.itl_ms} ms per token, {a.tokens} tokens; "
          f"{a.concurrency} streams, {a.requests} requests")
    print(f"{'':20s}" + "".join(f"{k:>16s}" for k in keys) + f"{'completed':>11s}{'wall s':>8s}")
    for name, s, wall, _ in rows:
        print(f"{name:20s}" + "".join(f"{s[k]:16.2f}" for k in keys)
              + f"{s['completed']:11d}{wall:8.1f}")
    for wid, info in (rows[1][3].get("ray") or {}).get("workers", {}).items():
        c = info["clock"]
        print(f"actor {wid} on {info.get('host')}: clock offset {c['offset_ms']:+.3f} ms "
              f"± {c['uncertainty_ms']:.3f} ms, drift {c['drift_ppm']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("ingest", "compare"))
    ap.add_argument("--address", help="an existing head's HOST:PORT (default: start one)")
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--requests", type=int, default=640)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    a = ap.parse_args()
    if a.address:
        address = a.address
        run(a, address)
        return
    with Head(cpus=max(a.actors, 2)) as address:
        run(a, address)


def run(a: argparse.Namespace, address: str) -> None:
    if a.mode == "ingest":
        asyncio.run(ingest(address, a.actors, a.records, a.tokens))
    else:
        compare(address, a)


if __name__ == "__main__":
    main()
