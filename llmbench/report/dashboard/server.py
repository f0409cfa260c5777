"""The dashboard's own process: it keeps what the run sent (JSON lines on stdin, from the load
generator's feeder thread: llmbench/report/dashboard/__init__.py), draws it (page.py, the
report's chart builders) only while somebody watches, and serves it:

  /             the live page (when the run has ended: its report.html)
  /events       Server-Sent Events: an ``update`` a second (numbers and the parts that changed)
  /state.json   the numbers and parts now, for scripts and tests
  /report       report.html once the run has ended (404 before)
  /static/...   the page's script (package data; no network)
  FOLDER/x      a sweep folder's ramp reports and server logs, as its report links them

It listens on the address it is given, prints ``PORT n`` (or ``ERROR why``) on stdout once, and
ends when its stdin closes: the command lingered, or the load generator died. Ctrl-C in the
terminal is the load generator's to handle (it closes this process), so SIGINT is ignored.

``serve_folder`` serves a finished run or sweep folder the same way (``llmbench dashboard``).
"""

from __future__ import annotations

import argparse
import hmac
import json
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from llmbench.report.dashboard import page
from llmbench.report.dashboard.address import exposure_warning, token

HEARTBEAT_S = 15.0
STATIC = {"dashboard.js": "text/javascript; charset=utf-8"}
# A client that opens a connection and sends nothing (or stops reading its events) holds a
# thread: its request line and headers must come within READ_TIMEOUT_S, an event must be
# taken within it, and at most MAX_CONNECTIONS are served at once (the rest are closed at
# once), so half-open clients cannot pile up threads (issue 49: 300 held 303 for ever).
# 100 pages watching at once fit.
READ_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 160
TOKEN_COOKIE = "llmbench_dashboard"


class Store:
    """The run as the page knows it; every message makes a new version."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.version = 0
        self.state: dict[str, Any] = self._fresh()
        self.rows: dict[int, dict[str, Any]] = {}
        self.clients = 0
        self.folder: Path | None = None
        self._render_lock = threading.Lock()
        self._rendered: tuple[int, dict[str, Any]] | None = None

    @staticmethod
    def _fresh(sweep: Any = None) -> dict[str, Any]:
        return {"meta": {}, "steps": [], "verdict": None, "status": "starting", "tick": None,
                "sweep": sweep, "final_html": None, "step_started_s": None, "last_step": None}

    # -- messages --------------------------------------------------------------------------------
    def apply(self, msg: dict[str, Any]) -> None:
        with self.cond:
            self._apply(msg)
            self.version += 1
            self.cond.notify_all()

    def _apply(self, msg: dict[str, Any]) -> None:
        st, kind = self.state, msg.get("type")
        if kind == "begin":
            self.state = st = self._fresh(st.get("sweep"))
            self.rows = {}
            st["meta"] = dict(msg.get("meta") or {})
            st["status"] = "preflight"
        elif kind == "meta":
            st["meta"].update(msg.get("meta") or {})
        elif kind == "tick":
            for r in msg.get("rows") or []:
                self.rows[int(r["t"])] = r
            st["tick"] = {k: v for k, v in msg.items() if k not in ("type", "rows")}
            g = st["tick"].get("gauges") or {}
            if st["status"] in ("starting", "preflight") and msg.get("t_s") is not None:
                st["status"] = "running"
            if g.get("step") != st["last_step"]:
                st["last_step"] = g.get("step")
                st["step_started_s"] = msg.get("t_s")
        elif kind == "step":
            step = msg.get("step") or {}
            steps = [s for s in st["steps"] if s.get("index") != step.get("index")]
            st["steps"] = sorted(steps + [step], key=lambda s: s.get("index") or 0)
            if msg.get("verdict"):
                st["verdict"] = msg["verdict"]
        elif kind == "setting_done":
            st["status"] = "ended"
            run = msg.get("run") or {}
            if run.get("verdict"):
                st["verdict"] = run["verdict"]
        elif kind == "sweep":
            st["sweep"] = {"meta": msg.get("meta") or {}, "results": [], "index": 0,
                           "name": None}
        elif kind == "sweep_setting":
            sw = st.get("sweep") or {"meta": {}}
            sw.update(index=msg.get("index"), name=msg.get("name"),
                      results=msg.get("results") or [])
            st["sweep"] = sw
        elif kind == "failed":
            st["status"] = "failed"
            st["error"] = msg.get("error")
        elif kind == "final":
            run = msg.get("run") or {}
            st["run"] = run
            if run.get("verdict"):
                st["verdict"] = run["verdict"]
            if run.get("steps"):
                st["steps"] = run["steps"]
            st["final_html"] = _read(msg.get("report"))
            if msg.get("folder"):
                self.folder = Path(msg["folder"])
            st["status"] = "final"

    # -- reading ---------------------------------------------------------------------------------
    def wait_newer(self, seen: int, timeout_s: float) -> int | None:
        with self.cond:
            if self.version <= seen:
                self.cond.wait(timeout_s)
            return self.version if self.version > seen else None

    def render(self) -> dict[str, Any]:
        """The page's payload now (drawn once per version, whoever asks)."""
        with self._render_lock:
            with self.cond:
                version = self.version
                if self._rendered is not None and self._rendered[0] == version:
                    return self._rendered[1]
                state = {**self.state, "version": version,
                         "rows": [self.rows[k] for k in sorted(self.rows)]}
            u = page.update(state)
            self._rendered = (version, u)
            return u

    def page(self) -> str:
        with self.cond:
            final = self.state.get("final_html")
        if final is not None:
            return page.final_page(final)
        with self.cond:
            state = {**self.state, "version": self.version,
                     "rows": [self.rows[k] for k in sorted(self.rows)]}
        return page.shell(state)


def _read(path: Any) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def _handler(store: Store, token: str | None = None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "llmbench-dashboard"
        timeout = READ_TIMEOUT_S                    # StreamRequestHandler: the socket's

        def _allowed(self) -> bool:
            """No token asked, or the request carries it: ?token=, the cookie the page set,
            or an Authorization: Bearer header."""
            if token is None:
                return True
            from http.cookies import SimpleCookie
            from urllib.parse import parse_qs, urlsplit
            given = parse_qs(urlsplit(self.path).query).get("token", [""])[0]
            if not given:
                auth = self.headers.get("Authorization", "")
                given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
            if not given:
                try:
                    jar = SimpleCookie(self.headers.get("Cookie", ""))
                except Exception:  # noqa: BLE001 - a cookie header the parser refuses
                    jar = SimpleCookie()
                given = jar[TOKEN_COOKIE].value if TOKEN_COOKIE in jar else ""
            return hmac.compare_digest(given.encode(), token.encode())

        def log_message(self, format: str, *args: Any) -> None:
            return                                  # no line per request on the console

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            if token is not None and code == 200 and "token=" in self.path:
                # the page's own requests (its script, its events) carry the cookie
                self.send_header("Set-Cookie", f"{TOKEN_COOKIE}={token}; HttpOnly; "
                                 "SameSite=Strict; Path=/")
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:                   # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            try:
                if not self._allowed():
                    self._send(401, b"this page needs its token: open the URL llmbench printed "
                               b"(?token=...)", "text/plain; charset=utf-8")
                elif path in ("/", "/index.html"):
                    self._send(200, store.page().encode(), "text/html; charset=utf-8")
                elif path == "/events":
                    self._events()
                elif path == "/state.json":
                    self._send(200, json.dumps(store.render()).encode(), "application/json")
                elif path == "/report":
                    with store.cond:
                        final = store.state.get("final_html")
                    if final is None:
                        self._send(404, b"the run has not ended yet", "text/plain; charset=utf-8")
                    else:
                        self._send(200, page.final_page(final).encode(), "text/html; charset=utf-8")
                elif path.startswith("/static/") and path[len("/static/"):] in STATIC:
                    name = path[len("/static/"):]
                    body = resources.files("llmbench.report.dashboard").joinpath(
                        "static", name).read_bytes()
                    self._send(200, body, STATIC[name])
                else:
                    self._file(path)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _file(self, path: str) -> None:
            """A file the report links to, inside the run or sweep folder: a ramp's
            report.html, a sweep's server logs. Nothing else is served."""
            from urllib.parse import unquote
            root = store.folder
            if root is not None:
                target = (root / unquote(path).lstrip("/")).resolve()
                inside = root.resolve() in target.parents
                linked = target.name in ("report.html", "compare.html") or (
                    target.suffix == ".log" and target.parent == root.resolve())
                if inside and linked and target.is_file():
                    ctype = "text/html; charset=utf-8" if target.suffix == ".html" \
                        else "text/plain; charset=utf-8"
                    self._send(200, target.read_bytes(), ctype)
                    return
            self._send(404, b"not found", "text/plain; charset=utf-8")

        def _events(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            with store.cond:
                store.clients += 1
            sent: dict[str, str] = {}
            seen = -1
            try:
                while True:
                    version = store.wait_newer(seen, HEARTBEAT_S)
                    if version is None:
                        self.wfile.write(b": ping\n\n")
                        self.wfile.flush()
                        continue
                    u = store.render()
                    seen = u["version"]
                    parts = {k: v for k, v in u["html"].items() if sent.get(k) != v}
                    sent.update(parts)
                    data = json.dumps({**u, "html": parts}, separators=(",", ":"))
                    self.wfile.write(b"event: update\ndata: " + data.encode() + b"\n\n")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
            finally:
                with store.cond:
                    store.clients -= 1
    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.active = 0
        self._count = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count:
            full = self.active >= MAX_CONNECTIONS
            if not full:
                self.active += 1
        if full:                                # closed at once: no thread, no wait
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count:
                self.active -= 1


def make_server(host: str, port: int, store: Store) -> ThreadingHTTPServer:
    """The page's server on (host, port); LLMBENCH_DASHBOARD_TOKEN set: every request must
    carry it. Beyond this machine without a token: a warning on stderr."""
    cls = _Server
    if ":" in host:                             # an IPv6 address
        cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
    server = cls((host, port), _handler(store, token()))
    warning = exposure_warning(host)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return server


def _feed(store: Store, server: ThreadingHTTPServer) -> None:
    """Messages from the load generator, one JSON line each, until its end of the pipe closes."""
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            if msg.get("type") == "sync":       # everything before it is on the page now
                print(f"SYNC {msg.get('n')}", flush=True)
                continue
            try:
                store.apply(msg)
            except Exception as exc:  # noqa: BLE001 - a bad message must not end the page
                print(f"llmbench dashboard: ignored a message ({type(exc).__name__}: {exc})",
                      file=sys.stderr, flush=True)
    threading.Thread(target=server.shutdown, daemon=True).start()


def folder_html(folder: Path) -> str:
    """A run's or a sweep's report.html, drawn now from its folder (as ``llmbench report``
    does; one line for a folder that is not one)."""
    folder = Path(folder)
    if (folder / "sweep.json").is_file():
        from llmbench.report import sweep_html
        return sweep_html.render(folder)
    from llmbench.analysis.recover import load_checked
    from llmbench.report import html
    load_checked(folder, "serve")
    return html.render(folder)


def serve_folder(folder: Path, html_text: str, host: str, port: int,
                 on_listen: Any = None) -> None:
    """Serve a finished run or sweep folder's report as the dashboard does at a run's end,
    until Ctrl-C. ``on_listen(port)`` is called once the port is open."""
    store = Store()
    store.folder = folder
    store.state["final_html"] = html_text
    store.state["status"] = "final"
    server = make_server(host, port, store)
    try:
        if on_listen is not None:       # inside: a Ctrl-C right after the URL line ends it too
            on_listen(server.server_address[1])
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:           # Ctrl-C is how the page ends, not an error
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llmbench.report.dashboard.server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--feed", action="store_true", help="read the run's messages on stdin")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the load generator decides when to stop
    store = Store()
    try:
        server = make_server(a.host, a.port, store)
    except OSError as exc:
        print(f"ERROR cannot listen on {a.host}:{a.port}: {exc.strerror or exc}", flush=True)
        return 1
    print(f"PORT {server.server_address[1]}", flush=True)
    if a.feed:
        threading.Thread(target=_feed, args=(store, server), name="feed", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.25)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
