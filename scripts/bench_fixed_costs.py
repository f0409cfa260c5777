"""llmbench's fixed costs: CPU spent before the first request, and in all for a small run.

The mock runs as its own process (``llmbench mock``) behind a small proxy in this script; only
llmbench's process (and anything it waits for) is counted:
  - import: ``python -c "import llmbench.cli.app"``,
  - before the first request: llmbench's CPU (/proc/PID/stat, 10 ms ticks) when the proxy sees
    its first measured request (the preflight's request is counted before it),
  - total: the whole of ``llmbench run --requests 20 --concurrency 1`` (os.wait4's rusage,
    user + system, children included).
Goals (issue 12): <= 1 s before the first request, <= 1 s in all.

Bytecode: pip compiles an installed package's .pyc files, so a user's llmbench never compiles its
own source at start-up; a source checkout run with PYTHONDONTWRITEBYTECODE=1 (as on the CI
machine) compiles about 70 modules on every start (~0.1 s). The children here keep their
bytecode in a temporary PYTHONPYCACHEPREFIX, written by one uncounted warm-up run, so the
figures are an installed llmbench's; ``--no-bytecode-cache`` measures the cold case.

  python scripts/bench_fixed_costs.py                # 3 repetitions, min and median
  python scripts/bench_fixed_costs.py --repeat 5 --requests 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "LLMBENCH_TOKENIZER": os.environ.get("LLMBENCH_TOKENIZER", "approx")}
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


sys.path.insert(0, str(ROOT))
from llmbench.servers.ports import free_port  # noqa: E402


def proc_cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * TICK_S      # utime + stime


class Proxy:
    """Forwards loopback TCP to the mock; notes llmbench's CPU at its first measured request."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.pid: int | None = None
        self.cpu_at_first: float | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()
        self._ready.wait()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._conn, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        ur, uw = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def pipe(src, dst, watch: bool) -> None:
            try:
                while data := await src.read(65536):
                    if watch and self.cpu_at_first is None and self.pid is not None:
                        low = data.lower()
                        i = low.find(b"x-request-id:")
                        if i >= 0 and not low[i + 13:i + 40].strip().startswith(b"preflight"):
                            self.cpu_at_first = proc_cpu_s(self.pid)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(r, uw, True), pipe(ur, w, False))

    def reset(self, pid: int) -> None:
        self.pid, self.cpu_at_first = pid, None


def cpu_of(cmd: list[str], proxy: Proxy | None = None) -> tuple[float, float | None, int]:
    p = subprocess.Popen(cmd, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    if proxy is not None:
        proxy.reset(p.pid)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        err = p.stderr.read().decode() if p.stderr else ""
        raise SystemExit(f"{' '.join(cmd[2:6])}... failed ({p.returncode}): {err[-400:]}")
    return ru.ru_utime + ru.ru_stime, proxy.cpu_at_first if proxy else None, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="keep the environment's PYTHONDONTWRITEBYTECODE (cold start-up)")
    a = ap.parse_args()
    py = sys.executable
    pycache = tempfile.TemporaryDirectory()
    if not a.no_bytecode_cache:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = pycache.name
    mock_port = free_port()
    mock = subprocess.Popen([py, "-m", "llmbench.cli", "mock", "--port", str(mock_port),
                             "--ttft-ms", "5", "--itl-ms", "1", "--models", "m"],
                            env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", mock_port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        proxy = Proxy(mock_port)
        imports, before, total = [], [], []
        with tempfile.TemporaryDirectory() as out:
            run_cmd = [py, "-m", "llmbench.cli", "run", "--url",
                       f"http://127.0.0.1:{proxy.port}/v1", "--model", "m",
                       "--requests", str(a.requests), "--concurrency", "1",
                       "--prompt-tokens", "32", "--output-tokens", "16", "--out", out]
            if not a.no_bytecode_cache:
                cpu_of(run_cmd)                        # warm-up: writes the bytecode, not counted
            for _ in range(a.repeat):
                imports.append(cpu_of([py, "-c", "import llmbench.cli.app"])[0])
                t, b, _ = cpu_of(run_cmd, proxy)
                total.append(t)
                if b is not None:
                    before.append(b)
    finally:
        mock.terminate()
        mock.wait()
        pycache.cleanup()

    def show(name: str, xs: list[float], goal: str = "") -> None:
        if not xs:
            print(f"{name:<44} -")
            return
        print(f"{name:<44} min {min(xs):5.2f} s  median {statistics.median(xs):5.2f} s{goal}")

    print(f"{os.cpu_count()} cores, {a.repeat} repetitions, CPU seconds (user + system), "
          f"{'no bytecode cache' if a.no_bytecode_cache else 'bytecode cached (as installed)'}, "
          f"load average {os.getloadavg()[0]:.1f}")
    show("import llmbench.cli.app", imports)
    show("run: before the first measured request", before, "   (goal <= 1 s)")
    show(f"run: {a.requests} requests at concurrency 1, in all", total, "   (goal <= 1 s)")


if __name__ == "__main__":
    main()
