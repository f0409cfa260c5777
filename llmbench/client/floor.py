"""The network floor: the round trip to the server without asking it to generate.

A new connection is opened (TCP, then TLS for https: each timed) and a request the server
answers at once, ``GET /health`` (vLLM, llama.cpp, TGI, SGLang and the mock have it; any
answer, even a 404, is the server's HTTP stack answering without work), is sent ``rounds``
times on it. Its median is what every request pays before the server starts on it; the
connection's set-up is what a new connection adds (analysis/network.py judges the share).

Never stalls a run: every step has a deadline, a failure is a sample with ``error``. Not
measured through a forward proxy (it would time the proxy). Nothing here is on the load's
path: it runs before the load and after it, in its own event loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from llmbench.client import netconfig
from llmbench.client.netconfig import Net

perf_counter = time.perf_counter
FLOOR_PATH = "/health"
ROUNDS = 5
STEP_S = 5.0            # each step's deadline: a server that does not answer costs 5 s at most
MAX_BODY = 65536


@dataclass
class Floor:
    """One measurement (run.json keeps it as results.network.FloorSample, field for field)."""
    when: str = "before"
    path: str = FLOOR_PATH
    status: int | None = None
    connect_ms: float | None = None
    tls_ms: float | None = None
    rounds: int = 0
    rtt_ms: float | None = None          # median of the rounds on the kept connection
    rtt_min_ms: float | None = None
    error: str | None = None


async def _read_response(reader: asyncio.StreamReader) -> int:
    """Read one response (its head and a Content-Length or chunked body); its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP/1 answer: {lines[0][:60]!r}")
    status = int(parts[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in
              (line.partition(":") for line in lines[1:] if ":" in line)}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size > MAX_BODY:
                raise ValueError("a body too large for a health check")
            await reader.readexactly(size + 2)
            if size == 0:
                break
    else:
        n = int(fields.get("content-length", "0") or 0)
        if n > MAX_BODY:
            raise ValueError("a body too large for a health check")
        await reader.readexactly(n)
    if "close" in fields.get("connection", "").lower():
        raise ConnectionResetError("the server closes the connection after each answer")
    return status


async def measure_floor(base_url: str, net: Net | None = None, when: str = "before",
                        headers: dict[str, str] | None = None, rounds: int = ROUNDS,
                        path: str = FLOOR_PATH) -> Floor:
    """One Floor of the server at ``base_url`` (a failure is kept in its ``error``)."""
    net = net or Net()
    u = urlsplit(base_url)
    host, tls = u.hostname or "", u.scheme == "https"
    port = u.port or (443 if tls else 80)
    sample = Floor(when=when, path=path)
    if net.proxy:
        sample.error = "not measured through a forward proxy"
        return sample
    hostport = u.netloc.rpartition("@")[2]
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()
                    if k.lower() in ("authorization", "x-api-key", "api-key"))
    request = (f"GET {path} HTTP/1.1\r\nhost: {hostport}\r\nuser-agent: llmbench\r\n"
               f"accept: */*\r\n{extra}\r\n").encode("latin-1")
    writer = None
    try:
        t0 = perf_counter()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), STEP_S)
        t1 = perf_counter()
        sample.connect_ms = (t1 - t0) * 1000.0
        if tls:
            await asyncio.wait_for(writer.start_tls(net.ssl_context(), server_hostname=host),
                                   STEP_S)
            sample.tls_ms = (perf_counter() - t1) * 1000.0
        rtts = []
        for _ in range(rounds):
            t = perf_counter()
            writer.write(request)
            sample.status = await asyncio.wait_for(_read_response(reader), STEP_S)
            rtts.append((perf_counter() - t) * 1000.0)
            sample.rounds += 1
    except asyncio.TimeoutError:
        sample.error = f"no answer within {STEP_S:g} s"
    except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        sample.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
    finally:
        if writer is not None:
            writer.close()
    if sample.rounds:
        rtts = sorted(rtts)
        n = len(rtts)
        sample.rtt_ms = rtts[n // 2] if n % 2 else (rtts[n // 2 - 1] + rtts[n // 2]) / 2
        sample.rtt_min_ms = rtts[0]
    return sample


def is_loopback(base_url: str) -> bool:
    """Whether the URL's host is this machine (127.0.0.0/8, ::1, localhost)."""
    return netconfig.is_loopback(urlsplit(base_url).hostname or "")


def floor_later(base_url: str, net: Net | None, when: str, headers: dict[str, str] | None,
                into: list[Floor]) -> threading.Thread:
    """``floor_now`` in a thread of its own (between a ramp's steps: the load goes on), its
    Floor appended to ``into``; join the thread before reading it."""
    t = threading.Thread(target=lambda: into.append(floor_now(base_url, net, when, headers)),
                         name="llmbench-floor", daemon=True)
    t.start()
    return t


def floor_now(base_url: str, net: Net | None = None, when: str = "before",
              headers: dict[str, str] | None = None) -> Floor:
    """``measure_floor`` from synchronous code (a command, before or after the load)."""
    return asyncio.run(measure_floor(base_url, net, when, headers))
