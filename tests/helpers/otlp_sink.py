"""An OTLP/HTTP trace receiver on loopback: POST /v1/traces with a protobuf body, decoded with
the OpenTelemetry project's own message definitions (opentelemetry-proto, which the otel extra
installs), answered as the protocol says (an ExportTraceServiceResponse, application/x-protobuf).
The spans it received are kept for the test to read. ``mode``: "ok"; "html" (a web server's
200 page, not OTLP); "drip" (the answer comes a byte a second). ``stop()`` takes it down mid-run.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from llmbench.servers.ports import free_port


def _proto() -> Any:
    try:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ImportError:
        pytest.fail("opentelemetry-proto is not installed: pip install -e '.[test]' "
                    "(or 'llmbench[otel]')", pytrace=False)
    return trace_service_pb2


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class OtlpSink:
    def __init__(self, mode: str = "ok") -> None:
        self.pb = _proto()
        self.mode = mode
        self.port = free_port()
        self.spans: list[dict[str, Any]] = []
        self.posts = 0
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:          # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                sink.posts += 1
                if sink.mode == "html":
                    page = b"<html><body>Welcome to nginx!</body></html>"
                    self.send_response(200)
                    self.send_header("content-type", "text/html")
                    self.send_header("content-length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                if sink.mode == "drip":
                    self.send_response(200)
                    self.send_header("content-type", "application/x-protobuf")
                    self.send_header("content-length", "100")
                    self.end_headers()
                    for _ in range(100):
                        self.wfile.write(b"\0")
                        self.wfile.flush()
                        time.sleep(1.0)
                    return
                req = sink.pb.ExportTraceServiceRequest()
                req.ParseFromString(body)
                got = []
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            got.append({
                                "name": s.name, "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(), "kind": s.kind,
                                "start_ns": s.start_time_unix_nano,
                                "end_ns": s.end_time_unix_nano,
                                "attributes": {a.key: _value(a.value) for a in s.attributes},
                                "events": [e.name for e in s.events],
                                "links": [(ln.trace_id.hex(), ln.span_id.hex())
                                          for ln in s.links]})
                with sink._lock:
                    sink.spans.extend(got)
                out = sink.pb.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "OtlpSink":
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests(self) -> list[dict[str, Any]]:
        """The load's request spans (not the steps', nor the preflight's)."""
        with self._lock:
            return [s for s in self.spans if "llmbench.request_id" in s["attributes"]
                    and not s["attributes"].get("llmbench.preflight")]

    def preflights(self) -> list[dict[str, Any]]:
        """The preflight's spans (the one-token request before the load)."""
        with self._lock:
            return [s for s in self.spans if s["attributes"].get("llmbench.preflight")]
