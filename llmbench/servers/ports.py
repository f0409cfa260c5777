"""A free TCP port on loopback, for servers llmbench (sweep, its scripts and tests) starts."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel just gave out on ``host``; it is free until someone else binds it."""
    s = socket.socket()
    try:
        s.bind((host, 0))
        return s.getsockname()[1]
    finally:
        s.close()
