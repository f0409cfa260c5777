"""Check llmbench's GPU reading end to end against nvidia-smi, on a machine with an NVIDIA GPU.

    pip install 'llmbench[gpu]'
    python scripts/check_gpu.py                          # NVML (--gpu-metrics nvml)
    python scripts/check_gpu.py --dcgm http://localhost:9400/metrics   # and a DCGM exporter
    python scripts/check_gpu.py --url http://localhost:8000/v1 --model M   # and a real run

What it checks, each as a line with the figures and PASS or FAIL:
1. the GPUs llmbench reads (name, driver, memory) are the ones nvidia-smi lists;
2. one reading of utilisation, memory used, power, clocks and temperature agrees with
   nvidia-smi's at the same moment (loose bounds: both sample a moving target);
3. the energy llmbench computes over a window (its sampler, --seconds long, the way a run
   samples: the energy counter's change when the GPU has one, else power integrated) agrees
   with nvidia-smi's power draw integrated over the same window within 10 %; give the GPU
   something to do meanwhile (--load-cmd 'python burn.py', or a run against your server) so the
   comparison is not between two idle readings;
4. with --dcgm, the same from DCGM exporter's page (start it with -c 1000: it collects every
   30 s by default, and a counter that moves every 30 s cannot give a step's energy);
5. with --url, a short llmbench run with --gpu-metrics, printing its energy per output token.

No GPU, no NVML or no nvidia-smi: one line saying which, exit 2. A failed check: exit 1.
The test suite checks the same code on a recorded DCGM page (tests/integration/test_telemetry.py);
this script is for a machine that has the real thing.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmbench.analysis import telemetry as tm  # noqa: E402
from llmbench.servers import gpu  # noqa: E402
from llmbench.servers.telemetry import Telemetry, TelemetrySpec  # noqa: E402

SMI_FIELDS = ("index", "name", "driver_version", "utilization.gpu", "memory.used", "memory.total",
              "power.draw", "clocks.sm", "clocks.mem", "temperature.gpu")
failed: list[str] = []


def smi() -> list[dict[str, str]]:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return [dict(zip(SMI_FIELDS, (c.strip() for c in line.split(","))))
            for line in out.splitlines() if line.strip()]


def num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None             # "[N/A]", "[Not Supported]"


def check(what: str, ok: bool, figures: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {what}: {figures}")
    if not ok:
        failed.append(what)


def close(a: float | None, b: float | None, rel: float, abs_: float) -> bool:
    if a is None or b is None:
        return True             # a field one side does not report is not compared
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)


def compare_reading(source: str, readings: list[dict], ref: list[dict[str, str]]) -> None:
    check(f"{source}: GPU count", len(readings) == len(ref), f"{len(readings)} vs nvidia-smi {len(ref)}")
    for g, s in zip(readings, ref):
        i = s["index"]
        check(f"{source}: GPU {i} name", (g.get("name") or "") == s["name"],
              f"{g.get('name')!r} vs {s['name']!r}")
        if g.get("driver"):
            check(f"{source}: GPU {i} driver", g["driver"] == s["driver_version"],
                  f"{g['driver']} vs {s['driver_version']}")
        total = (g.get("fb_used_mib") or 0) + (g.get("fb_free_mib") or 0)
        check(f"{source}: GPU {i} memory total", close(total, num(s["memory.total"]), 0.02, 64),
              f"{total:.0f} vs {s['memory.total']} MiB (free + used)")
        check(f"{source}: GPU {i} memory used",
              close(g.get("fb_used_mib"), num(s["memory.used"]), 0.05, 256),
              f"{g.get('fb_used_mib')} vs {s['memory.used']} MiB")
        check(f"{source}: GPU {i} power", close(g.get("power_w"), num(s["power.draw"]), 0.15, 15),
              f"{g.get('power_w')} vs {s['power.draw']} W")
        check(f"{source}: GPU {i} utilisation",
              close(g.get("util_pct"), num(s["utilization.gpu"]), 0.0, 25),
              f"{g.get('util_pct')} vs {s['utilization.gpu']} %")
        check(f"{source}: GPU {i} SM clock", close(g.get("sm_clock_mhz"), num(s["clocks.sm"]), 0.1, 50),
              f"{g.get('sm_clock_mhz')} vs {s['clocks.sm']} MHz")
        check(f"{source}: GPU {i} temperature", close(g.get("temp_c"), num(s["temperature.gpu"]), 0, 4),
              f"{g.get('temp_c')} vs {s['temperature.gpu']} C")


class SmiPower(threading.Thread):
    """nvidia-smi's power draw every 0.5 s, summed over the GPUs, stamped with perf_counter."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.points: list[tuple[float, float]] = []
        self.stop_ = threading.Event()

    def run(self) -> None:
        while not self.stop_.is_set():
            t0 = time.perf_counter()
            rows = smi()
            t = (t0 + time.perf_counter()) / 2
            watts = [num(r["power.draw"]) for r in rows]
            if all(w is not None for w in watts):
                self.points.append((t, sum(watts)))     # type: ignore[arg-type]
            time.sleep(max(0.5 - (time.perf_counter() - t0), 0.0))

    def joules(self, a: float, b: float) -> float:
        pts = [p for p in self.points if a <= p[0] <= b]
        return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(pts, pts[1:]))


async def sample(spec: TelemetrySpec, seconds: float) -> Telemetry:
    t = Telemetry(spec)
    stop = asyncio.Event()
    task = asyncio.create_task(t.run(stop))
    await asyncio.sleep(seconds)
    stop.set()
    await task
    return t


def energy_check(source: str, spec: TelemetrySpec, seconds: float) -> None:
    power = SmiPower()
    power.start()
    time.sleep(1.0)
    tel = asyncio.run(sample(spec, seconds))
    time.sleep(0.6)
    power.stop_.set()
    power.join(10)
    for n in tel.notes:
        print(f"note: {n.text}")
    rows = [s for s in tel.samples if s["source"] == "gpu"]
    if len(rows) < 2:
        check(f"{source}: energy over {seconds:g} s", False, f"only {len(rows)} GPU sample(s)")
        return
    a, b = rows[0]["t"], rows[-1]["t"]
    g = tm.gpu_use(tel.samples, a, b)
    ref = power.joules(a, b)
    check(f"{source}: energy over {b - a:.1f} s ({g.energy_source})",
          g.energy_j is not None and close(g.energy_j, ref, 0.10, 5.0),
          f"{g.energy_j:.1f} J vs nvidia-smi's power integrated {ref:.1f} J "
          f"(mean {g.power_w_mean:.0f} W)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dcgm", metavar="URL", help="a DCGM exporter's /metrics to check too")
    ap.add_argument("--seconds", type=float, default=15.0, help="the energy window (default 15)")
    ap.add_argument("--load-cmd", metavar="CMD", help="a command that loads the GPU meanwhile")
    ap.add_argument("--url", help="a server to run llmbench against (--gpu-metrics)")
    ap.add_argument("--model", help="--url's model")
    args = ap.parse_args()
    if shutil.which("nvidia-smi") is None:
        print("check_gpu: nvidia-smi is not on PATH: this needs a machine with an NVIDIA GPU "
              "and its driver")
        return 2
    try:
        reader = gpu.open_local("nvml")
    except gpu.GpuUnavailable as exc:
        print(f"check_gpu: {exc}")
        return 2
    ref = smi()
    print(f"nvidia-smi: {len(ref)} GPU(s): " + "; ".join(f"{r['index']}: {r['name']}, driver "
                                                        f"{r['driver_version']}" for r in ref))
    compare_reading("NVML", reader.read(), ref)
    reader.close()
    load = subprocess.Popen(shlex.split(args.load_cmd)) if args.load_cmd else None
    try:
        energy_check("NVML", TelemetrySpec(gpu="nvml"), args.seconds)
        if args.dcgm:
            from urllib.request import urlopen
            text = urlopen(args.dcgm, timeout=5).read().decode()    # noqa: S310 - the user's URL
            compare_reading("DCGM", gpu.extract_dcgm(text), smi())
            energy_check("DCGM", TelemetrySpec(gpu=args.dcgm), args.seconds)
    finally:
        if load is not None:
            load.terminate()
            load.wait(10)
    if args.url:
        import llmbench
        with tempfile.TemporaryDirectory() as out:
            run = llmbench.run(url=args.url, model=args.model, duration="20s", concurrency=8,
                               gpu_metrics=args.dcgm or "nvml", out=out)
            g = ((run.data.get("telemetry") or {}).get("window") or {}).get("gpu") or {}
            check("a real run's energy per output token", g.get("j_per_token") is not None,
                  f"{g.get('j_per_token')} J/token, {g.get('tokens_per_j')} tokens/J, "
                  f"{g.get('power_w_mean')} W ({g.get('energy_source')}), "
                  f"{g.get('output_tokens')} tokens")
    print(f"\n{len(failed)} check(s) failed" + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
