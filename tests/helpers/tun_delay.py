"""A link with a one-way delay that the TCP handshake pays too: a TUN device and a userspace
router in a network namespace of its own (issue 48; tests/helpers/delay_proxy.py cannot hold
a SYN-ACK back, so its connect phase stays near zero). This machine has no netem (tc says
"qdisc kind is unknown"), but /dev/net/tun and ``unshare -n`` work as root.

Run as ``unshare -n python -m tests.helpers.tun_delay SPEC.json`` (``run_far`` does it): in
the new namespace (nothing outside it is touched, and it ends with the process), ``tun7``
holds 10.7.0.1/24; a packet the kernel routes to 10.7.0.2 or 10.7.0.3 goes into the TUN
device, where the router holds it ``delay_ms`` and hands it back with its addresses swapped
(to 10.7.0.2 -> from 10.7.0.3 to 10.7.0.1; to 10.7.0.3 -> from 10.7.0.2 to 10.7.0.1), its
checksums redone. So a connection to 10.7.0.2:PORT reaches a server listening on 10.7.0.1
(it sees the client as 10.7.0.3) and every packet, SYN and SYN-ACK included, crosses the
router once each way: a round trip of 2 x delay_ms. The same server at 10.7.0.1 directly is
local (no delay), for the comparison.

SPEC: {"delay_ms": 50, "mock": [mock args...], "runs": [[llmbench args...], ...]}: the mock
(``llmbench mock --host 0.0.0.0 --port 8000`` plus its args) is started, then each run, with
"{far}" and "{near}" in an argument replaced by the URLs; prints one JSON line per run
(its exit code and output) and a last line of the router's counts.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
LOCAL, FAR, PEER = (socket.inet_aton(f"10.7.0.{i}") for i in (1, 2, 3))
PORT = 8000
INSTALL = ("needs root (CAP_NET_ADMIN), /dev/net/tun, ip (iproute2) and unshare (util-linux); "
           "in a container: --cap-add NET_ADMIN --device /dev/net/tun")


def _sum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _checksum(data: bytes) -> int:
    return ~_sum16(data) & 0xFFFF


def rewrite(pkt: bytes) -> bytes | None:
    """The packet as it comes back over the link (addresses swapped, checksums redone), or
    None for what is not ours (IPv6, other addresses)."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4:
        return None
    dst = pkt[16:20]
    if dst == FAR:
        src, new_dst = PEER, LOCAL
    elif dst == PEER:
        src, new_dst = FAR, LOCAL
    else:
        return None
    ihl = (pkt[0] & 0x0F) * 4
    head = bytearray(pkt[:ihl])
    head[12:16], head[16:20] = src, new_dst
    head[10:12] = b"\0\0"
    head[10:12] = struct.pack("!H", _checksum(bytes(head)))
    body = bytearray(pkt[ihl:])
    proto = pkt[9]
    off = {6: 16, 17: 6}.get(proto)          # TCP's checksum field, UDP's
    frag = struct.unpack("!H", pkt[6:8])[0] & 0x1FFF
    if off is not None and frag == 0 and len(body) >= off + 2:
        body[off:off + 2] = b"\0\0"
        pseudo = src + new_dst + struct.pack("!BBH", 0, proto, len(body))
        c = _checksum(pseudo + bytes(body))
        body[off:off + 2] = struct.pack("!H", c if c or proto != 17 else 0xFFFF)
    return bytes(head) + bytes(body)


class Router:
    """Reads the TUN device, holds each packet ``delay_s``, writes it back rewritten, in
    order (one delay for all, so a FIFO is the schedule)."""

    def __init__(self, fd: int, delay_s: float) -> None:
        self.fd, self.delay_s = fd, delay_s
        self.q: deque[tuple[float, bytes]] = deque()
        self.cv = threading.Condition()
        self.packets = 0
        self.late_ms = 0.0              # the worst lateness of a write past its due time

    def start(self) -> "Router":
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()
        return self

    def _read(self) -> None:
        while True:
            pkt = os.read(self.fd, 65535)
            now = time.monotonic()
            out = rewrite(pkt)
            if out is None:
                continue
            with self.cv:
                self.q.append((now + self.delay_s, out))
                self.cv.notify()

    def _write(self) -> None:
        while True:
            with self.cv:
                while not self.q:
                    self.cv.wait()
                due, pkt = self.q[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.cv.wait(wait)
                    continue
                self.q.popleft()
            os.write(self.fd, pkt)
            self.packets += 1
            self.late_ms = max(self.late_ms, (time.monotonic() - due) * 1000.0)


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def setup(delay_s: float) -> Router:
    """The namespace's links: lo up, tun7 with 10.7.0.1/24, no reverse-path filter."""
    _sh("ip", "link", "set", "lo", "up")
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", b"tun7", IFF_TUN | IFF_NO_PI))
    _sh("ip", "addr", "add", "10.7.0.1/24", "dev", "tun7")
    _sh("ip", "link", "set", "tun7", "up")
    for name in ("all", "default", "tun7"):
        Path(f"/proc/sys/net/ipv4/conf/{name}/rp_filter").write_text("0")
    return Router(fd, delay_s).start()


def _wait_port(host: str, port: int, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            socket.create_connection((host, port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the mock did not listen on {host}:{port} within {timeout_s:g} s")


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    router = setup(spec["delay_ms"] / 1000.0)
    exe = [sys.executable, "-m", "llmbench.cli"]
    mock = subprocess.Popen([*exe, "mock", "--host", "0.0.0.0", "--port", str(PORT),
                             *spec["mock"]], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        _wait_port("10.7.0.1", PORT, 60)
        urls = {"{far}": f"http://10.7.0.2:{PORT}", "{near}": f"http://10.7.0.1:{PORT}"}
        for args in spec["runs"]:
            for k, v in urls.items():
                args = [a.replace(k, v) for a in args]
            p = subprocess.run([*exe, *args], capture_output=True, text=True,
                               timeout=spec.get("timeout_s", 600))
            print(json.dumps({"args": args, "rc": p.returncode, "stdout": p.stdout,
                              "stderr": p.stderr}), flush=True)
    finally:
        mock.kill()
        mock.wait()
    print(json.dumps({"router": {"packets": router.packets, "late_ms": router.late_ms}}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
