"""--dashboard's address: [HOST:]PORT, checked (one line naming the flag), and its URL."""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import quote

from llmbench.errors import UsageError
from llmbench.specs.address import DEFAULT_HOST, parse_address  # noqa: F401  (read here too)



class DashboardError(UsageError):
    """The page could not be served (the port is taken, the address is not this host's)."""


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
