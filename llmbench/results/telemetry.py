"""The result contract's telemetry: what the server's machine did over a window (a ramp step's
hold, a whole run), and what the server was. Built by llmbench/analysis/telemetry.py from the
samples of telemetry.jsonl; a field a run did not measure is None, never 0.

Units are in the names: ``cpu_s`` CPU seconds, ``cores`` CPU seconds per second (2.0 = two cores
busy), ``*_bytes``, ``*_mib``, ``*_w``, ``*_j``. A process's CPU counts user and system time of
every process in its tree (threads included), from /proc's own accounting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from llmbench.results.contract import Part, Value


@dataclass(frozen=True)
class ProcessUse(Value):
    """A process tree's use of its machine over a window."""
    cpu_s: float | None = None            # CPU seconds (user + system) in the window
    cores: float | None = None            # cpu_s / the window: cores busy on average
    cores_max: float | None = None        # the busiest sample interval in the window
    rss_bytes_max: int | None = None      # resident memory, the most seen
    threads_max: int | None = None
    pids: int | None = None               # processes in the tree, the most seen
    pid: int | None = None                # the tree's root
    covered_s: float = 0.0                # how much of the window the samples covered


@dataclass(frozen=True)
class MachineUse(Value):
    """A whole machine over a window: this one (from /proc, ``source`` "proc") or the server's
    (a node exporter, "node_exporter")."""
    source: str = "proc"
    cpus: int | None = None
    busy_cores: float | None = None       # user + nice + system + irq + softirq, all processes
    steal_cores: float | None = None      # taken by the hypervisor
    modes: dict[str, float] = field(default_factory=dict)    # cores per mode (node exporter)
    mem_total_bytes: int | None = None
    mem_used_bytes_max: int | None = None  # total - available, the most seen
    load1_max: float | None = None
    net_rx_bytes_s: float | None = None
    net_tx_bytes_s: float | None = None
    covered_s: float = 0.0

    @property
    def busy_share(self) -> float | None:
        if self.busy_cores is None or not self.cpus:
            return None
        return self.busy_cores / self.cpus


@dataclass(frozen=True)
class GpuUse(Value):
    """The GPUs over a window, added up (power, energy, memory) or averaged (utilisation).
    ``energy_source``: "counter" when every GPU has an energy counter at both ends
    (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, NVML's total energy), else "power" (integrated)."""
    via: str | None = None                # dcgm | nvml | amdsmi
    count: int = 0
    name: str | None = None
    util_pct_mean: float | None = None
    util_pct_max: float | None = None
    fb_used_mib_max: float | None = None
    fb_total_mib: float | None = None
    power_w_mean: float | None = None
    energy_j: float | None = None
    energy_source: str | None = None      # counter | power
    output_tokens: float | None = None    # output tokens generated in the window
    j_per_token: float | None = None
    tokens_per_j: float | None = None
    sm_clock_mhz_mean: float | None = None
    temp_c_max: float | None = None
    xid: list[dict[str, Any]] = field(default_factory=list)  # {gpu, code}: XID errors seen
    covered_s: float = 0.0


@dataclass(frozen=True)
class Telemetry(Value):
    """What the server's machine did over one window: ``server`` and ``llmbench`` are process
    trees on this machine, ``machine`` this machine, ``host`` the node exporter's machine,
    ``gpu`` the GPUs. Any of them None when it was not sampled."""
    start: float | None = None            # perf_counter seconds, as the step's hold window
    end: float | None = None
    server: ProcessUse | None = None
    llmbench: ProcessUse | None = None
    machine: MachineUse | None = None
    host: MachineUse | None = None
    gpu: GpuUse | None = None

    @property
    def window_s(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    @property
    def empty(self) -> bool:
        return all(getattr(self, k) is None for k in ("server", "llmbench", "machine", "host", "gpu"))

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().to_dict().items() if v is not None}


@dataclass(frozen=True)
class ServerIdentity:
    """What produced the numbers, as far as the server (and its process here) said: ``kind``
    (llama.cpp, vllm, ollama, sglang, tgi, mock), ``parallel`` (what the pages say: slots,
    tp_size...), ``settings`` (its command line's known flags and OLLAMA_* variables)."""
    kind: str | None = None
    version: str | None = None
    model: str | None = None
    quantization: str | None = None
    parallel: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    gpus: dict[str, Any] = field(default_factory=dict)      # count, name, driver, memory_mib
    host: dict[str, Any] = field(default_factory=dict)      # cpus, mem_total_bytes, source
    data: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "ServerIdentity | None":
        if not isinstance(d, Mapping):
            return None
        return cls(kind=d.get("kind"), version=d.get("version"), model=d.get("model"),
                   quantization=d.get("quantization"), parallel=dict(d.get("parallel") or {}),
                   settings=dict(d.get("settings") or {}), gpus=dict(d.get("gpus") or {}),
                   host=dict(d.get("host") or {}), data=dict(d))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass
class RunTelemetry(Part):
    """run.json's "telemetry": the whole run's window, where the samples came from (``sources``,
    ``samples`` per source, the ``file`` beside run.json), and the notes: printed after the
    run, or ``quiet_notes`` (no GPU under --gpu-metrics auto)."""

    window: Telemetry | None = None
    sources: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    file: str | None = None
    notes: list[str] = field(default_factory=list)
    quiet_notes: list[str] = field(default_factory=list)
