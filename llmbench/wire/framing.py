"""Split a byte stream into event payloads: SSE (OpenAI) and NDJSON (Ollama).

The client timestamps each network chunk on arrival, before any of this runs, so framing
cost never shifts a token's time. httpx-sse is not used: it yields decoded text lines through
httpx's line decoder and hides which chunk an event arrived in.
"""

from __future__ import annotations


class SseFramer:
    """Server-sent events: ``data:`` lines joined until a blank line; comments ignored."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        if chunk[:6] == b"data: " and chunk[-2:] == b"\n\n" and not self._buf \
                and not self._data and chunk.count(b"\n") == 2 and b"\r" not in chunk:
            # the usual chunk (one event, whole, one data line): what the general path below
            # makes of it, without splitting it into lines (issue 50: per token event CPU)
            payload = chunk[6:-2]
            return [payload] if payload.strip() else []
        buf = self._buf + chunk if self._buf else chunk
        out: list[bytes] = []
        if b"\r" in buf:
            # A CR at the very end may be the first half of a CRLF split across two chunks:
            # keep it back, or the LF that follows would read as a second, empty line and end
            # the event early (spec: CRLF, LF and CR each end one line).
            held = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if held:
                lines = buf[:-1].split(b"\n")
                lines[-1] += b"\r"
            else:
                lines = buf.split(b"\n")
        else:
            lines = buf.split(b"\n")
        self._buf = lines.pop()
        data = self._data
        for line in lines:
            if not line:
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    # an empty data buffer is not dispatched (the SSE spec; vLLM's client skips
                    # it too): some proxies send "data:" as a keep-alive
                    if payload.strip():
                        out.append(payload)
                    data = self._data = []
                continue
            if line.startswith(b"data:"):
                payload = line[5:]
                if payload[:1] == b" ":
                    payload = payload[1:]
                data.append(payload)
            elif line == b"data":
                data.append(b"")         # a field name with no colon: the value is empty (spec)
            # ":" comments, event:, id:, retry: carry nothing we need
        return out

    def flush(self) -> list[bytes]:
        """At stream end: a final event some servers send without the closing blank line (the
        line it is in ended, and the event, as the blank line would)."""
        return self.feed(b"\n\n")


class NdjsonFramer:
    """One JSON object per line."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk if self._buf else chunk
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        return [line for line in lines if line.strip()]

    def flush(self) -> list[bytes]:
        rest, self._buf = self._buf.strip(), b""
        return [rest] if rest else []
