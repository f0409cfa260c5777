"""Telemetry for the tests (issue 39): samples as servers.telemetry writes them (a local
/proc sample of a server and llmbench, a GPU sample of two GPUs), and a DCGM exporter's
recorded page served on loopback (``Dcgm``), filled in for each scrape's moment."""

from __future__ import annotations

import asyncio
import threading
import time

from llmbench.servers.ports import free_port
from tests.helpers import ROOT

FIX = ROOT / "tests" / "fixtures" / "telemetry"


def local(t, server_cpu, gen_cpu, busy, total, pid=100, cpus=2, rss=1 << 30):
    return {"source": "local", "t": t,
            "server": {"pid": pid, "pids": 1, "cpu_s": server_cpu, "rss_bytes": rss, "threads": 5},
            "llmbench": {"pid": 1, "pids": 1, "cpu_s": gen_cpu, "rss_bytes": 1 << 26, "threads": 3},
            "machine": {"cpus": cpus, "busy_s": busy, "idle_s": total - busy, "steal_s": 0.0,
                        "total_s": total, "mem_total_bytes": 8 << 30,
                        "mem_available_bytes": 6 << 30}}


def gpu_sample(t, energy=True, **kw):
    g0 = {"gpu": "0", "name": "NVIDIA L40S", "util_pct": 90.0, "power_w": 300.0,
          "fb_used_mib": 30000.0, "fb_free_mib": 16000.0}
    g1 = {"gpu": "1", "name": "NVIDIA L40S", "util_pct": 70.0, "power_w": 100.0,
          "fb_used_mib": 10000.0, "fb_free_mib": 36000.0}
    if energy:
        g0["energy_mj"] = int(1e9 + 300_000 * t)        # 300 W as a counter
        g1["energy_mj"] = int(2e9 + 100_000 * t)
    g0.update(kw)
    return {"source": "gpu", "t": float(t), "via": "dcgm", "gpus": [g0, g1]}


class Dcgm:
    """The recorded DCGM page, each scrape filled in for its moment: two GPUs at constant
    power (310 W and 190 W), their energy counters growing at exactly that rate (mJ), so the
    hand computation of the energy over any window is 500 W x its length."""

    POWER = (310.0, 190.0)
    E0 = (31035686671, 29000000000)

    def __init__(self, counters: bool = True, xid: int = 0) -> None:
        from aiohttp import web
        self.counters, self.xid, self.scrapes = counters, xid, 0
        self.t0 = time.perf_counter()
        template = (FIX / "dcgm_exporter_template.prom").read_text()
        if not counters:
            template = "\n".join(ln for ln in template.splitlines()
                                 if "TOTAL_ENERGY" not in ln) + "\n"
        self.template = template

        async def metrics(request):
            self.scrapes += 1
            t = time.perf_counter() - self.t0
            fill = {"power0": self.POWER[0], "power1": self.POWER[1],
                    "energy0": int(self.E0[0] + self.POWER[0] * 1000 * t),
                    "energy1": int(self.E0[1] + self.POWER[1] * 1000 * t),
                    "util0": 96, "util1": 84, "used0": 30000, "used1": 20000, "free0": 16068,
                    "free1": 26068, "xid1": self.xid}
            text = self.template
            for k, v in fill.items():
                text = text.replace(f"@{k}@", str(v))
            return web.Response(text=text, content_type="text/plain")
        self.app = web.Application()
        self.app.router.add_get("/metrics", metrics)

    def __enter__(self) -> "Dcgm":
        from aiohttp import web
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.runner = web.AppRunner(self.app)
            self.loop.run_until_complete(self.runner.setup())
            self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", self.port).start())
            ready.set()
            self.loop.run_forever()
        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait(10)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
