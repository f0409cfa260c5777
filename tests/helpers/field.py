"""Real components of the field, started by tests on free loopback ports with their configs in
temporary folders: nginx (a reverse proxy, with its default buffering or without, or
terminating TLS), tinyproxy (a forward proxy) and a test CA made with openssl.

A component that is not installed fails the test with one line saying how to install it
(``scripts/install-test-deps.sh``, which .ci/run calls); nothing is skipped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from llmbench.servers.ports import free_port

INSTALL = "run scripts/install-test-deps.sh as root (or: apt-get install -y {pkg})"


def require(binary: str, package: str, *extra: str) -> str:
    """The path of ``binary`` (also looked for in the sbin folders), else the test fails."""
    found = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}", *extra) if os.access(p, os.X_OK)),
        None)
    if not found:
        pytest.fail(f"{binary} is not installed: {INSTALL.format(pkg=package)}", pytrace=False)
    return found


def wait_port(port: int, timeout_s: float = 10.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {timeout_s:g} s")


# -- a test CA -----------------------------------------------------------------------------------

@dataclass
class Cert:
    cert: Path
    key: Path


class TestCA:
    """A private CA and certificates it signs (openssl): a server's for 127.0.0.1/localhost and
    a client's for mutual TLS. ``bundle`` is the CA certificate a client trusts."""

    __test__ = False            # not a pytest class

    def __init__(self, folder: Path) -> None:
        self.openssl = require("openssl", "openssl")
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bundle = self.dir / "ca.pem"
        self._ca_key = self.dir / "ca.key"
        self._run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                  "-subj", "/CN=llmbench test CA", "-keyout", str(self._ca_key),
                  "-out", str(self.bundle),
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def _run(self, *args: str) -> None:
        r = subprocess.run([self.openssl, *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {r.stderr.strip()[-300:]}")

    def issue(self, name: str, *, server: bool = True) -> Cert:
        key, csr, crt = (self.dir / f"{name}.key", self.dir / f"{name}.csr",
                         self.dir / f"{name}.pem")
        self._run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                  "-keyout", str(key), "-out", str(csr))
        ext = self.dir / f"{name}.ext"
        if server:
            ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                           "extendedKeyUsage=serverAuth\n")
        else:
            ext.write_text("extendedKeyUsage=clientAuth\n")
        self._run("x509", "-req", "-in", str(csr), "-CA", str(self.bundle), "-CAkey",
                  str(self._ca_key), "-CAcreateserial", "-days", "2", "-out", str(crt),
                  "-extfile", str(ext))
        return Cert(crt, key)


# -- nginx -----------------------------------------------------------------------------------------

class Nginx:
    """nginx in front of ``upstream_port``, as a user would run it.

    ``buffering``: None leaves nginx's defaults (``proxy_pass`` alone: HTTP/1.0 to the upstream
    and ``proxy_buffering on``); False adds ``proxy_buffering off`` with HTTP/1.1 upstream (the
    fix the README recommends). ``tls``: terminate TLS with this certificate;
    ``client_ca``: require client certificates signed by it (mutual TLS)."""

    def __init__(self, folder: Path, upstream_port: int, *, buffering: bool | None = None,
                 tls: Cert | None = None, client_ca: Path | None = None,
                 extra_location: str = "") -> None:
        self.binary = require("nginx", "nginx-light")
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.tls = tls
        loc = f"proxy_pass http://127.0.0.1:{upstream_port};"
        if buffering is False:
            loc += " proxy_http_version 1.1; proxy_buffering off;"
        elif buffering is True:
            loc += " proxy_buffering on;"
        loc += " " + extra_location
        ssl = ""
        if tls is not None:
            ssl = (f"ssl_certificate {tls.cert}; ssl_certificate_key {tls.key};")
            if client_ca is not None:
                ssl += f" ssl_client_certificate {client_ca}; ssl_verify_client on;"
        d = self.dir
        user = "user root;" if os.geteuid() == 0 else ""
        self.conf = d / "nginx.conf"
        self.conf.write_text(f"""
{user}
daemon on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  server {{
    listen 127.0.0.1:{self.port}{' ssl' if tls else ''};
    {ssl}
    location / {{ {loc} }}
  }}
}}
""")

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def __enter__(self) -> "Nginx":
        r = subprocess.run([self.binary, "-p", str(self.dir), "-c", str(self.conf)],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"nginx did not start: {r.stderr.strip()[-400:]}")
        wait_port(self.port)
        return self

    def __exit__(self, *exc: object) -> None:
        pid_file = self.dir / "nginx.pid"
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGTERM)        # fast shutdown of master and workers
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


# -- tinyproxy -------------------------------------------------------------------------------------

class Tinyproxy:
    """A forward proxy on a free loopback port (absolute-form requests and CONNECT tunnels to
    any port). ``log`` holds what it did; ``auth``: (user, password) it requires (BasicAuth)."""

    def __init__(self, folder: Path, auth: tuple[str, str] | None = None) -> None:
        self.binary = require("tinyproxy", "tinyproxy", "/usr/sbin/tinyproxy")
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log = self.dir / "tinyproxy.log"
        self.conf = self.dir / "tinyproxy.conf"
        lines = [f"Port {self.port}", "Listen 127.0.0.1", "Timeout 60", "MaxClients 200",
                 "Allow 127.0.0.1", f"LogFile \"{self.log}\"", "LogLevel Info",
                 f"PidFile \"{self.dir / 'tinyproxy.pid'}\"", "DisableViaHeader No"]
        if auth is not None:
            lines.append(f"BasicAuth {auth[0]} {auth[1]}")
        if os.geteuid() == 0:
            lines += ["User root", "Group root"]
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Tinyproxy":
        self.proc = subprocess.Popen([self.binary, "-d", "-c", str(self.conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_port(self.port, proc=self.proc)
        except RuntimeError as exc:
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
            raise RuntimeError(f"tinyproxy did not start ({exc}): {err.strip()[-400:]}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""
