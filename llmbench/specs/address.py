"""--dashboard's [HOST:]PORT, read as a spec reads it (llmbench/report/dashboard serves it)."""

from __future__ import annotations

from typing import Any

from llmbench.errors import UsageError

DEFAULT_HOST = "127.0.0.1"


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
