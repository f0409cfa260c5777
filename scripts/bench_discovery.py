"""How long the look for local LLM servers takes (servers/local.py; issue 46's goal: under 2 s
when nothing answers, about a second in all), printed as figures: nothing listening on the
usual ports' count of free ports, then mocks on some of them, then a port that accepts and
never answers HTTP (bounded by the deadline).

    python scripts/bench_discovery.py
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmbench.mock_server import MockConfig, MockServer  # noqa: E402
from llmbench.servers import local  # noqa: E402
from llmbench.servers.ports import free_port  # noqa: E402


def timed(ports: list[int], n: int = 5) -> tuple[float, float, int]:
    os.environ[local.PORTS_ENV] = ",".join(map(str, ports))
    times, found = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        found = len(local.find())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times), found


def main() -> None:
    free = [free_port() for _ in range(len(local.USUAL_PORTS))]
    med, worst, n = timed(free)
    print(f"nothing listening ({len(free)} ports): median {med * 1000:.1f} ms, worst "
          f"{worst * 1000:.1f} ms, found {n}")
    mocks = [MockServer(MockConfig(flavour=f, models=["m"])).__enter__()
             for f in ("ollama", "vllm")]
    try:
        ports = [int(m.url.rsplit(":", 1)[1]) for m in mocks] + free[2:]
        med, worst, n = timed(ports)
        print(f"two mocks among {len(ports)} ports: median {med * 1000:.1f} ms, worst "
              f"{worst * 1000:.1f} ms, found {n}")
    finally:
        for m in mocks:
            m.__exit__(None, None, None)
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(16)                 # accepts, never answers
    try:
        med, worst, n = timed([mute.getsockname()[1]] + free[1:], n=2)
        print(f"one port that never answers: median {med:.2f} s, worst {worst:.2f} s (deadline "
              f"{local.DEADLINE_S:g} s), listed {n} with a note")
    finally:
        mute.close()


if __name__ == "__main__":
    main()
