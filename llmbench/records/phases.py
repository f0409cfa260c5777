"""A request's phases, from the stamps its transport took (Record.*_us, µs after ``start``).

Consecutive, so that they add up: TTFT = blocked + dns + connect + tls + send + wait +
first_token, and E2EL = TTFT + decode. A phase the request did not go through (no name to
resolve, a reused connection, no TLS) is absent, not zero:

- blocked: start to connecting (a new connection only): waiting for a slot in the pool
- dns: resolving the host's name (not for an IP address, nor a name aiohttp had cached)
- connect: the TCP connection (on the aiohttp transport: with the TLS handshake)
- tls: the TLS handshake (new https connections, llmbench's own transport)
- send: to the request handed to the socket (on a reused connection: from start)
- wait: to the response's first byte (the network's round trip and the server's head)
- first_token: first byte to the first token event (the server's queue and prefill, when it
  sends its headers at once as vLLM, llama.cpp and the mock do)
- decode: first to last token event
"""

from __future__ import annotations

from llmbench.records.definitions import offset_us
from llmbench.records.record import Record

PHASES = ("blocked", "dns", "connect", "tls", "send", "wait", "first_token", "decode")


def phases_ms(rec: Record) -> dict[str, float] | None:
    """The request's phases in ms (PHASES order; absent phases left out); None when its
    transport stamped no first byte (older logs, a request that got no answer)."""
    fb = rec.first_byte_us
    if fb is None or rec.sent is None:
        return None
    out: dict[str, float] = {}
    at = 0                                  # µs after start where the next phase begins
    if rec.conn_us is not None:
        for name, stamp in (("blocked", rec.conn_us), ("dns", rec.dns_us),
                            ("connect", rec.connect_us), ("tls", rec.tls_us)):
            if stamp is not None:
                out[name] = (stamp - at) / 1000.0
                at = stamp
    sent_us = offset_us(rec.start, rec.sent)
    out["send"] = (sent_us - at) / 1000.0
    out["wait"] = (fb - sent_us) / 1000.0
    times = rec.token_times
    if times:
        first = offset_us(rec.start, times[0])
        out["first_token"] = (first - fb) / 1000.0
        out["decode"] = (offset_us(rec.start, times[-1]) - first) / 1000.0
    return out


def new_connection(rec: Record) -> bool | None:
    """Whether the request opened its own connection (None: not stamped)."""
    if rec.first_byte_us is None:
        return None
    return rec.conn_us is not None
