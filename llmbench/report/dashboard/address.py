"""--dashboard's address: [HOST:]PORT, checked (one line naming the flag), and its URL."""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any
from urllib.parse import quote

from llmbench.errors import UsageError

DEFAULT_HOST = "127.0.0.1"


class DashboardError(UsageError):
    """The page could not be served (the port is taken, the address is not this host's)."""


def parse_address(text: Any, flag: str = "--dashboard") -> tuple[str, int]:
    """'8080', '0.0.0.0:8080', '[::1]:8080', 'auto' or '' -> (host, port); 0 or 'auto': any free
    port. One line naming the flag otherwise."""
    t = str(text).strip()
    hint = ("expected [HOST:]PORT, e.g. 8080 or 0.0.0.0:8080 (alone, or 0: any free port on "
            f"{DEFAULT_HOST})")
    if t in ("", "auto"):
        return DEFAULT_HOST, 0
    host, sep, port_text = t.rpartition(":")
    if not sep:
        host, port_text = DEFAULT_HOST, t
    host = host.strip("[]") if host.startswith("[") else host
    if sep and not host:
        raise UsageError(f"{flag} {text!r}: no host before the colon; {hint}")
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: {hint}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"{flag} {text!r}: the port must be between 0 and 65535; {hint}")
    return host, port


TOKEN_ENV = "LLMBENCH_DASHBOARD_TOKEN"


def token() -> str | None:
    """The token the page asks for (LLMBENCH_DASHBOARD_TOKEN), None: none asked."""
    t = os.environ.get(TOKEN_ENV, "").strip()
    return t or None


def is_loopback(host: str) -> bool:
    """Only this machine reaches ``host`` (127.0.0.0/8, ::1, localhost)."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _outward_ip(v6: bool) -> str | None:
    """This machine's address on its default route (a UDP socket's connect sends nothing)."""
    fam, probe = (socket.AF_INET6, "2001:db8::1") if v6 else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(fam, socket.SOCK_DGRAM) as s:
            s.connect((probe, 9))
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip in ("0.0.0.0", "::") else ip


def shown_host(host: str) -> str:
    """The address to open the page at: a wildcard bind (0.0.0.0, ::) is shown as this
    machine's own address on the network (what another machine opens), else as given."""
    if host in ("0.0.0.0", "::"):
        ip = _outward_ip(host == "::") or socket.gethostname()
        return ip
    return host or DEFAULT_HOST


def url_of(host: str, port: int) -> str:
    shown = shown_host(host)
    shown = f"[{shown}]" if ":" in shown else shown
    t = token()
    return f"http://{shown}:{port}/" + (f"?token={quote(t)}" if t else "")


def exposure_warning(host: str) -> str | None:
    """One line when the page is served beyond this machine without a token."""
    if is_loopback(host) or token():
        return None
    where = f"{host} (every interface)" if host in ("0.0.0.0", "::") else host
    # two lines of at most 80 columns
    return (f"warning: the dashboard on {where} has no authentication;\n"
            f"  set {TOKEN_ENV} to ask for a token, or serve it on 127.0.0.1")
