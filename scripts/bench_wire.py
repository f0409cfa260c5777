"""llmbench's TTFT against the wire: tcpdump on loopback as the reference (issue 28).

The built-in mock runs in another process; tcpdump captures its port on ``lo`` with nanosecond
time stamps; llmbench drives N closed-loop lock-step streams (all users start together, the
first wave is MEASURED: no warm-up, the connections are opened by the first requests). Then
the capture is read here (a small pcap reader: pcap global and record headers, Ethernet /
Linux cooked / BSD loopback / raw link types, IPv4 and IPv6, the TCP payload) and each request
is paired:

- its time on the wire: the client->server packet carrying its ``x-request-id: ...`` header
  (llmbench sends the whole request in one write, so it is one packet on loopback);
- its first token on the wire: the first server->client packet on that connection after it
  that carries a token event (a chat chunk whose delta has non-empty content, reasoning or
  tool calls; the role-only opening chunk is not one, as in METRICS.md).

The wire TTFT is the difference of the two (both pcap stamps, one clock), so the error of a
definition is llmbench's TTFT minus it, and the reference server's own intake delay (between
the packet and its handler) is never counted as client error. Reported per run:

- TTFT error p50/p99 (all requests, and without the first wave) for two definitions of when a
  request's clock starts: ``start`` (llmbench decided to send: today's Record.ttft) and
  ``sent`` (its bytes were handed to the socket);
- the mock's kernel arrival stamp (its recorder's ``arrival_ns``, SO_TIMESTAMPING) as the
  second reference: the server-side TTFT (first event send - arrival) against the wire TTFT,
  and the arrival stamp against the request packet's stamp (after converting the pcap's
  CLOCK_REALTIME to perf_counter's CLOCK_MONOTONIC), so where the two references differ shows;
- llmbench's send delay (sent - start) p50/p99, and the wire's view of it (request packet -
  start), all and in the first wave;
- CPU per request start and per token event, split as scripts/bench_client_cpu.py does:
  cpu = a * requests + b * events over the measured phase and a one-token phase.

``--workers N`` (N > 1, or auto; ``--cli`` for 1) drives the CLI in a subprocess (``llmbench run --workers N``) and
reads its run folder's requests.jsonl; its CPU is the subprocess tree's (rusage of children),
all-in per token event, start-up included.

Needs tcpdump (Debian: apt-get install tcpdump) and the right to capture (root).

  python scripts/bench_wire.py --streams 128 --tokens 100 --itl-ms 20 --prompt-tokens 128
  python scripts/bench_wire.py --streams 256 --tokens 40 --itl-ms 50
  python scripts/bench_wire.py --streams 256 --tokens 40 --itl-ms 50 --workers 2
  python scripts/bench_wire.py --repeat 3 ...       # medians over repeats are printed last
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.records.ids import id_of  # noqa: E402  (after the path is set)


# -- a small pcap reader ------------------------------------------------------------------

@dataclass
class Packet:
    t_ns: int               # capture time stamp, ns since the epoch (CLOCK_REALTIME)
    src: tuple[str, int]
    dst: tuple[str, int]
    payload: bytes          # the TCP payload as captured (the snap length may cut it)


LINK_NULL, LINK_ETHERNET, LINK_RAW, LINK_RAW_OLD, LINK_LOOP = 0, 1, 101, 12, 108
LINK_SLL, LINK_SLL2 = 113, 276


def _ip_str(raw: bytes) -> str:
    if len(raw) == 4:
        return ".".join(str(b) for b in raw)
    return ":".join(raw[i:i + 2].hex() for i in range(0, 16, 2))


def _tcp(ip: bytes) -> tuple[tuple[str, int], tuple[str, int], bytes] | None:
    """(src, dst, payload) of an IPv4 or IPv6 packet carrying TCP, else None."""
    if len(ip) < 20:
        return None
    version = ip[0] >> 4
    if version == 4:
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 6:
            return None
        total = struct.unpack_from("!H", ip, 2)[0]
        src, dst = ip[12:16], ip[16:20]
        # total 0: TSO'd packets captured before segmentation may say 0; take what is there
        seg = ip[ihl:total] if total else ip[ihl:]
    elif version == 6:
        if len(ip) < 40:
            return None
        nxt = ip[6]
        plen = struct.unpack_from("!H", ip, 4)[0]
        src, dst = ip[8:24], ip[24:40]
        off = 40
        end = 40 + plen if plen else len(ip)
        while nxt in (0, 43, 60) and off + 8 <= len(ip):    # hop-by-hop, routing, dest opts
            nxt, hlen = ip[off], (ip[off + 1] + 1) * 8
            off += hlen
        if nxt != 6:
            return None
        seg = ip[off:end]
    else:
        return None
    if len(seg) < 20:
        return None
    sport, dport = struct.unpack_from("!HH", seg, 0)
    doff = (seg[12] >> 4) * 4
    return (_ip_str(src), sport), (_ip_str(dst), dport), seg[doff:]


def read_pcap(path: str | Path) -> Iterator[Packet]:
    """The TCP packets of a classic pcap file (not pcapng), in file order."""
    with open(path, "rb") as fh:
        head = fh.read(24)
        if len(head) < 24:
            return
        magic = head[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            endian = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            endian = ">"
        else:
            raise ValueError(f"{path}: not a pcap file (magic {magic.hex()}; pcapng is not read)")
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        link = struct.unpack(endian + "I", head[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(endian + "IIII")
        while True:
            h = fh.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _orig = rec.unpack(h)
            data = fh.read(incl)
            if len(data) < incl:
                return                      # a capture cut mid-record
            t_ns = sec * 1_000_000_000 + (frac if nano else frac * 1000)
            ip = _link_payload(link, data, endian)
            if ip is None:
                continue
            got = _tcp(ip)
            if got is None:
                continue
            yield Packet(t_ns, got[0], got[1], got[2])


def _link_payload(link: int, data: bytes, endian: str) -> bytes | None:
    if link == LINK_ETHERNET:
        off, etype = 14, struct.unpack_from("!H", data, 12)[0] if len(data) >= 14 else 0
        while etype in (0x8100, 0x88A8) and len(data) >= off + 4:     # VLAN tags
            etype = struct.unpack_from("!H", data, off + 2)[0]
            off += 4
        return data[off:] if etype in (0x0800, 0x86DD) else None
    if link in (LINK_NULL, LINK_LOOP):
        return data[4:]                     # the address family; the IP version tells apart
    if link in (LINK_RAW, LINK_RAW_OLD):
        return data
    if link == LINK_SLL:
        return data[16:] if struct.unpack_from("!H", data, 14)[0] in (0x0800, 0x86DD) else None
    if link == LINK_SLL2:
        return data[20:] if struct.unpack_from("!H", data, 0)[0] in (0x0800, 0x86DD) else None
    raise ValueError(f"link type {link} is not read")


# -- pairing ------------------------------------------------------------------------------

REQUEST_ID = re.compile(rb"\r\nx-request-id: *([^\r\n]+)\r\n", re.IGNORECASE)
# a chat chunk with output: non-empty content / reasoning, or tool calls (METRICS.md); the
# role-only opening chunk ({"role":"assistant","content":""}) does not match
TOKEN_EVENT = re.compile(
    rb'"delta":\{(?:"(?:content|reasoning_content|reasoning)":"(?!")|"tool_calls":)')


@dataclass
class WireTimes:
    request_ns: dict[str, int] = field(default_factory=dict)       # request id -> packet time
    first_token_ns: dict[str, int] = field(default_factory=dict)   # request id -> packet time
    packets: int = 0


def pair(packets: Iterator[Packet], server_port: int) -> WireTimes:
    """Each request's packet (by its x-request-id) and the first server->client packet on
    the same connection after it that carries a token event."""
    out = WireTimes()
    waiting: dict[tuple[str, int], str] = {}     # client address -> request awaiting a token
    for p in packets:
        out.packets += 1
        if not p.payload:
            continue
        if p.dst[1] == server_port:
            m = REQUEST_ID.search(p.payload)
            if m is not None:
                sent = m.group(1).decode("latin-1").strip()
                # llmbench sends a UUID that carries the record's id (records.ids)
                rid = id_of(sent) or sent
                if rid not in out.request_ns:
                    out.request_ns[rid] = p.t_ns
                waiting[p.src] = rid
        elif p.src[1] == server_port:
            rid = waiting.get(p.dst)
            if rid is not None and TOKEN_EVENT.search(p.payload):
                out.first_token_ns[rid] = p.t_ns
                del waiting[p.dst]
    return out


# -- capture ------------------------------------------------------------------------------

class Capture:
    """tcpdump on loopback for one TCP port, nanosecond stamps, until stop()."""

    def __init__(self, path: str, port: int, snaplen: int = 1024, iface: str = "lo",
                 ipv4_data_only: bool = True) -> None:
        exe = shutil.which("tcpdump")
        if exe is None:
            sys.exit("tcpdump is not installed (Debian: apt-get install tcpdump)")
        # in-kernel filter: only packets with a TCP payload (pure ACKs are half the traffic
        # and never used), for IPv4; plain 'tcp port P' otherwise
        filt = (f"tcp port {port} and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)"
                if ipv4_data_only else f"tcp port {port}")
        self.cmd = [exe, "-i", iface, "-w", path, "-s", str(snaplen), "-B", "32768", "-n",
                    "-Z", "root", "--time-stamp-precision=nano", filt]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()          # "listening on lo, link-type ..."
        if "listening" not in line:
            self.proc.kill()
            raise RuntimeError(f"tcpdump did not start: {line.strip()} {self.proc.stderr.read()}")
        self.stats = ""

    def stop(self) -> str:
        if self.proc.poll() is None:
            time.sleep(0.2)                         # the last packets through the buffer
            self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        self.stats = " ".join(line.strip() for line in err.splitlines() if "packets" in line)
        return self.stats


def mono_minus_real_ns() -> int:
    """perf_counter_ns - time_ns, from the tightest of a few samples (to put pcap stamps,
    CLOCK_REALTIME, on the records' clock)."""
    best = None
    for _ in range(50):
        a = time.perf_counter_ns()
        r = time.time_ns()
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2 - r)
    assert best is not None
    return best[1]


# -- driving llmbench ---------------------------------------------------------------------

async def drive_in_process(url: str, a: argparse.Namespace, stop_capture) -> dict[str, Any]:
    from llmbench.client.request import Client, RequestParams
    from llmbench.client.target import make_target
    from llmbench.load.session import Session
    from llmbench.load.shapes.fixed import run_closed
    from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer

    tok = load_tokenizer("approx")
    n = max(a.streams * 40, 2000)
    wl = build_workload(WorkloadSpec(count=n, prompt_tokens=(a.prompt_tokens, a.prompt_tokens),
                                     output_tokens=(a.tokens, a.tokens)), tok)
    one = build_workload(WorkloadSpec(count=n, prompt_tokens=(a.prompt_tokens, a.prompt_tokens),
                                      output_tokens=(1, 1)), tok)
    c = Client(make_target(url + "/v1", "mock"), RequestParams(),
               max_connections=a.streams + 8)
    async with c:
        s = Session(c, None, run_id="w")
        cpu0 = time.process_time()
        await run_closed(s, wl.conversations, a.streams, None, a.seconds)   # first wave measured
        cpu = time.process_time() - cpu0
        records = list(s.records)
        stop_capture()
        calib = None
        if a.calibrate_seconds > 0:
            s.records.clear()
            s.run_id = "c"
            cpu1 = time.process_time()
            await run_closed(s, one.conversations, a.streams, None, a.calibrate_seconds)
            calib = (time.process_time() - cpu1, len(s.records),
                     sum(len(r.token_times) for r in s.records))
    return {"records": records, "cpu": cpu, "calib": calib}


def drive_cli(url: str, a: argparse.Namespace, out: str) -> dict[str, Any]:
    from llmbench.records.record import Record
    cmd = [sys.executable, "-m", "llmbench.cli", "run", "--url", url + "/v1", "--model", "mock",
           "--concurrency", str(a.streams), "--duration", f"{a.seconds:g}s",
           "--workers", str(a.workers), "--prompt-tokens", str(a.prompt_tokens),
           "--output-tokens", str(a.tokens), "--out", out, "--no-progress",
           "--server-probe", "off", "--warmup", "0", "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1, 2):
        raise RuntimeError(f"llmbench run failed ({p.returncode}): {p.stderr[-2000:]}")
    logs = sorted(Path(out).rglob("requests.jsonl"))
    if not logs:
        raise RuntimeError(f"no requests.jsonl under {out}: {p.stderr[-2000:]}")
    records = []
    with open(logs[-1], encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                records.append(Record.from_json(json.loads(line)))
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    warn = [ln for ln in (p.stdout + p.stderr).splitlines() if "sent its requests late" in ln]
    return {"records": records, "cpu": cpu, "calib": None, "warning": warn[:1]}


# -- the report ---------------------------------------------------------------------------

def pct(v: list[float], p: float) -> float:
    return float(np.percentile(v, p)) if len(v) else float("nan")


def first_wave(records: list[Any]) -> set[str]:
    """The first request of every user: the wave that started together."""
    first: dict[Any, Any] = {}
    for r in records:
        key = (r.worker, r.user)
        if key not in first or r.start < first[key].start:
            first[key] = r
    return {r.request_id for r in first.values()}


def analyse(records: list[Any], wire: WireTimes, mock_log: list[dict[str, Any]],
            offset_ns: int) -> dict[str, Any]:
    """Per-request errors and delays, in milliseconds."""
    sent_by_id = {e["request_id"]: e for e in mock_log}
    wave = first_wave(records)
    rows = []
    for r in records:
        if not r.ok or not r.token_times or r.request_id not in wire.first_token_ns \
                or r.request_id not in wire.request_ns:
            continue
        w_req, w_tok = wire.request_ns[r.request_id], wire.first_token_ns[r.request_id]
        wire_ttft = (w_tok - w_req) / 1e9
        ft = r.token_times[0]
        row = {"wave": r.request_id in wave,
               "err_start": (r.ttft - wire_ttft) * 1e3,
               "err_sent": ((ft - r.sent - wire_ttft) * 1e3) if r.sent is not None else np.nan,
               "send_delay": (r.send_delay * 1e3) if r.sent is not None else np.nan,
               # start -> the request on the wire (the client's delay as the wire sees it)
               "to_wire": ((w_req + offset_ns) / 1e9 - r.start) * 1e3,
               # the token packet on the wire -> llmbench's stamp (its read delay)
               "read_lag": (ft - (w_tok + offset_ns) / 1e9) * 1e3,
               "wire_ttft": wire_ttft * 1e3}
        e = sent_by_id.get(r.request_id)
        if e is not None and e.get("event_ns"):
            row["srv_minus_wire_ttft"] = ((e["event_ns"][0] - e["arrival_ns"]) / 1e9
                                          - wire_ttft) * 1e3
            row["arrival_minus_wire"] = (e["arrival_ns"] - (w_req + offset_ns)) / 1e6
            row["event_minus_wire"] = (e["event_ns"][0] - (w_tok + offset_ns)) / 1e6
            row["err_start_vs_srv"] = (r.ttft - (e["event_ns"][0] - e["arrival_ns"]) / 1e9) * 1e3
        rows.append(row)
    return {"rows": rows, "paired": len(rows), "records": len(records),
            "ok": sum(1 for r in records if r.ok), "wave": len(wave)}


def cpu_split(cpu: float, reqs: int, events: int, calib) -> tuple[float, float]:
    if calib is None:
        return float("nan"), cpu / max(events, 1) * 1e6
    c2, r2, e2 = calib
    try:
        a_, b_ = np.linalg.solve(np.array([[reqs, events], [r2, e2]], dtype=float),
                                 np.array([cpu, c2]))
    except np.linalg.LinAlgError:
        return float("nan"), cpu / max(events, 1) * 1e6
    return a_ * 1e6, b_ * 1e6


def summarise(res: dict[str, Any], drive: dict[str, Any]) -> dict[str, float]:
    rows = res["rows"]

    def col(name: str, wave: bool | None = None) -> list[float]:
        return [x[name] for x in rows if name in x and not np.isnan(x[name])
                and (wave is None or x["wave"] == wave)]
    recs = drive["records"]
    events = sum(len(r.token_times) for r in recs)
    per_start, per_event = cpu_split(drive["cpu"], len(recs), events, drive["calib"])
    out = {"paired": res["paired"], "records": res["records"], "ok": res["ok"],
           "cpu_per_start_us": per_start, "cpu_per_event_us": per_event,
           "cpu_per_event_allin_us": drive["cpu"] / max(events, 1) * 1e6}
    for name in ("err_start", "err_sent", "send_delay", "to_wire", "read_lag",
                 "srv_minus_wire_ttft", "arrival_minus_wire", "event_minus_wire",
                 "err_start_vs_srv"):
        for tag, sel in (("all", None), ("nowave", False), ("wave", True)):
            v = col(name, sel)
            out[f"{name}_{tag}_p50"] = pct(v, 50)
            out[f"{name}_{tag}_p99"] = pct(v, 99)
    sd = [r.send_delay * 1e3 for r in recs if r.send_delay is not None]
    out["send_delay_warning"] = bool(drive.get("warning")) or (pct(sd, 99) > 10.0)
    return out


def show(s: dict[str, float], label: str) -> None:
    f = lambda k: f"{s[k + '_p50']:+7.2f}/{s[k + '_p99']:<+7.2f}"  # noqa: E731
    print(f"--- {label}: {s['paired']} of {s['records']} requests paired ({s['ok']} ok)")
    print("  (ms, p50/p99)              all              without wave1    wave1 only")
    for k, name in (("err_start", "TTFT err, from start"), ("err_sent", "TTFT err, from sent"),
                    ("send_delay", "send delay sent-start"), ("to_wire", "start -> wire"),
                    ("read_lag", "wire -> token stamp"),
                    ("srv_minus_wire_ttft", "mock TTFT - wire TTFT"),
                    ("arrival_minus_wire", "arrival_ns - wire req"),
                    ("event_minus_wire", "event_ns - wire token"),
                    ("err_start_vs_srv", "TTFT err vs mock ref")):
        print(f"  {name:<24} {f(k + '_all')} {f(k + '_nowave')} {f(k + '_wave')}")
    print(f"  CPU: {s['cpu_per_start_us']:.1f} us per start, {s['cpu_per_event_us']:.1f} us per "
          f"token event ({s['cpu_per_event_allin_us']:.1f} all-in); send-delay warning: "
          f"{'YES' if s['send_delay_warning'] else 'no'}")


def one_run(a: argparse.Namespace) -> dict[str, float]:
    from llmbench.load.eventloop import run as run_loop
    from llmbench.mock_server import MockProcess, make_config
    from llmbench.mock_server.recorder import read_log

    with tempfile.TemporaryDirectory(prefix="bench_wire_") as d:
        log = os.path.join(d, "send.jsonl")
        pcap = os.path.join(d, "lo.pcap")
        cfg = make_config(None, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens=a.tokens)
        with MockProcess(cfg, record=log) as m:
            port = int(m.url.rsplit(":", 1)[1].split("/")[0])
            cap = Capture(pcap, port, a.snaplen)
            offset = mono_minus_real_ns()
            try:
                if a.cli:
                    drive = drive_cli(m.url, a, os.path.join(d, "runs"))
                    cap.stop()
                else:
                    drive = run_loop(drive_in_process(m.url, a, cap.stop), a.loop)
            finally:
                cap.stop()
            offset = (offset + mono_minus_real_ns()) // 2
        if a.keep_pcap:
            shutil.copy(pcap, a.keep_pcap)
        wire = pair(read_pcap(pcap), port)
        res = analyse(drive["records"], wire, read_log(log), offset)
    s = summarise(res, drive)
    s["tcpdump"] = cap.stats            # type: ignore[assignment]
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--calibrate-seconds", type=float, default=4.0,
                    help="one-token phase that splits CPU per start / per event (0: skip)")
    ap.add_argument("--workers", default="1",
                    help="N > 1 or auto: drive `llmbench run --workers N` in a subprocess")
    ap.add_argument("--cli", action="store_true", help="drive the CLI even with one worker")
    ap.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto")
    ap.add_argument("--snaplen", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep-pcap", help="copy the (last) capture here")
    ap.add_argument("--json-out", help="append each run's summary as a JSON line here")
    a = ap.parse_args()
    a.cli = a.cli or a.workers != "1"
    mode = f"CLI --workers {a.workers}" if a.cli else "one process, in-process"
    print(f"{a.streams} streams x {a.tokens} tokens {a.itl_ms:g} ms apart, TTFT {a.ttft_ms:g} ms, "
          f"{a.prompt_tokens}-token prompts, {a.seconds:g} s, {mode}; {os.cpu_count()} cores")
    runs = []
    for i in range(a.repeat):
        load = os.getloadavg()
        s = one_run(a)
        s["loadavg_before"] = load          # type: ignore[assignment]
        runs.append(s)
        show(s, f"run {i + 1}/{a.repeat}, load average before {load[0]:.2f} {load[1]:.2f}; "
                f"tcpdump: {s['tcpdump']}")
        if a.json_out:
            with open(a.json_out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"args": vars(a), **s}) + "\n")
    if len(runs) > 1:
        med = {k: float(np.nanmedian([r[k] for r in runs])) for k, v in runs[0].items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
        med["send_delay_warning"] = sum(bool(r["send_delay_warning"]) for r in runs)
        show(med, f"MEDIAN of {len(runs)} runs (warning count: {med['send_delay_warning']})")


if __name__ == "__main__":
    main()
