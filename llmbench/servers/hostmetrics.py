"""A Prometheus node exporter's page -> one host sample (pure): CPU seconds per mode summed over
the CPUs, how many CPUs, memory, load and network bytes. Counters stay counters here; rates per
step are computed afterwards from the samples (llmbench/analysis/telemetry.py)."""

from __future__ import annotations

import math
from typing import Any

from llmbench.servers.prometheus import parse_prometheus

CPU = "node_cpu_seconds_total"
NAMES = (CPU, "node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes",
         "node_memory_MemFree_bytes", "node_load1", "node_load5", "node_load15",
         "node_network_receive_bytes_total", "node_network_transmit_bytes_total")
# interfaces that carry no traffic to or from the machine
_LOCAL_DEVICES = ("lo",)


class NotNodeExporter(ValueError):
    """The page has no node_cpu_seconds_total: not a node exporter (or its cpu collector is off)."""


def extract_node(text: str) -> dict[str, Any]:
    """The fields of a host sample from one node exporter page; raises NotNodeExporter when the
    page holds no CPU counters (an HTML page, another exporter)."""
    m = parse_prometheus(text, NAMES)
    series = m.get(CPU)
    if not series:
        raise NotNodeExporter(f"no {CPU} on the page")
    modes: dict[str, float] = {}
    cpus: set[str] = set()
    for labels, v in series:
        if not math.isfinite(v):    # NaN, or 1e400 read as inf: no reading, not "inf"
            continue
        mode = labels.get("mode", "?")
        modes[mode] = modes.get(mode, 0.0) + v
        cpus.add(labels.get("cpu", ""))
    out: dict[str, Any] = {"cpu_s": modes, "cpus": len(cpus)}

    def one(name: str) -> float | None:
        vals = [v for _, v in m.get(name, ()) if math.isfinite(v)]
        return vals[0] if vals else None
    for key, name in (("mem_total_bytes", "node_memory_MemTotal_bytes"),
                      ("mem_available_bytes", "node_memory_MemAvailable_bytes"),
                      ("mem_free_bytes", "node_memory_MemFree_bytes"),
                      ("load1", "node_load1"), ("load5", "node_load5"),
                      ("load15", "node_load15")):
        v = one(name)
        if v is not None:
            out[key] = v
    for key, name in (("net_rx_bytes", "node_network_receive_bytes_total"),
                      ("net_tx_bytes", "node_network_transmit_bytes_total")):
        vals = [v for labels, v in m.get(name, ())
                if labels.get("device") not in _LOCAL_DEVICES and math.isfinite(v)]
        if vals:
            out[key] = sum(vals)
    return out
