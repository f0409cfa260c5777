"""What Linux's /proc says about a process tree and the machine: pure parsers of its texts, and
the few reads that find a server's process and walk its tree.

The parsers take the text of one file and return numbers (tests feed them recorded texts); the
readers return None where a process has gone or cannot be read, never raise for that: a server
that exits mid-run is a note in the run folder, not a traceback. Everything here is blocking
and cheap (a handful of small reads); the sampler (servers/telemetry.py) calls it in a thread.

Clock ticks: utime and stime in /proc/PID/stat and the columns of /proc/stat count in
USER_HZ (``os.sysconf('SC_CLK_TCK')``, 100 on every Linux llmbench runs on).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

PROC = Path("/proc")
try:
    CLK_TCK = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):     # not Linux: nothing here is read anyway
    CLK_TCK = 100
try:
    PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    PAGE_BYTES = 4096

# /proc/stat's cpu columns, in order (man 5 proc); guest and guest_nice are already counted
# in user and nice, so they are never added to a total
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
             "guest_nice")
BUSY_MODES = ("user", "nice", "system", "irq", "softirq")
IDLE_MODES = ("idle", "iowait")


# -- parsers (pure) --------------------------------------------------------------------------

@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat llmbench reads (man 5 proc: proc_pid_stat)."""
    pid: int
    comm: str
    state: str
    ppid: int
    utime: int              # clock ticks in user mode, all threads
    stime: int              # clock ticks in kernel mode, all threads
    threads: int
    starttime: int          # clock ticks after boot when the process started
    rss_pages: int

    @property
    def cpu_ticks(self) -> int:
        return self.utime + self.stime


def parse_pid_stat(text: str) -> ProcStat | None:
    """One /proc/PID/stat line -> ProcStat; None when it is not one. The command name is in
    parentheses and may itself hold spaces and ')' ("(tmux: server)"), so the fields after it
    are split from the last ')'."""
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        return None
    try:
        pid = int(text[:open_].strip())
        rest = text[close + 1:].split()
        # rest[0] is field 3 (state); field n is rest[n - 3]
        return ProcStat(pid=pid, comm=text[open_ + 1:close], state=rest[0], ppid=int(rest[1]),
                        utime=int(rest[11]), stime=int(rest[12]), threads=int(rest[17]),
                        starttime=int(rest[19]), rss_pages=int(rest[21]))
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class CpuTimes:
    """/proc/stat's aggregate "cpu" line in clock ticks per mode, and how many CPUs it sums."""
    ticks: dict[str, int]
    cpus: int

    @property
    def busy(self) -> int:
        return sum(self.ticks.get(m, 0) for m in BUSY_MODES)

    @property
    def idle(self) -> int:
        return sum(self.ticks.get(m, 0) for m in IDLE_MODES)

    @property
    def steal(self) -> int:
        return self.ticks.get("steal", 0)

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal


def parse_proc_stat(text: str) -> CpuTimes | None:
    """/proc/stat -> the aggregate cpu line's ticks per mode and the count of cpuN lines."""
    ticks: dict[str, int] | None = None
    cpus = 0
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, _, values = line.partition(" ")
        if name == "cpu":
            try:
                nums = [int(v) for v in values.split()]
            except ValueError:
                return None
            ticks = dict(zip(CPU_MODES, nums))
        elif name[3:].isdigit():
            cpus += 1
    if ticks is None:
        return None
    return CpuTimes(ticks, cpus or 1)


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo -> bytes by name ("MemTotal", "MemAvailable", ...); its kB are KiB."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts:
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        out[name.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    return out


def parse_uptime(text: str) -> float | None:
    """/proc/uptime -> seconds since boot (its first number)."""
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None


# an address a loopback client reaches: the wildcard or the loopback address itself
_LOOPBACK_V4 = ("00000000", "0100007F")          # 0.0.0.0, 127.0.0.1 (little-endian words)
_LOOPBACK_V6 = ("00000000000000000000000000000000",     # ::
                "00000000000000000000000001000000",     # ::1
                "0000000000000000FFFF00000100007F",     # ::ffff:127.0.0.1
                "0000000000000000FFFF000000000000")     # ::ffff:0.0.0.0
_TCP_LISTEN = "0A"


def listening_inodes(text: str, port: int) -> set[int]:
    """Socket inodes listening on ``port`` on a loopback or wildcard address, from the text of
    /proc/net/tcp or /proc/net/tcp6 (local address as hex IP:PORT, state 0A is LISTEN)."""
    found: set[int] = set()
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != _TCP_LISTEN:
            continue
        addr, _, hex_port = parts[1].partition(":")
        try:
            if int(hex_port, 16) != port:
                continue
            inode = int(parts[9])
        except ValueError:
            continue
        if _reachable(addr.upper()):
            found.add(inode)
    found.discard(0)
    return found


def _reachable(ip: str) -> bool:
    """Whether a loopback client reaches an address (/proc/net/tcp's hex words)."""
    return ip in _LOOPBACK_V4 or ip in _LOOPBACK_V6 or (len(ip) == 8 and ip.endswith("7F"))


def listening_inodes_netlink(port: int) -> set[int] | None:
    """What listening_inodes finds, asked of the kernel's socket diagnostics (NETLINK_SOCK_DIAG,
    as ``ss -ltn`` does) for listening sockets only: /proc/net/tcp lists every socket, ~20 ms
    of CPU to read and parse on a machine with a few thousand in TIME_WAIT after a load test.
    None when netlink cannot be asked (then the files are read)."""
    import socket
    import struct
    found: set[int] = set()
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4)    # NETLINK_SOCK_DIAG
    except (OSError, AttributeError):
        return None
    try:
        sock.settimeout(2.0)
        for family in (socket.AF_INET, socket.AF_INET6):
            # nlmsghdr (SOCK_DIAG_BY_FAMILY, REQUEST|DUMP) + inet_diag_req_v2: TCP, LISTEN only
            req = struct.pack("=BBBBI48x", family, socket.IPPROTO_TCP, 0, 0, 1 << 10)
            sock.send(struct.pack("=IHHII", 16 + len(req), 20, 0x301, 1, 0) + req)
            done = False
            while not done:
                data = sock.recv(65536)
                if not data:
                    return None
                at = 0
                while at + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, at)
                    if kind == 3:                               # NLMSG_DONE
                        done = True
                        break
                    if kind == 2 or length < 16:                # NLMSG_ERROR
                        return None
                    msg = at + 16                               # inet_diag_msg
                    if length >= 16 + 72 and \
                            struct.unpack_from("!H", data, msg + 4)[0] == port:
                        raw = data[msg + 8:msg + 8 + (4 if family == socket.AF_INET else 16)]
                        ip = "".join(f"{int.from_bytes(raw[i:i + 4], sys.byteorder):08X}"
                                     for i in range(0, len(raw), 4))
                        inode = struct.unpack_from("=I", data, msg + 68)[0]
                        if inode and _reachable(ip):
                            found.add(inode)
                    at += (length + 3) & ~3
    except OSError:
        return None
    finally:
        sock.close()
    return found


def parse_cmdline(raw: bytes) -> list[str]:
    """/proc/PID/cmdline (NUL-separated) -> argv."""
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def parse_environ(raw: bytes, names: Iterable[str]) -> dict[str, str]:
    """The named variables of /proc/PID/environ (NUL-separated K=V), and no others: an
    environment holds secrets, so nothing else is ever read out of it."""
    wanted = set(names)
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        name = k.decode("utf-8", "replace")
        if sep and name in wanted:
            out[name] = v.decode("utf-8", "replace")
    return out


# -- readers (blocking, small) -----------------------------------------------------------------

def _read(path: Path | str) -> str | None:
    # plain os calls: this runs for every process of a tree each second (pathlib's objects
    # cost as much as the read)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stat(pid: int, proc: Path = PROC) -> ProcStat | None:
    text = _read(f"{proc}/{pid}/stat")
    return parse_pid_stat(text) if text else None


def read_cpu(proc: Path = PROC) -> CpuTimes | None:
    text = _read(proc / "stat")
    return parse_proc_stat(text) if text else None


def read_meminfo(proc: Path = PROC) -> dict[str, int]:
    text = _read(proc / "meminfo")
    return parse_meminfo(text) if text else {}


def read_uptime(proc: Path = PROC) -> float | None:
    text = _read(proc / "uptime")
    return parse_uptime(text) if text else None


def read_cmdline(pid: int, proc: Path = PROC) -> list[str]:
    try:
        return parse_cmdline((proc / str(pid) / "cmdline").read_bytes())
    except OSError:
        return []


def read_environ(pid: int, names: Iterable[str], proc: Path = PROC) -> dict[str, str]:
    """The named variables of a process's environment ({} when it is another user's)."""
    try:
        return parse_environ((proc / str(pid) / "environ").read_bytes(), names)
    except OSError:
        return {}


def pids(proc: Path = PROC) -> Iterator[int]:
    try:
        names = os.listdir(proc)
    except OSError:
        return
    for name in names:
        if name.isdigit():
            yield int(name)


def parents(proc: Path = PROC) -> dict[int, int]:
    """Every process's parent (pid -> ppid): the links of the whole machine's process tree.
    Only the parent is parsed out of each stat line (this runs every few seconds while the
    load runs, in a thread that shares the interpreter with the event loop)."""
    out: dict[int, int] = {}
    for pid in pids(proc):
        text = _read(f"{proc}/{pid}/stat")
        if not text:
            continue
        rest = text[text.rfind(")") + 2:]
        try:
            out[pid] = int(rest.split(" ", 2)[1])
        except (ValueError, IndexError):
            continue
    return out


def tree_of(root: int, stats: dict[int, ProcStat] | dict[int, int]) -> list[int]:
    """``root`` and all its descendants among ``stats`` (their stats, or pid -> ppid), root
    first; [] when root is gone."""
    if root not in stats:
        return []
    children: dict[int, list[int]] = {}
    for pid, st in stats.items():
        children.setdefault(st if isinstance(st, int) else st.ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


@dataclass(frozen=True)
class Found:
    """Who listens on a port: the process, or why it could not be told."""
    pid: int | None
    why: str | None = None


def find_listener(port: int, proc: Path = PROC) -> Found:
    """The process holding the socket that listens on ``port`` (a loopback or wildcard
    address), found as ``ss -ltnp`` does: /proc/net/tcp{,6} give the socket's inode, and the
    process whose /proc/PID/fd links to "socket:[inode]" holds it. A process of another user
    cannot be looked into without root: then say so."""
    inodes = listening_inodes_netlink(port) if proc == PROC else None
    if inodes is None:
        inodes = set()
        for name in ("tcp", "tcp6"):
            text = _read(proc / "net" / name)
            if text:
                inodes |= listening_inodes(text, port)
    if not inodes:
        return Found(None, f"nothing on this machine listens on port {port}")
    wanted = {f"socket:[{i}]" for i in inodes}
    denied = 0
    for pid in pids(proc):
        # plain names read relative to the fd directory's descriptor: pathlib's paths cost
        # more than the readlink (~2/3 of the scan's CPU)
        try:
            dir_fd = os.open(f"{proc}/{pid}/fd", os.O_RDONLY | os.O_DIRECTORY)
        except PermissionError:
            denied += 1
            continue
        except OSError:
            continue
        try:
            fds = os.listdir(dir_fd)
            for fd in fds:
                try:
                    if os.readlink(fd, dir_fd=dir_fd) in wanted:
                        return Found(pid)
                except OSError:
                    continue
        except PermissionError:
            denied += 1
        except OSError:
            continue
        finally:
            os.close(dir_fd)
    if denied:
        return Found(None, f"the process listening on port {port} is not readable by this "
                           "user (another user's); give its PID with --server-pid")
    return Found(None, f"no process holding port {port}'s socket could be found")


def cpus_of(pid: int) -> int | None:
    """How many CPUs the process may run on (its affinity: taskset, a cgroup cpuset)."""
    try:
        return len(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return None


# -- a tree's CPU over time --------------------------------------------------------------------

@dataclass
class TreeCpu:
    """A process tree's CPU time as one counter that only grows, although its processes come
    and go: each process's ticks are counted from when it was first seen (all of them when it
    started after the previous reading), and a process that exits keeps what it had."""

    counted_ticks: int = 0
    _last: dict[tuple[int, int], int] = field(default_factory=dict)   # (pid, starttime) -> ticks
    _last_uptime_ticks: float | None = None

    def update(self, stats: Iterable[ProcStat], uptime_s: float | None) -> int:
        """Count these processes' ticks since the last reading; return the total."""
        now: dict[tuple[int, int], int] = {}
        for st in stats:
            key = (st.pid, st.starttime)
            ticks = st.cpu_ticks
            before = self._last.get(key)
            if before is None:
                started_since = (self._last_uptime_ticks is not None
                                 and st.starttime >= self._last_uptime_ticks - 1)
                before = 0 if started_since else ticks
            self.counted_ticks += max(ticks - before, 0)
            now[key] = ticks
        self._last = now
        if uptime_s is not None:
            self._last_uptime_ticks = uptime_s * CLK_TCK
        return self.counted_ticks
