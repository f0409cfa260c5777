"""A small forward proxy (standard library) that knows host names nobody else does.

``hosts`` maps a made-up name (``model.llmbench-test``) to a loopback port, so a request that
reaches the server proves it went through this proxy: without it the name does not resolve.
It speaks both ways a client uses a proxy: absolute-form requests (``POST http://h/p``, sent
on as origin-form with ``connection: close``) and ``CONNECT h:443`` tunnels (bytes piped both
ways, TLS end to end). ``auth``: (user, password) it requires as Proxy-Authorization (407
otherwise). ``log`` holds one line per request ("CONNECT h:443", "POST http://h/p") and
``auth_seen`` the Proxy-Authorization values it got. Loopback only.
"""

from __future__ import annotations

import base64
import socket
import socketserver
import threading
from urllib.parse import urlsplit

from llmbench.servers.ports import free_port


class ForwardProxy:
    def __init__(self, hosts: dict[str, int], auth: tuple[str, str] | None = None) -> None:
        self.hosts = {h.lower(): p for h, p in hosts.items()}
        self.auth = auth
        self.port = free_port()
        self.log: list[str] = []
        self.auth_seen: list[str] = []
        self._server: socketserver.ThreadingTCPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _upstream(self, host: str, port: int) -> int | None:
        if host.lower() in self.hosts:
            return self.hosts[host.lower()]
        if host in ("127.0.0.1", "localhost"):
            return port
        return None                         # never anywhere but loopback

    def __enter__(self) -> "ForwardProxy":
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- one client connection ---------------------------------------------------------------
    def _handle(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(65536)
            if not data:
                return
            head += data
        raw_head, _, rest = head.partition(b"\r\n\r\n")
        lines = raw_head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = [line for line in lines[1:] if line]
        self.log.append(f"{method} {target}")
        got = next((line.split(":", 1)[1].strip() for line in headers
                    if line.lower().startswith("proxy-authorization:")), None)
        if got:
            self.auth_seen.append(got)
        if self.auth is not None:
            want = "Basic " + base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
            if got != want:
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                               b"proxy-authenticate: Basic realm=\"test\"\r\n"
                               b"content-length: 0\r\nconnection: close\r\n\r\n")
                return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            up = self._upstream(host.strip("[]"), int(port))
            if up is None:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                return
            upstream = socket.create_connection(("127.0.0.1", up))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            self._pipe(client, upstream)
            return
        u = urlsplit(target)
        up = self._upstream(u.hostname or "", u.port or 80) if u.scheme == "http" else None
        if up is None:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n"
                           b"connection: close\r\n\r\n")
            return
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        kept = [line for line in headers
                if not line.lower().startswith(("proxy-authorization:", "proxy-connection:",
                                                "connection:"))]
        request = "\r\n".join([f"{method} {path} {version}", *kept, "connection: close",
                               "via: 1.1 llmbench-test-proxy", "", ""]).encode("latin-1")
        upstream = socket.create_connection(("127.0.0.1", up))
        upstream.sendall(request + rest)
        self._pipe(client, upstream)

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        """Bytes both ways until either side closes."""
        def one_way(src: socket.socket, dst: socket.socket) -> None:
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=one_way, args=(b, a), daemon=True)
        t.start()
        one_way(a, b)
        t.join(30)
        b.close()
