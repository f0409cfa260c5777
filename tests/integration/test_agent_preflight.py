"""The agents' first request sends the run's tools (issue 45): a server that refuses tools
fails there, in one line, before the load, instead of answering the one-token check and then
failing every call of the run."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.helpers import llmbench


class _NoTools(BaseHTTPRequestHandler):
    bodies: list = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        data = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
        self.send_response(200 if self.path.endswith("/models") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _NoTools.bodies.append(body)
        if "tools" in body:
            data = json.dumps({"error": {"message": "tools are not supported by this model",
                                         "type": "invalid_request_error"}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "length"}]}
        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n")
        self.close_connection = True


def test_a_server_that_refuses_tools_fails_the_first_request_in_one_line(tmp_path):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _NoTools)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _NoTools.bodies = []
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        r = llmbench("run", "--url", url, "--model", "m", "--workload", "agent",
                     "--concurrency", "2", "--requests", "6", "--server-probe", "off",
                     "--out", str(tmp_path), timeout=120)
    finally:
        srv.shutdown()
    assert r.returncode == 5, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "tools are not supported" in lines[0], r.stderr
    # the one-token check carried the tools, and nothing of the load was sent after it
    assert _NoTools.bodies and "tools" in _NoTools.bodies[0]
    assert len(_NoTools.bodies) <= 3, len(_NoTools.bodies)     # the check and its retries
