"""scripts/bench_wire.py's pcap reader and pairing, on a tiny capture written here."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bw():
    spec = importlib.util.spec_from_file_location("bench_wire", ROOT / "scripts" / "bench_wire.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_wire"] = mod
    spec.loader.exec_module(mod)
    return mod


def _ipv4_tcp(src: int, dst: int, payload: bytes, seg_pad: bytes = b"") -> bytes:
    tcp = struct.pack("!HHIIBBHHH", src, dst, 1, 1, 5 << 4, 0x18, 65535, 0, 0) + payload
    total = 20 + len(tcp)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
    return ip + tcp + seg_pad          # padding past the IP total length is not payload


def _ipv6_tcp(src: int, dst: int, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", src, dst, 1, 1, 5 << 4, 0x18, 65535, 0, 0) + payload
    ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp), 6, 64, b"\0" * 15 + b"\1",
                     b"\0" * 15 + b"\1")
    return ip + tcp


def _write_pcap(path: Path, packets: list[tuple[int, bytes]], link: int = 1,
                nano: bool = True, endian: str = "<") -> None:
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, link)]
    for t_ns, ip in packets:
        if link == 1:
            frame = b"\0" * 12 + (b"\x86\xdd" if ip[0] >> 4 == 6 else b"\x08\x00") + ip
        elif link == 0:
            frame = struct.pack("<I", 2) + ip
        else:
            frame = ip
        sec, ns = divmod(t_ns, 1_000_000_000)
        frac = ns if nano else ns // 1000
        out.append(struct.pack(endian + "IIII", sec, frac, len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))


REQ = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n"
       b"x-request-id: %s\r\ncontent-length: 2\r\n\r\n{}")
HEAD = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        b'be\r\ndata: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},'
        b'"finish_reason":null}]}\n\n\r\n')
TOK = b'9a\r\ndata: {"id":"c","choices":[{"index":0,"delta":{"content":" a"}}]}\n\n\r\n'


@pytest.mark.parametrize("link,nano,endian", [(1, True, "<"), (1, False, ">"), (0, True, "<"),
                                              (101, True, "<")])
def test_pairs_each_request_with_its_first_token_packet(bw, tmp_path, link, nano, endian):
    S = 8000
    pkts = [
        (1_000_000_000, _ipv4_tcp(50001, S, REQ % b"r-1")),
        (1_000_100_000, _ipv4_tcp(50002, S, REQ % b"r-2", seg_pad=b"\0" * 6)),
        (1_000_200_000, _ipv4_tcp(S, 50001, HEAD)),             # role chunk: not a token
        (1_000_300_000, _ipv4_tcp(50001, S, b"")),              # a bare ACK
        (1_101_000_000, _ipv4_tcp(S, 50002, HEAD + TOK)),       # head and token together
        (1_102_000_000, _ipv4_tcp(S, 50001, TOK)),
        (1_122_000_000, _ipv4_tcp(S, 50001, TOK)),              # a later token: ignored
        # the next request on the same connection pairs with its own first token
        (2_000_000_000, _ipv4_tcp(50001, S, REQ % b"r-3")),
        (2_050_000_000, _ipv4_tcp(S, 50001, TOK)),
    ]
    p = tmp_path / "x.pcap"
    _write_pcap(p, pkts, link, nano, endian)
    w = bw.pair(bw.read_pcap(p), S)
    assert w.packets == len(pkts)
    assert w.request_ns == {"r-1": 1_000_000_000, "r-2": 1_000_100_000, "r-3": 2_000_000_000}
    assert w.first_token_ns == {"r-1": 1_102_000_000, "r-2": 1_101_000_000,
                                "r-3": 2_050_000_000}


def test_ipv6_and_other_ports(bw, tmp_path):
    S = 9000
    pkts = [(5, _ipv6_tcp(40000, S, REQ % b"v6")), (6, _ipv4_tcp(1234, 80, REQ % b"other")),
            (7, _ipv6_tcp(S, 40000, TOK))]
    p = tmp_path / "y.pcap"
    _write_pcap(p, pkts)
    w = bw.pair(bw.read_pcap(p), S)
    assert w.request_ns == {"v6": 5} and w.first_token_ns == {"v6": 7}


def test_token_event_is_metrics_md_token(bw):
    assert bw.TOKEN_EVENT.search(b'"delta":{"content":"x"}')
    assert bw.TOKEN_EVENT.search(b'"delta":{"reasoning_content":"x"}')
    assert bw.TOKEN_EVENT.search(b'"delta":{"tool_calls":[{"index":0}]}')
    assert not bw.TOKEN_EVENT.search(b'"delta":{"role":"assistant","content":""}')
    assert not bw.TOKEN_EVENT.search(b'"delta":{},"finish_reason":"stop"')


def test_not_a_pcap(bw, tmp_path):
    p = tmp_path / "z.pcapng"
    p.write_bytes(b"\x0a\x0d\x0d\x0a" + b"\0" * 40)
    with pytest.raises(ValueError, match="pcapng"):
        list(bw.read_pcap(p))
