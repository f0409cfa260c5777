"""The server's machine over a window, from telemetry samples (pure): how many cores its process
used, how busy the machine and its GPUs were, the energy per output token; and the sentences
the verdict and compare say with them.

Samples are the lines of telemetry.jsonl (llmbench/servers/telemetry.py): counters stay
counters there (CPU seconds, ticks per mode, the GPUs' energy in mJ) and a window's figure is
the counter's change across the window, each end interpolated linearly between the two samples
around it, so a step's figure does not depend on where the one-second samples fell. A gauge
(memory, utilisation, power) is read from the samples inside the window.

Energy per output token is as README's "Server telemetry" defines it (``energy_source``,
``output_tokens_between``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmbench.results.schema import Run

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from llmbench.records.store import RecordStore
from llmbench.results.step import amount
from llmbench.results.telemetry import (GpuUse, MachineUse, ProcessUse, RunTelemetry,  # noqa: F401
                                        ServerIdentity, Telemetry)

# A process using this share of the cores it may use is saturating them.
SATURATED_SHARE = 0.85
# A machine this busy had no core to spare.
MACHINE_BUSY_SHARE = 0.9
# A server using at least this share of the cores it may use computes on the CPU.
CPU_BOUND_SHARE = 0.25
# A GPU this busy is the limit; under LOW it is not.
GPU_BUSY_PCT = 90.0
GPU_LOW_PCT = 50.0
BUSY_MODES = ("user", "nice", "system", "irq", "softirq")

Sample = Mapping[str, Any]


# -- counters over a window -------------------------------------------------------------------

# A window's end up to this far outside the samples is reached by carrying the nearest
# interval's rate (as Prometheus's increase() extrapolates to its range): a run's window
# starts a few milliseconds before the first sample lands. Further out it is cut.
REACH_S = 1.5


def _ends(ts: np.ndarray, a: float, b: float, reach_lo: bool = True,
          reach_hi: bool = True) -> tuple[float, float]:
    lo = a if a >= float(ts[0]) or (reach_lo and float(ts[0]) - REACH_S <= a) else float(ts[0])
    hi = b if b <= float(ts[-1]) or (reach_hi and b <= float(ts[-1]) + REACH_S) else float(ts[-1])
    return lo, hi


def _at(ts: np.ndarray, vs: np.ndarray, t: float) -> float:
    """The counter at t: interpolated inside the samples, carried at the first or last
    interval's rate just outside them."""
    if t < ts[0]:
        slope = (vs[1] - vs[0]) / (ts[1] - ts[0]) if ts[1] > ts[0] else 0.0
        return float(vs[0] - slope * (ts[0] - t))
    if t > ts[-1]:
        slope = (vs[-1] - vs[-2]) / (ts[-1] - ts[-2]) if ts[-1] > ts[-2] else 0.0
        return float(vs[-1] + slope * (t - ts[-1]))
    return float(np.interp(t, ts, vs))


def _delta(ts: np.ndarray, vs: np.ndarray, a: float, b: float, reach_lo: bool = True,
           reach_hi: bool = True) -> tuple[float | None, float]:
    """A counter's change over [a, b] (each end interpolated between the samples around it),
    and how long the part of the window the samples cover is. ``reach_*``: False where the
    series ends because what it counts ended (a process that exited), not the sampling."""
    if len(ts) < 2:
        return None, 0.0
    lo, hi = _ends(ts, a, b, reach_lo, reach_hi)
    if hi <= lo:
        return None, 0.0
    return _at(ts, vs, hi) - _at(ts, vs, lo), hi - lo


def _inside(samples: Sequence[Sample], a: float, b: float) -> list[Sample]:
    """The samples in [a, b]; with none there (a window under a second), the nearest one."""
    got = [s for s in samples if a <= s["t"] <= b]
    if got or not samples:
        return got
    mid = (a + b) / 2
    return [min(samples, key=lambda s: abs(s["t"] - mid))]


def _of(samples: Iterable[Sample], source: str) -> list[Sample]:
    return sorted((s for s in samples if s.get("source") == source and "t" in s),
                  key=lambda s: s["t"])


def _segments(samples: Sequence[Sample], part: str) -> list[list[Sample]]:
    """Runs of samples of one process tree (a restarted server is a new segment)."""
    out: list[list[Sample]] = []
    last = object()
    for s in samples:
        p = s.get(part)
        if not isinstance(p, Mapping) or p.get("cpu_s") is None:
            last = object()
            continue
        if p.get("pid") != last:
            out.append([])
            last = p.get("pid")
        out[-1].append(s)
    return out


def process_use(samples: Sequence[Sample], part: str, a: float, b: float) -> ProcessUse | None:
    """``part`` ("server" or "llmbench") of the local samples over [a, b]."""
    local = _of(samples, "local")
    cpu_s, covered, peaks = 0.0, 0.0, []
    seen: list[Sample] = []
    pid = None
    for seg in _segments(local, part):
        ts = np.array([s["t"] for s in seg], dtype=float)
        vs = np.array([s[part]["cpu_s"] for s in seg], dtype=float)
        # carried past its ends only where the sampling ended, not the process
        d, c = _delta(ts, vs, a, b, seg[0] is local[0], seg[-1] is local[-1])
        if d is None:
            continue
        cpu_s += d
        covered += c
        # the rate over each sample interval that overlaps [a, b]
        peaks += [float((vs[i] - vs[i - 1]) / (ts[i] - ts[i - 1])) for i in range(1, len(ts))
                  if ts[i] > a and ts[i - 1] < b and ts[i] > ts[i - 1]]
        seen += [s[part] for s in _inside(seg, a, b)]
        pid = seg[-1][part].get("pid")
    if covered <= 0:
        return None
    return ProcessUse(cpu_s=cpu_s, cores=cpu_s / covered, cores_max=max(peaks) if peaks else None,
                      rss_bytes_max=max((int(p.get("rss_bytes") or 0) for p in seen), default=None),
                      threads_max=max((int(p.get("threads") or 0) for p in seen), default=None),
                      pids=max((int(p.get("pids") or 0) for p in seen), default=None),
                      pid=pid, covered_s=covered)


def machine_use(samples: Sequence[Sample], a: float, b: float) -> MachineUse | None:
    """This machine (the local samples' /proc/stat and /proc/meminfo) over [a, b]."""
    local = [s for s in _of(samples, "local") if isinstance(s.get("machine"), Mapping)]
    if len(local) < 2:
        return None
    ts = np.array([s["t"] for s in local], dtype=float)
    m = [s["machine"] for s in local]
    total, covered = _delta(ts, np.array([x["total_s"] for x in m], dtype=float), a, b)
    if total is None or total <= 0:
        return None
    busy, _ = _delta(ts, np.array([x["busy_s"] for x in m], dtype=float), a, b)
    steal, _ = _delta(ts, np.array([x.get("steal_s", 0.0) for x in m], dtype=float), a, b)
    cpus = int(m[-1].get("cpus") or 1)
    inside = [x for x in (s["machine"] for s in _inside(local, a, b))]
    used = [x["mem_total_bytes"] - x["mem_available_bytes"] for x in inside
            if x.get("mem_total_bytes") and x.get("mem_available_bytes") is not None]
    return MachineUse(source="proc", cpus=cpus, busy_cores=(busy or 0.0) / total * cpus,
                      steal_cores=(steal or 0.0) / total * cpus,
                      mem_total_bytes=m[-1].get("mem_total_bytes"),
                      mem_used_bytes_max=max(used) if used else None, covered_s=covered)


def host_use(samples: Sequence[Sample], a: float, b: float) -> MachineUse | None:
    """The node exporter's machine over [a, b]: cores per CPU mode, memory, load, network."""
    host = [s for s in _of(samples, "host") if isinstance(s.get("cpu_s"), Mapping)]
    if len(host) < 2:
        return None
    ts = np.array([s["t"] for s in host], dtype=float)
    modes = sorted({k for s in host for k in s["cpu_s"]})
    per: dict[str, float] = {}
    covered = 0.0
    for mode in modes:
        d, covered = _delta(ts, np.array([s["cpu_s"].get(mode, 0.0) for s in host], dtype=float),
                            a, b)
        if d is not None:
            per[mode] = max(d, 0.0)
    total = sum(per.values())
    if total <= 0 or covered <= 0:
        return None
    cpus = int(host[-1].get("cpus") or 1)
    cores = {k: v / total * cpus for k, v in per.items()}
    inside = _inside(host, a, b)
    used = [s["mem_total_bytes"] - s["mem_available_bytes"] for s in inside
            if s.get("mem_total_bytes") and s.get("mem_available_bytes") is not None]
    loads = [s["load1"] for s in inside if s.get("load1") is not None]

    def rate(key: str) -> float | None:
        pts = [s for s in host if s.get(key) is not None]
        if len(pts) < 2:
            return None
        d, c = _delta(np.array([s["t"] for s in pts], dtype=float),
                      np.array([s[key] for s in pts], dtype=float), a, b)
        return None if d is None or c <= 0 else max(d, 0.0) / c
    return MachineUse(source="node_exporter", cpus=cpus,
                      busy_cores=sum(cores.get(m, 0.0) for m in BUSY_MODES),
                      steal_cores=cores.get("steal", 0.0), modes=cores,
                      mem_total_bytes=host[-1].get("mem_total_bytes"),
                      mem_used_bytes_max=max(used) if used else None,
                      load1_max=max(loads) if loads else None,
                      net_rx_bytes_s=rate("net_rx_bytes"), net_tx_bytes_s=rate("net_tx_bytes"),
                      covered_s=covered)


# -- tokens and energy --------------------------------------------------------------------------

def output_tokens_between(records: Any, a: float, b: float) -> float:
    """Output tokens generated in [a, b]: each successful reply's first token at its arrival,
    its other tokens spread evenly up to its last token (on the records' columns)."""
    st = RecordStore.of(records)
    if not len(st):
        return 0.0
    ok = st.col("ok")
    ft, end = st.col("first_token"), st.col("end")
    n = st.col("output_tokens").astype(float)
    n[n < 0] = np.nan                                # None is -2**31
    keep = ok & np.isfinite(ft) & np.isfinite(n) & (n >= 1)
    ft, end, n = ft[keep], end[keep], n[keep]
    end = np.where(np.isfinite(end), end, ft)
    first = ((ft >= a) & (ft < b)).astype(float)
    dur = end - ft
    overlap = np.clip(np.minimum(b, end) - np.maximum(a, ft), 0.0, None)
    share = np.where(dur > 0, overlap / np.where(dur > 0, dur, 1.0), first)
    return float(np.sum(first + (n - 1) * share))


def _gpu_points(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """Per GPU sample, the GPUs added up (power, memory, energy when all have it) or averaged."""
    out = []
    for s in samples:
        gpus = [g for g in s.get("gpus") or [] if isinstance(g, Mapping)]
        if not gpus:
            continue
        p: dict[str, Any] = {"t": s["t"], "count": len(gpus), "via": s.get("via"),
                             "name": next((g.get("name") for g in gpus if g.get("name")), None)}
        utils = [g["util_pct"] for g in gpus if g.get("util_pct") is not None]
        if utils:
            p["util"] = sum(utils) / len(utils)
        powers = [g["power_w"] for g in gpus if g.get("power_w") is not None]
        if len(powers) == len(gpus):
            p["power"] = sum(powers)
        energies = [g["energy_mj"] for g in gpus if g.get("energy_mj") is not None]
        if len(energies) == len(gpus):
            p["energy_j"] = sum(energies) / 1000.0
        used = [g["fb_used_mib"] for g in gpus if g.get("fb_used_mib") is not None]
        if used:
            p["fb_used"] = sum(used)
            free = [g["fb_free_mib"] for g in gpus if g.get("fb_free_mib") is not None]
            if len(free) == len(used):
                p["fb_total"] = sum(used) + sum(free)
        clocks = [g["sm_clock_mhz"] for g in gpus if g.get("sm_clock_mhz") is not None]
        if clocks:
            p["sm_clock"] = sum(clocks) / len(clocks)
        temps = [g["temp_c"] for g in gpus if g.get("temp_c") is not None]
        if temps:
            p["temp"] = max(temps)
        p["xid"] = [(str(g.get("gpu")), int(g["xid"])) for g in gpus if g.get("xid")]
        out.append(p)
    return out


def gpu_energy(points: Sequence[dict[str, Any]], a: float, b: float
               ) -> tuple[float | None, str | None, float]:
    """(joules, "counter" | "power", seconds covered) over [a, b]."""
    with_counter = [p for p in points if "energy_j" in p]
    if len(with_counter) == len(points) and len(points) >= 2:
        ts = np.array([p["t"] for p in points], dtype=float)
        es = np.array([p["energy_j"] for p in points], dtype=float)
        if np.all(np.diff(es) >= 0):                 # a counter that went back was reset
            d, c = _delta(ts, es, a, b)
            if d is not None:
                return d, "counter", c
    pw = [p for p in points if "power" in p]
    if len(pw) < 2:
        return None, None, 0.0
    ts = np.array([p["t"] for p in pw], dtype=float)
    ws = np.array([p["power"] for p in pw], dtype=float)
    lo, hi = _ends(ts, a, b)          # just outside the samples: the nearest power carried
    if hi <= lo:
        return None, None, 0.0
    inner = (ts > lo) & (ts < hi)
    xs = np.concatenate(([lo], ts[inner], [hi]))
    ys = np.concatenate(([np.interp(lo, ts, ws)], ws[inner], [np.interp(hi, ts, ws)]))
    return float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2.0)), "power", hi - lo


def gpu_use(samples: Sequence[Sample], a: float, b: float, records: Any = None) -> GpuUse | None:
    """The GPU samples over [a, b], with the energy per output token when ``records`` are given."""
    points = _gpu_points(_of(samples, "gpu"))
    if not points:
        return None
    inside = _inside(points, a, b)
    if not inside:
        return None
    utils = [p["util"] for p in inside if "util" in p]
    powers = [p["power"] for p in inside if "power" in p]
    used = [p["fb_used"] for p in inside if "fb_used" in p]
    totals = [p["fb_total"] for p in inside if "fb_total" in p]
    clocks = [p["sm_clock"] for p in inside if "sm_clock" in p]
    temps = [p["temp"] for p in inside if "temp" in p]
    energy, source, covered = gpu_energy(points, a, b)
    tokens = jpt = tpj = None
    if records is not None and energy is not None and covered > 0:
        lo, _ = _ends(np.array([p["t"] for p in points], dtype=float), a, b)
        tokens = output_tokens_between(records, lo, lo + covered)
        if tokens > 0 and energy > 0:
            jpt, tpj = energy / tokens, tokens / energy
    power_mean = energy / covered if energy is not None and covered > 0 else (
        float(np.mean(powers)) if powers else None)
    xids = sorted({x for p in inside for x in p["xid"]})
    return GpuUse(via=inside[-1].get("via"), count=inside[-1]["count"], name=inside[-1].get("name"),
                  util_pct_mean=float(np.mean(utils)) if utils else None,
                  util_pct_max=max(utils) if utils else None,
                  fb_used_mib_max=max(used) if used else None,
                  fb_total_mib=totals[-1] if totals else None, power_w_mean=power_mean,
                  energy_j=energy, energy_source=source, output_tokens=tokens,
                  j_per_token=jpt, tokens_per_j=tpj,
                  sm_clock_mhz_mean=float(np.mean(clocks)) if clocks else None,
                  temp_c_max=max(temps) if temps else None,
                  xid=[{"gpu": g, "code": c} for g, c in xids], covered_s=covered)


# -- a window, steps, a run ---------------------------------------------------------------------

def window(samples: Sequence[Sample], a: float, b: float, records: Any = None) -> Telemetry | None:
    """Everything sampled over [a, b]; None when nothing was."""
    t = Telemetry(start=a, end=b, server=process_use(samples, "server", a, b),
                  llmbench=process_use(samples, "llmbench", a, b),
                  machine=machine_use(samples, a, b), host=host_use(samples, a, b),
                  gpu=gpu_use(samples, a, b, records))
    return None if t.empty else t


# the live views' window (terminal, dashboard, --metrics-port): the last few seconds
RECENT_S = 5.0


def recent(samples: Sequence[Sample], span_s: float = RECENT_S) -> Telemetry | None:
    """The server's machine over the last ``span_s`` seconds of its samples (the live views)."""
    if not samples:
        return None
    t_end = max((x.get("t") or 0.0) for x in samples)
    return window(samples, t_end - span_s, t_end)


def for_steps(steps: Sequence[Any], samples: Sequence[Sample], records: Any = None
              ) -> list[Telemetry | None]:
    """Each step's hold window (``results.schema.Step``s)."""
    return [window(samples, s.hold_start, s.hold_end, records)
            if s.hold_start is not None and s.hold_end is not None else None
            for s in steps]


def series(samples: Sequence[Sample], t0: float) -> dict[str, list[tuple[float, float]]]:
    """Per-second series for charts, by name, as (seconds since t0, value)."""
    out: dict[str, list[tuple[float, float]]] = {}
    local = _of(samples, "local")
    for part, name in (("server", "server_cores"), ("llmbench", "llmbench_cores")):
        for seg in _segments(local, part):
            for i in range(1, len(seg)):
                dt = seg[i]["t"] - seg[i - 1]["t"]
                if dt > 0:
                    out.setdefault(name, []).append(
                        (seg[i]["t"] - t0, (seg[i][part]["cpu_s"] - seg[i - 1][part]["cpu_s"]) / dt))
            for s in seg:
                out.setdefault(f"{part}_rss_gib", []).append((s["t"] - t0, s[part]["rss_bytes"] / 2**30))
    mach = [s for s in local if isinstance(s.get("machine"), Mapping)]
    for i in range(1, len(mach)):
        m0, m1 = mach[i - 1]["machine"], mach[i]["machine"]
        tot = m1["total_s"] - m0["total_s"]
        if tot > 0:
            out.setdefault("machine_cores", []).append(
                (mach[i]["t"] - t0, (m1["busy_s"] - m0["busy_s"]) / tot * (m1.get("cpus") or 1)))
    host = [s for s in _of(samples, "host") if isinstance(s.get("cpu_s"), Mapping)]
    for i in range(1, len(host)):
        c0, c1 = host[i - 1]["cpu_s"], host[i]["cpu_s"]
        tot = sum(c1.values()) - sum(c0.values())
        if tot > 0:
            busy = sum(c1.get(m, 0.0) - c0.get(m, 0.0) for m in BUSY_MODES)
            out.setdefault("host_cores", []).append(
                (host[i]["t"] - t0, busy / tot * (host[i].get("cpus") or 1)))
    for p in _gpu_points(_of(samples, "gpu")):
        if "util" in p:
            out.setdefault("gpu_util_pct", []).append((p["t"] - t0, p["util"]))
        if "power" in p:
            out.setdefault("gpu_power_w", []).append((p["t"] - t0, p["power"]))
        if "fb_used" in p:
            out.setdefault("gpu_mem_gib", []).append((p["t"] - t0, p["fb_used"] / 1024.0))
    return out


# -- what the verdict says -------------------------------------------------------------------------

# the server's own compute-thread setting, by the flag its command line uses: llama.cpp's -t,
# llama-cpp-python's --n_threads
THREAD_FLAGS = ("--threads", "--n_threads")


def _threads(ident: "ServerIdentity | Mapping[str, Any] | None") -> tuple[int | None, str | None]:
    """The server's thread setting (None: not a positive number, or not shown) and its flag."""
    idn = as_identity(ident)
    flag = next((f for f in THREAD_FLAGS if idn is not None and idn.settings.get(f) is not None),
                None)
    try:
        v = int(idn.settings[flag]) if idn is not None and flag is not None else None
    except (TypeError, ValueError):
        v = None
    return (v if v is not None and v > 0 else None), flag


def of_cores(used: float, cpus: int, ident: Mapping[str, Any]) -> str:
    """"1.0 of the 1 core its thread setting (-t 1) lets it use (2 on the machine)": the
    server's CPU read against what it can use, its thread setting where its command line
    shows one, else against the machine's cores, saying so."""
    threads, flag = _threads(ident)
    if threads is None:
        return f"{used:.1f} of the machine's {cpus} cores (its thread setting not known)"
    short = _SHORT.get(flag or "", flag)
    if threads < cpus:
        return (f"{used:.1f} of the {threads} core{'s' if threads != 1 else ''} its thread "
                f"setting ({short} {threads}) lets it use ({cpus} on the machine)")
    return f"{used:.1f} of {cpus} cores (its thread setting {short} {threads})"


def core_budget(meta: Mapping[str, Any], ident: Mapping[str, Any]) -> tuple[float | None, int | None, int | None]:
    """(cores the server can keep busy, the machine's cores, its thread setting): the CPUs it
    may run on, fewer when llama.cpp's -t caps its decode threads."""
    local = meta.get("local") or {}
    cpus = local.get("server_cpus") or local.get("cpus")
    threads, _ = _threads(ident)
    if not cpus:
        return None, None, threads
    return float(min(cpus, threads) if threads else cpus), int(local.get("cpus") or cpus), threads


def _c(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


def cpu_reading(first: Telemetry | None, broke: Telemetry | None, first_load: float,
                load: float, unit: str, itl_growth: float | None, meta: Mapping[str, Any],
                ident: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(cause, sentence) for a step whose gaps between tokens grew, from the server's CPU on
    this machine: "cpu" (it used all the cores it can), "machine_cpu" (the machine had none to
    spare), "not_cpu" (it had cores to spare), or (None, None) without telemetry."""
    if broke is None or broke.server is None or broke.server.cores is None:
        return None, None
    budget, cpus, threads = core_budget(meta, ident)
    if budget is None or cpus is None:
        return None, None
    used = broke.server.cores
    before = first.server.cores if first is not None and first.server is not None else None
    at = f" at {amount(load, unit)}" + (f" ({_c(before)} at {amount(first_load, unit)})"
                                         if before is not None and first_load != load else "")
    grew = f"the time between tokens grew {itl_growth:.1f}x" if itl_growth else "the gaps grew"
    of = of_cores(used, cpus, ident)
    if used >= SATURATED_SHARE * budget:
        return "cpu", (f"The server's process used {of}{at}, all it can use, while {grew}: "
                       "the CPU is saturated.")
    m = broke.machine
    # a server that computes on the CPU (a fair share of what it may use) starved of cores;
    # one that barely uses the CPU was not slowed by the want of it, busy machine or not
    if m is not None and m.busy_cores is not None and m.cpus and \
            m.busy_cores >= MACHINE_BUSY_SHARE * m.cpus and used >= CPU_BOUND_SHARE * budget:
        gen = broke.llmbench.cores if broke.llmbench is not None else None
        other = max(m.busy_cores - used - (gen or 0.0), 0.0)
        return "machine_cpu", (
            f"The machine's CPU was saturated{at.split(' (')[0]}: {m.busy_cores:.1f} of {m.cpus} "
            f"cores busy, the server's process {used:.1f}, llmbench {_c(gen)}, other processes "
            f"{other:.1f}; {grew} because the server could not get more cores.")
    hint = ("look at memory bandwidth or the server's thread setting (-t"
            + (f" {threads}" if threads else "") + ")")
    gpu = broke.gpu is not None
    return "not_cpu", (f"The gaps grew but the server used {of}{at}: not "
                       f"CPU compute; {hint}" + ("" if gpu else
                                                 ", or, if it computes on a GPU, read the GPU "
                                                 "(--gpu-metrics)") + ".")


def queue_cpu_sentence(first: Telemetry | None, broke: Telemetry | None, first_load: float,
                       load: float, unit: str, meta: Mapping[str, Any],
                       ident: Mapping[str, Any]) -> str | None:
    """For a step that queued (gaps flat): the server's CPU beside it, so nobody reads the
    queue as a CPU limit."""
    if broke is None or broke.server is None or broke.server.cores is None:
        return None
    _, cpus, _ = core_budget(meta, ident)
    if not cpus:
        return None
    before = first.server.cores if first is not None and first.server is not None else None
    flat = before is not None and abs(broke.server.cores - before) <= max(0.15 * before, 0.1)
    text = (f"The server's process used {of_cores(broke.server.cores, cpus, ident)} at "
            f"{amount(load, unit)}" + (f" ({before:.1f} at {amount(first_load, unit)})"
                                      if before is not None and first_load != load else ""))
    return text + (": no more with more users waiting, so its slots, not the CPU, set the limit."
                   if flat else ".")


def gpu_sentence(first: Telemetry | None, broke: Telemetry | None, first_load: float,
                 load: float, unit: str, kv_usage: float | None) -> tuple[str | None, str | None]:
    """(cause "gpu" | "not_gpu" | None, sentence): the GPUs at the broken step, beside the KV
    cache usage the server reported."""
    g = broke.gpu if broke is not None else None
    if g is None or g.util_pct_mean is None and g.fb_used_mib_max is None:
        return None, None
    parts = []
    if g.util_pct_mean is not None:
        before = first.gpu.util_pct_mean if first is not None and first.gpu is not None else None
        parts.append(f"{g.util_pct_mean:.0f}% busy" + (
            f" ({before:.0f}% at {amount(first_load, unit)})"
            if before is not None and first_load != load else ""))
    if g.fb_used_mib_max is not None:
        mem = f"{g.fb_used_mib_max / 1024:.1f}"
        if g.fb_total_mib:
            mem += f" of {g.fb_total_mib / 1024:.1f}"
        parts.append(f"{mem} GiB of memory used")
    who = "The GPU was" if g.count == 1 else f"The {g.count} GPUs were"
    text = f"{who} " + ", ".join(parts) + f" at {amount(load, unit)}"
    if kv_usage is not None:
        text += f", while the server reported its KV cache {kv_usage * 100:.0f}% full"
    if g.xid:
        text += ("; XID errors: " + ", ".join(f"{x['code']} on GPU {x['gpu']}" for x in g.xid)
                 + " (the driver reported a GPU fault)")
    cause = None
    if g.util_pct_mean is not None:
        if g.util_pct_mean >= GPU_BUSY_PCT:
            cause, text = "gpu", text + ": the GPU is saturated"
        elif g.util_pct_mean < GPU_LOW_PCT:
            cause, text = "not_gpu", text + ": not the GPU's compute"
    return cause, text + "."


def share_sentence(t: Telemetry | None, load: float, unit: str) -> str | None:
    """Where llmbench and the server share this machine: how much of it each used."""
    if t is None or t.machine is None or t.machine.busy_cores is None or t.server is None:
        return None
    m = t.machine
    server = t.server.cores or 0.0
    gen = t.llmbench.cores if t.llmbench is not None and t.llmbench.cores is not None else 0.0
    other = max(m.busy_cores - server - gen, 0.0)
    text = (f"On this machine ({m.cpus} cores) at {amount(load, unit)}: the server used "
            f"{server:.1f} cores, llmbench {gen:.1f}, other processes {other:.1f} "
            f"({(m.busy_share or 0) * 100:.0f}% busy in all)")
    if m.cpus and m.busy_cores >= MACHINE_BUSY_SHARE * m.cpus:
        users = {"the server": server, "llmbench": gen, "other processes": other}
        most = max(users, key=lambda k: users[k])
        text += f"; the machine was saturated, most of it going to {most}"
    return text + "."


def energy_sentence(t: Telemetry | None, load: float, unit: str) -> str | None:
    g = t.gpu if t is not None else None
    if g is None or g.j_per_token is None:
        return None
    how = ("the GPUs' energy counters" if g.energy_source == "counter"
           else "the GPUs' power integrated over the samples")
    return (f"Energy at {amount(load, unit)}: {g.j_per_token:.3g} J per output token "
            f"({g.tokens_per_j:.3g} tokens per joule, {g.power_w_mean:.0f} W on average; "
            f"from {how}).")


# -- what the server was --------------------------------------------------------------------------

SETTING_ORDER = ("--parallel", "--threads", "--threads-batch", "--ctx-size", "--batch-size",
                 "--ubatch-size", "--n-gpu-layers", "--flash-attn", "--cont-batching",
                 "--max-num-seqs", "--tensor-parallel-size", "--pipeline-parallel-size",
                 "--data-parallel-size", "--max-model-len", "--max-num-batched-tokens",
                 "--gpu-memory-utilization", "--quantization", "--kv-cache-dtype",
                 "--enable-prefix-caching", "--tp-size", "--dp-size", "--max-running-requests",
                 "--mem-fraction-static", "--max-concurrent-requests", "--max-batch-total-tokens",
                 "--num-shard", "--quantize", "--n_ctx", "--n_threads", "--n_batch",
                 "--n_gpu_layers", "--interrupt_requests")
_SHORT = {"--threads": "-t", "--threads-batch": "-tb", "--parallel": "-np", "--ctx-size": "-c",
          "--batch-size": "-b", "--ubatch-size": "-ub", "--n-gpu-layers": "-ngl"}
KIND_NAMES = {"llama.cpp": "llama.cpp", "vllm": "vLLM", "ollama": "Ollama", "sglang": "SGLang",
              "tgi": "TGI", "mock": "the llmbench mock", "llama-cpp-python": "llama-cpp-python",
              "lmstudio": "LM Studio", "koboldcpp": "KoboldCpp"}
# llama-cpp-python's server holds a lock around its one model: a queue has no setting to raise
ONE_AT_A_TIME = ("llama-cpp-python's server serves one request at a time (it has no parallel "
                 "setting): serve the model with llama.cpp's llama-server -np N, or run several "
                 "llama-cpp-python processes behind a router; --n_threads sets its threads.")


def as_identity(ident: "ServerIdentity | Mapping[str, Any] | None") -> ServerIdentity | None:
    """A server identity as the typed ``ServerIdentity``: run.json's "server" (``Run.server``)
    or the live one a run is measuring with (a dict, before the run is written)."""
    if ident is None or isinstance(ident, ServerIdentity):
        return ident
    return ServerIdentity.from_dict(ident)


def settings_text(ident: "ServerIdentity | Mapping[str, Any] | None") -> str:
    """The parallel settings as the user types them: "-np 4 -t 2", "OLLAMA_NUM_PARALLEL=4"."""
    idn = as_identity(ident)
    if idn is None:
        return ""
    s = dict(idn.settings)
    kind = idn.kind
    slots = idn.parallel.get("slots")
    if slots and "--parallel" not in s and "OLLAMA_NUM_PARALLEL" not in s:
        if kind in ("llama.cpp", "mock"):
            s["--parallel"] = slots
    words = []
    for k in SETTING_ORDER:
        if k in s:
            v = s[k]
            flag = _SHORT.get(k, k) if kind in ("llama.cpp", None) else k
            words.append(flag if v is True else f"{flag} {v}")
    for k in sorted(k for k in s if not k.startswith("-")):
        words.append(f"{k}={s[k]}")
    par = idn.parallel
    for k in ("tp_size", "max_running_requests", "max_concurrent_requests"):
        if k in par and f"--{k.replace('_', '-')}" not in s:
            words.append(f"{k}={par[k]}")
    return " ".join(str(w) for w in words)


FACETS = ("server", "settings", "model", "gpus", "host")


@dataclass(frozen=True)
class Facets:
    """An identity as short phrases, one per facet (None: not known)."""
    server: str | None = None
    settings: str | None = None
    model: str | None = None
    gpus: str | None = None
    host: str | None = None

    def known(self) -> bool:
        return any(getattr(self, k) for k in FACETS)


def facets(ident: "ServerIdentity | Mapping[str, Any] | None") -> Facets:
    """``ident``'s ``Facets``."""
    idn = as_identity(ident)
    if idn is None:
        return Facets()
    kind = idn.kind
    server = " ".join(x for x in (KIND_NAMES.get(kind, kind) if kind else None, idn.version)
                      if x)
    model = None
    if idn.model:
        model = f"{idn.model}" + (f" ({idn.quantization})" if idn.quantization else "")
    g, h = idn.gpus, idn.host
    gpus = host = None
    if g.get("count"):
        gpus = (f"{g['count']}x {g.get('name') or 'GPU'}"
                + (f" (driver {g['driver']})" if g.get("driver") else ""))
    if h.get("cpus"):
        host = f"{h['cpus']} cores" + (f", {float(h['mem_total_bytes']) / 2**30:.0f} GiB"
                                       if h.get("mem_total_bytes") else "")
    return Facets(server=server or None, settings=settings_text(idn) or None, model=model,
                  gpus=gpus, host=host)


def identity_line(ident: "ServerIdentity | Mapping[str, Any] | None") -> str | None:
    """"llama.cpp b4521 with -np 4 -t 2, model gemma-3-270m (Q4_K - Medium), on 2 cores, 24 GiB"."""
    f = facets(ident)
    if not f.known():
        return None
    text = f.server or "an unknown server"
    if f.settings:
        text += f" with {f.settings}"
    if f.model:
        text += f", model {f.model}"
    on = [x for x in (f.gpus, f.host) if x]
    if on:
        text += ", on " + " and ".join(on)
    return text


def _phrase(f: Facets, keys: Sequence[str], lead: bool) -> str:
    text = (f.server or "an unknown server") if lead or "server" in keys else ""
    if "settings" in keys:
        text += (" " if text else "") + f"with {f.settings or 'no parallel setting known'}"
    rest = []
    if "model" in keys:
        rest.append(f"model {f.model or 'unknown'}")
    if "gpus" in keys:
        rest.append(f"on {f.gpus or 'no GPU seen'}")
    if "host" in keys:
        rest.append(f"on {f.host or 'an unknown machine'}")
    for p in rest:
        text += (", " if text else "") + p
    return text


def identity_diff(a: "ServerIdentity | Mapping[str, Any] | None",
                  b: "ServerIdentity | Mapping[str, Any] | None",
                  names: tuple[str, str] = ("the candidate", "the baseline")) -> str | None:
    """What differed between two runs' servers: "the candidate ran llama.cpp b4521 with -np 4;
    the baseline b4480 with -np 2"; None when nothing known differed (or either is unknown)."""
    ia, ib = as_identity(a), as_identity(b)
    fa, fb = facets(ia), facets(ib)
    if ia is None or ib is None or not fa.known() or not fb.known():
        return None
    keys = [k for k in FACETS
            if (getattr(fa, k) or getattr(fb, k)) and getattr(fa, k) != getattr(fb, k)]
    if not keys:
        return None
    first = _phrase(fa, keys, lead=True)
    if "server" in keys and ia.kind == ib.kind and ib.version:
        fb = replace(fb, server=str(ib.version))     # the kind is said once: "the baseline b4480"
    return f"{names[0]} ran {first}; {names[1]} {_phrase(fb, keys, lead=False)}"


def identity_of(run: "Run") -> ServerIdentity | None:
    """A run's server identity (``results.schema.Run``; None for a run written before it
    existed, or a server that said nothing)."""
    ident = run.findings.server
    return ident if ident is not None and ident.data else None


def number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


def fmt_bytes(v: Any) -> str:
    f = number(v)
    if f is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if f >= size:
            return f"{f / size:.1f} {unit}"
    return f"{f:.0f} B"


# -- run.json's parts -----------------------------------------------------------------------------

def server_identity(ident: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """run.json's "server": what the pages and the process said, with the GPUs and the host."""
    out = dict(ident)
    g = meta.get("gpu") or {}
    gpus = [x for x in g.get("gpus") or [] if isinstance(x, Mapping)]
    if gpus:
        names = sorted({x["name"] for x in gpus if x.get("name")})
        drivers = sorted({x["driver"] for x in gpus if x.get("driver")})
        mems = [x["memory_mib"] for x in gpus if x.get("memory_mib")]
        out["gpus"] = {"count": len(gpus), "name": ", ".join(names) or None,
                       "driver": ", ".join(drivers) or None,
                       "memory_mib": mems[0] if mems and len(set(mems)) == 1 else mems or None,
                       "via": g.get("via")}
    local, host = meta.get("local") or {}, meta.get("host") or {}
    if local.get("server_pid"):
        out["host"] = {"cpus": local.get("cpus"), "server_cpus": local.get("server_cpus"),
                       "mem_total_bytes": local.get("mem_total_bytes"), "source": "this machine"}
    elif host.get("cpus"):
        out["host"] = {"cpus": host.get("cpus"), "mem_total_bytes": host.get("mem_total_bytes"),
                       "source": "node exporter"}
    return out


def run_section(samples: Sequence[Sample], meta: Mapping[str, Any], notes: Sequence[Any],
                a: float | None, b: float | None, records: Any = None) -> RunTelemetry:
    """run.json's "telemetry": the whole run's window, where the samples came from, the notes."""
    w = window(samples, a, b, records) if a is not None and b is not None and b > a else None
    counts: dict[str, int] = {}
    for s in samples:
        counts[str(s.get("source"))] = counts.get(str(s.get("source")), 0) + 1
    return RunTelemetry(window=w, sources=dict(meta), samples=counts,
                        file="telemetry.jsonl" if samples else None,
                        # printed after the run; the quiet ones (no GPU under --gpu-metrics
                        # auto) are not
                        notes=[getattr(n, "text", n) for n in notes
                               if getattr(n, "printed", True)],
                        quiet_notes=[n.text for n in notes if not getattr(n, "printed", True)])


# -- the verdict's telemetry -----------------------------------------------------------------------

@dataclass
class Reading:
    """What the server's machine adds to a verdict: evidence lines, advice that replaces the
    latency-based one (None: keep it), and the cause it names (``Verdict.cause``)."""
    evidence: list[str] = field(default_factory=list)
    advice: list[str] | None = None
    cause: str | None = None


def verdict_part(kind: str, first: Any, subject: Any, unit: str,
                 itl_growth: float | None, kv_usage: float | None,
                 info: Mapping[str, Any] | None) -> Reading:
    """The Reading of a verdict of ``kind`` about ``subject`` (the step that broke, or the
    last); nothing without telemetry, so such a verdict reads as before."""
    out = Reading()
    t1, t0 = subject.telemetry, first.telemetry          # results.schema.Step's
    if t1 is None:
        return out
    info = info or {}
    meta, ident = info.get("meta") or {}, info.get("identity") or {}
    l0, l1 = float(first.load), float(subject.load)
    ev = out.evidence
    if kind == "saturation":
        gcause, gtext = gpu_sentence(t0, t1, l0, l1, unit, kv_usage)
        cause, text = cpu_reading(t0, t1, l0, l1, unit, itl_growth, meta, ident)
        if gtext:
            ev.append(gtext)
        if text and not (gcause == "gpu" and cause == "not_cpu"):
            ev.append(text)
        out.cause = gcause if gcause == "gpu" else cause or gcause
        threads, _ = _threads(ident)
        if out.cause == "cpu":
            out.advice = ["The CPU is the limit: more or faster cores (or a GPU), a smaller or "
                             "more quantized model" + (", or a higher -t if the machine has "
                                                       "cores to spare" if threads else "")
                             + "; or accept fewer users."]
        elif out.cause == "machine_cpu":
            out.advice = ["The server did not get the cores it could use: run llmbench on "
                             "another machine, or stop what else runs on the server's, then "
                             "run the ramp again."]
        elif out.cause == "not_cpu":
            out.advice = ["Not the cores: CPU inference is usually limited by memory "
                             "bandwidth; check the thread setting (-t"
                             + (f" {threads}" if threads else "") + " against the cores), the "
                             "batch size, and whether the model fits in fast memory."]
        elif out.cause == "not_gpu":
            out.advice = ["The GPU was not busy while the gaps grew: look at the server's "
                             "CPU side (scheduling, tokenization), its batch settings, or "
                             "memory transfers."]
    elif kind == "queuing":
        if ident.get("kind") == "llama-cpp-python":
            out.advice = [ONE_AT_A_TIME]
        text = queue_cpu_sentence(t0, t1, l0, l1, unit, meta, ident)
        if text:
            ev.append(text)
        _, gtext = gpu_sentence(t0, t1, l0, l1, unit, kv_usage)
        if gtext:
            ev.append(gtext)
    if kind in ("held", "saturation", "queuing", "other"):
        e = energy_sentence(t1, l1, unit)
        if e:
            ev.append(e)
    if kind in ("held", "saturation", "queuing", "other", "load_generator"):
        s = share_sentence(t1, l1, unit)
        if s and (out.cause != "machine_cpu"):
            ev.append(s)
    return out


def console_lines(run: "Run") -> list[str]:
    """What a run or ramp (``results.schema.Run``) prints about the server and its machine
    (nothing when unknown)."""
    out = []
    line = identity_line(identity_of(run))
    if line:
        out.append(f"Server: {line}")
    w = run.findings.telemetry if run.kind == "run" else None
    if w is not None:
        parts = []
        if w.server is not None and w.server.cores is not None:
            parts.append(f"the server's process {w.server.cores:.2f} cores"
                         + (f" (max {w.server.cores_max:.2f})" if w.server.cores_max is not None
                            else "") + f", {fmt_bytes(w.server.rss_bytes_max)} resident")
        if w.llmbench is not None and w.llmbench.cores is not None and w.machine is not None:
            parts.append(f"llmbench {w.llmbench.cores:.2f}")
        if w.machine is not None and w.machine.busy_cores is not None:
            parts.append(f"this machine {w.machine.busy_cores:.2f} of {w.machine.cpus} busy")
        if w.host is not None and w.host.busy_cores is not None:
            parts.append(f"the server's machine {w.host.busy_cores:.2f} of {w.host.cpus} busy "
                         "(node exporter)")
        if parts:
            out.append("CPU over the run: " + "; ".join(parts) + ".")
        g = w.gpu
        if g is not None:
            gp = [f"{g.count} GPU{'s' if g.count != 1 else ''}"
                  + (f" ({g.name})" if g.name else "")]
            if g.util_pct_mean is not None:
                gp.append(f"{g.util_pct_mean:.0f}% busy")
            if g.power_w_mean is not None:
                gp.append(f"{g.power_w_mean:.0f} W")
            if g.j_per_token is not None:
                gp.append(f"{g.j_per_token:.3g} J per output token ({g.tokens_per_j:.3g} tokens/J,"
                          f" from {'energy counters' if g.energy_source == 'counter' else 'power'})")
            out.append("GPU over the run: " + ", ".join(gp) + ".")
    return out
